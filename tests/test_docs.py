"""The documentation against the code: labels, rules, action kinds, bounds and the
`classify --json` keys it lists; no pointer to files outside the repository; relative links
that resolve."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, get_args

import orjson
import pytest

from advisor.core.engines import ALL as ENGINE_LIST
from advisor.core.engines.model import Engine, Flag, Range
from advisor.core.kinds import ActionKind
from advisor.core.steps import ActionStep
from advisor.core.taxonomy import LABELS
from advisor.diagnosis.rules import load_rules
from advisor.parsing.values import FACT_KEYS
from advisor.planning.bounds import TIMEOUT_STOP_BOUNDS_S
from tests.conftest import ROOT, run_advisor

DOCS = ROOT / "docs"
GOLDEN_LOG = ROOT / "tests/golden/sampler_warmup_oom/llama31-8b-v085-rtx4090-journalctl.log"

# Written in pieces so that this file does not name them itself.
FORBIDDEN = tuple(
    "".join(parts)
    for parts in (("..", "/shared"), ("DES", "IGN.md"), ("DOM", "AIN.md"), ("STY", "LE.md"))
)
FORBIDDEN_CITATION = re.compile("".join((r"\bDOM", r"AIN\s+\d")))
SCANNED = (
    "advisor",
    "ingest",
    "docs",
    "README.md",
    "tests",
    "bench",
    "data",
    "deploy",
    "rules",
    "migrations",
)
_BINARY_SUFFIXES = frozenset(
    {".gz", ".pyc", ".png", ".jpg", ".db", ".sqlite", ".parquet", ".journal", ".zip", ".whl"}
)
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_KEY_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|")
_CODE_HEADING = re.compile(r"^## `([^`]+)`\s*$")


def _read(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def _sections(text: str) -> dict[str, str]:
    """`## heading` → the text under it, up to the next `## ` heading."""
    out: dict[str, str] = {}
    heading: str | None = None
    for line in text.splitlines():
        if line.startswith("## "):
            heading = line[3:].strip()
            out[heading] = ""
        elif heading is not None:
            out[heading] += line + "\n"
    return out


def _code_sections(text: str) -> dict[str, str]:
    """The sections whose heading is one name in backticks (`## \\`kv_cache_oom\\``)."""
    return {
        m.group(1): body
        for heading, body in _sections(text).items()
        if (m := _CODE_HEADING.match(f"## {heading}"))
    }


def _table_keys(section: str) -> list[str]:
    """The first cells, in backticks, of a section's table rows."""
    return [m.group(1) for line in section.splitlines() if (m := _KEY_ROW.match(line))]


def _table_rows(section: str) -> dict[str, list[str]]:
    rows = {}
    for line in section.splitlines():
        m = _KEY_ROW.match(line)
        if m:
            rows[m.group(1)] = [c.strip() for c in line.strip().strip("|").split("|")][1:]
    return rows


# ------------------------------------------------------------------ taxonomy
def test_taxonomy_has_one_section_per_label_and_no_other() -> None:
    sections = _code_sections(_read("taxonomy.md"))
    assert sorted(sections) == sorted(LABELS)
    assert len(LABELS) == len(set(LABELS))


def test_every_shipped_rule_is_named_under_its_label() -> None:
    sections = _code_sections(_read("taxonomy.md"))
    missing = [
        f"{rule.id} ({rule.spec.label})"
        for rule in load_rules().rules
        if rule.message is None  # a catalogue message's rule: its entry describes it
        and f"`{rule.id}`" not in sections.get(rule.spec.label, "")
    ]
    assert not missing, f"rules not described under their label in docs/taxonomy.md: {missing}"


# ------------------------------------------------------------------ actions
def test_actions_has_one_section_per_kind_and_no_other() -> None:
    sections = _code_sections(_read("actions.md"))
    assert sorted(sections) == sorted(get_args(ActionKind))


def test_every_step_field_is_documented() -> None:
    fields = set(ActionStep.model_fields)
    in_actions = set(_table_keys(_sections(_read("actions.md"))["The fields of a step"]))
    in_classify = set(_table_keys(_sections(_read("classify.md"))["`actions` items"]))
    assert in_actions == fields
    assert in_classify == fields


def _number(value: float, integer: bool) -> str:
    return str(int(value)) if integer else f"{value:g}"


def test_bounds_table_matches_the_code() -> None:
    """The unit option's range in docs/actions.md; the flags' are each engine's, in
    docs/engines.md (`test_engines_md_says_what_the_registry_holds`)."""
    rows = _table_rows(_sections(_read("actions.md"))["Bounds"])
    expected: dict[str, Range] = {"TimeoutStopSec": TIMEOUT_STOP_BOUNDS_S}
    assert sorted(rows) == sorted(expected)
    for name, bound in expected.items():
        low, high = rows[name][0], rows[name][1]
        assert (low, high) == (
            _number(bound.low, bound.integer),
            _number(bound.high, bound.integer),
        ), name


# ------------------------------------------------------------------ classify --json
@pytest.fixture(scope="module")
def contract() -> dict[str, Any]:
    assert GOLDEN_LOG.is_file(), GOLDEN_LOG
    done = run_advisor("classify", "--json", str(GOLDEN_LOG))
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    result: dict[str, Any] = orjson.loads(done.stdout)
    return result


def test_classify_top_level_keys_are_the_documented_ones(contract: dict[str, Any]) -> None:
    documented = _table_keys(_sections(_read("classify.md"))["Top-level keys"])
    assert sorted(documented) == sorted(contract)


def test_classify_nested_keys_are_documented(contract: dict[str, Any]) -> None:
    sections = _sections(_read("classify.md"))
    assert contract["evidence"] and contract["candidates"] and contract["runs"]
    assert contract["actions"]
    samples = {
        "`evidence` items": contract["evidence"],
        "`candidates` items": contract["candidates"],
        "`runs` items": contract["runs"],
        "`actions` items": contract["actions"],
        "`input`": [contract["input"]],
    }
    for heading, items in samples.items():
        documented = set(_table_keys(sections[heading]))
        seen = {key for item in items for key in item}
        assert seen <= documented, f"{heading}: undocumented {sorted(seen - documented)}"


def test_classify_facts_table_lists_every_fact(contract: dict[str, Any]) -> None:
    documented = _table_keys(_sections(_read("classify.md"))["`facts`"])
    assert sorted(documented) == sorted(FACT_KEYS)
    assert sorted(contract["facts"]) == sorted(FACT_KEYS)


def test_classify_label_strings_are_taxonomy_labels(contract: dict[str, Any]) -> None:
    assert contract["label"] in LABELS
    assert all(run["label"] in LABELS for run in contract["runs"])


# ------------------------------------------------------------------ self-containment
def _text_files() -> list[Path]:
    files: list[Path] = []
    for name in SCANNED:
        top = ROOT / name
        if top.is_file():
            files.append(top)
            continue
        files.extend(
            p
            for p in sorted(top.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts and p.suffix not in _BINARY_SUFFIXES
        )
    return files


def forbidden_in(path: Path) -> list[str]:
    """`path:line: what` for each pointer to a file outside the repository."""
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return []
    found = []
    for n, line in enumerate(text.splitlines(), start=1):
        hits = [s for s in FORBIDDEN if s in line]
        hits += [m.group(0) for m in FORBIDDEN_CITATION.finditer(line)]
        found += [
            f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{n}: {h}"
            for h in hits
        ]
    return found


def test_the_forbidden_pointer_check_finds_them(tmp_path: Path) -> None:
    sample = tmp_path / "x.py"
    sample.write_text(
        "ok\n# see " + FORBIDDEN[1] + "\n# as in " + "".join(("DOM", "AIN")) + " 6.4\n",
        encoding="utf-8",
    )
    found = forbidden_in(sample)
    assert len(found) == 2 and found[0].endswith(":2: " + FORBIDDEN[1])
    assert forbidden_in(Path(__file__)) == []


def test_nothing_points_outside_the_repository() -> None:
    files = _text_files()
    assert len(files) > 50
    offenders = [hit for path in files for hit in forbidden_in(path)]
    assert not offenders, "pointers to files outside the repository:\n" + "\n".join(offenders)


def broken_links(markdown: Path, root: Path = ROOT) -> list[str]:
    """Relative links of a Markdown file whose target does not exist under `root`."""
    broken = []
    for target in _LINK.findall(markdown.read_text(encoding="utf-8")):
        if "://" in target or target.startswith(("mailto:", "#")):
            continue
        path = (markdown.parent / target.split("#", 1)[0]).resolve()
        if not path.exists() or not path.is_relative_to(root.resolve()):
            broken.append(f"{markdown.name}: {target}")
    return broken


def test_the_link_check_finds_a_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("x\n", encoding="utf-8")
    page.write_text(
        "[a](there.md) [b](missing.md#part) [c](https://example.org/x)\n", encoding="utf-8"
    )
    assert broken_links(page, tmp_path) == ["page.md: missing.md#part"]


def test_relative_links_resolve() -> None:
    pages = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
    broken = [b for page in pages for b in broken_links(page)]
    assert not broken, broken


def test_docs_index_links_every_page() -> None:
    index = _read("README.md")
    linked = set(_LINK.findall(index))
    pages = {p.name for p in DOCS.glob("*.md")} - {"README.md"}
    assert pages and pages <= linked, sorted(pages - linked)


# ------------------------------------------------------------------ engines
def _range(flag: Flag) -> str:
    if flag.switch:
        return "a switch"
    if flag.bound is None:
        return "not set by advisor"
    b = flag.bound
    return f"{_number(b.low, b.integer)}–{_number(b.high, b.integer)}"


def _code(items: Iterable[str]) -> str:
    return ", ".join(f"`{i}`" for i in items)


def engine_section(engine: Engine) -> str:
    """docs/engines.md's section of one engine, as the registry says it."""
    r = engine.recognition
    found = [
        ("its program ", r.programs),
        ("anywhere in a command: ", r.words),
        ("", tuple(f"{p} serve" for p in r.serve)),
        ("`python -m` ", r.modules),
        ("a path containing ", r.scripts),
        ("the images ", r.images),
        ("its log lines holding ", r.log_cues),
    ]
    ready = ", ".join(
        f"`{c.text}`" + (" (the whole line, after its log prefix)" if c.whole else "")
        for c in engine.ready
    )
    lines = [
        f"## {engine.title} (`{engine.name}`)",
        "",
        f"Source of its lines and flags: {engine.source}.",
        "",
        "- Recognised by: " + "; ".join(f"{say}{_code(x)}" for say, x in found if x) + ".",
        f"- Ready when a line of the new invocation says: {ready}.",
        f"- Its arguments echoed in: {_code(e.cue for e in engine.echo)}."
        if engine.echo
        else "- It echoes no argument list: what it received is read from its command line.",
        f"- Routine while it serves (a fleet's hosts keep these lines, [fleet.md](fleet.md)): "
        f"{_code(c.text for c in engine.routine)}."
        if engine.routine
        else "- No routine lines registered: every line it prints ships to the fleet.",
        "",
        "| flag | also spelled | environment variable | role | safe range | echoed as | fact |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in engine.flags:
        cells = [
            f"`{f.name}`",
            _code(f.aliases) or "—",
            f"`{f.env}`" if f.env else "—",
            f.role,
            _range(f),
            f"`{f.echo}`" if f.echo else "—",
            f"`{f.fact}`" if f.fact else "—",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    if engine.remedies:
        said = "; ".join(f"`{k}` → {_code(v)}" for k, v in engine.remedies.items())
        lines.append(f"Remedies: {said}.")
    if engine.advice:
        lines.append(f"Advice (a `notify`) for {_code(engine.advice)}.")
    return "\n".join(lines)


@pytest.mark.parametrize("engine", ENGINE_LIST, ids=lambda e: e.name)
def test_engines_md_says_what_the_registry_holds(engine: Engine) -> None:
    assert engine_section(engine) in _read("engines.md"), (
        f"docs/engines.md's section of {engine.name} differs from the registry: "
        "regenerate it with tests.test_docs.engine_section"
    )
