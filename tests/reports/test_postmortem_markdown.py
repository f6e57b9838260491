"""`advisor explain`'s post-mortem as people read it: Markdown with real structure (parsed with
markdown-it-py, asserted on its tokens), the latest incident, short ids, --json, and evidence
cut at a word."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from markdown_it import MarkdownIt
from markdown_it.token import Token

from advisor.cli.main import cli
from advisor.core.ids import short_id
from advisor.reports.render import clip
from tests.reports.seeded import FIRST, UNIT, seeded


def _explain(runner: CliRunner, sqlite_url: str, *args: str) -> Any:
    return runner.invoke(cli, ["explain", UNIT, *args, "--db", sqlite_url])


def _sections(tokens: list[Token]) -> dict[str, list[Token]]:
    """The tokens under each `##` heading, by its text."""
    sections: dict[str, list[Token]] = {}
    current: list[Token] | None = None
    heading = False
    for n, token in enumerate(tokens):
        if token.type == "heading_open":
            heading = True
            if token.tag == "h2":
                current = sections.setdefault(tokens[n + 1].content, [])
        elif token.type == "heading_close":
            heading = False
        elif current is not None and not heading:
            current.append(token)
    return sections


def _kinds(tokens: list[Token]) -> list[str]:
    """The blocks at the top level of a section."""
    return [t.type for t in tokens if t.level == 0 and (t.type.endswith("_open") or t.nesting == 0)]


def test_markdown_is_lists_and_code_blocks_not_paragraphs(
    sqlite_url: str, seed_journal: Path, seed_csv: Path
) -> None:
    runner = seeded(sqlite_url, seed_journal, seed_csv)
    md = _explain(runner, sqlite_url, "--incident", FIRST, "--format", "markdown")
    assert md.exit_code == 0, md.output
    report = json.loads(_explain(runner, sqlite_url, "--incident", FIRST, "--json").output)
    tokens = MarkdownIt("commonmark").parse(md.output)
    assert next(t.tag for t in tokens if t.type == "heading_open") == "h1"
    sections = _sections(tokens)
    assert list(sections) == [
        "Timeline",
        "Config",
        "Evidence",
        "Facts",
        "Plan",
        "GPU memory (used / total, over the incident)",
        "Other incidents of this service",
        "Similar incidents on this host",
    ]
    for title in ("Timeline", "Config", "Facts", "Other incidents of this service"):
        assert _kinds(sections[title])[0] == "bullet_list_open", title
        assert "paragraph_open" not in _kinds(sections[title]), title  # top level: a list only
    items = {
        title: sum(1 for t in sections[title] if t.type == "list_item_open")
        for title in ("Timeline", "Config", "Facts")
    }
    assert items == {
        "Timeline": len(report["timeline"]),
        "Config": len(report["config"]),
        "Facts": len(report["facts"]),
    }
    (evidence,) = [t for t in sections["Evidence"] if t.level == 0]
    assert evidence.type == "fence" and evidence.info == "text"
    assert len(evidence.content.splitlines()) == len(report["evidence"])
    plan = sections["Plan"]
    assert plan[0].type == "ordered_list_open"
    steps = [t for t in plan if t.type == "list_item_open" and t.level == 1]
    assert len(steps) == len(report["plan"]) == 6
    # The arithmetic is a code block inside its step's item, line for line.
    nested = [t for t in tokens if t.type == "fence" and t.level > 0]
    arithmetic = [line for s in report["plan"] for line in s.get("arithmetic", [])]
    assert [line for t in nested for line in t.content.splitlines()] == arithmetic
    assert any(
        line.startswith("fits: 90% × 1.17 GiB / 3.82 MiB = 281 → 256") for line in arithmetic
    )
    (others,) = [t for t in sections["Other incidents of this service"] if t.type == "inline"]
    assert others.content.startswith(f"`{report['others'][0]['short_id']}  ")


def test_evidence_is_cut_at_a_word_with_an_ellipsis(
    sqlite_url: str, seed_journal: Path, seed_csv: Path
) -> None:
    runner = seeded(sqlite_url, seed_journal, seed_csv)
    report = json.loads(_explain(runner, sqlite_url, "--incident", FIRST, "--json").output)
    text = _explain(runner, sqlite_url, "--incident", FIRST).output
    long = next(e["text"] for e in report["evidence"] if len(e["text"]) > 300)
    cut = clip(long, 300)
    assert cut.endswith("…") and len(cut) <= 300
    assert long.startswith(cut[:-1]) and long[len(cut) - 1] == " "  # the next char: a space
    assert f"#{report['evidence'][0]['seq']}  {cut}\n" in text
    assert clip("short", 300) == "short" and clip("x" * 400, 10) == "x" * 9 + "…"


def test_latest_is_last_seen_and_ids_are_taken_by_prefix(
    sqlite_url: str, seed_journal: Path, seed_csv: Path
) -> None:
    runner = seeded(sqlite_url, seed_journal, seed_csv)
    incidents = json.loads(runner.invoke(cli, ["incidents", "--json", "--db", sqlite_url]).output)
    first, wedged = (i["incident_id"] for i in incidents)
    assert [i["short_id"] for i in incidents] == [short_id(first), short_id(wedged)]
    listed = runner.invoke(cli, ["incidents", "--db", sqlite_url]).output.splitlines()
    assert [line.split()[0] for line in listed] == [short_id(first), short_id(wedged)]
    # Nothing acted on yet: the latest is the one that failed last.
    latest = json.loads(_explain(runner, sqlite_url, "--json").output)
    assert latest["incident"]["incident_id"] == wedged
    assert [o["incident_id"] for o in latest["others"]] == [first]
    # A step of the first incident's plan decided: that one is now the latest seen.
    approved = runner.invoke(cli, ["approve", short_id(first)[:7], "--db", sqlite_url])
    assert approved.exit_code == 0 and f"{short_id(first)}#1" in approved.output
    latest = json.loads(_explain(runner, sqlite_url, "--format", "json").output)
    assert latest["incident"]["incident_id"] == first
    text = _explain(runner, sqlite_url).output
    assert f"incident {short_id(first)} ({first})" in text
    assert f"\n{short_id(wedged)}  " in text  # listed among the others, by short id
    by_prefix = json.loads(
        _explain(runner, sqlite_url, "--incident", short_id(wedged)[:5], "--json").output
    )
    assert by_prefix["incident"]["incident_id"] == wedged
    ambiguous = _explain(runner, sqlite_url, "--incident", "gpu-node-07/")
    assert ambiguous.exit_code == 4
    assert f"{UNIT}: incident 'gpu-node-07/' is ambiguous: it fits 2" in ambiguous.output
    unknown = _explain(runner, sqlite_url, "--incident", "ffffffffffff")
    assert unknown.exit_code == 4 and "no such incident" in unknown.output
    both = _explain(runner, sqlite_url, "--json", "--format", "html")
    assert both.exit_code == 2 and "exclude each other" in both.output


def test_steps_are_rejected_by_short_id_and_a_plan_is_no_step(
    sqlite_url: str, seed_journal: Path, seed_csv: Path, tmp_path: Path
) -> None:
    runner = seeded(sqlite_url, seed_journal, seed_csv)
    actions = runner.invoke(cli, ["actions", "--db", sqlite_url]).output.splitlines()
    first = actions[0].split()[0]
    assert len(first.split("#")[0]) == 12 and first.endswith("#0")
    plan = first.split("#")[0]
    rejected = runner.invoke(cli, ["reject", f"{plan[:6]}#1", "--why", "test", "--db", sqlite_url])
    assert rejected.exit_code == 0 and rejected.output == f"rejected {plan}#1\n"  # its short id
    not_a_step = runner.invoke(cli, ["reject", plan, "--why", "test", "--db", sqlite_url])
    assert not_a_step.exit_code == 4
    assert f"'{plan}' names a plan; a step is PLAN#N" in not_a_step.output
    rollback = ["rollback", "gpu-node-07/", "--systemd-root", str(tmp_path), "--db", sqlite_url]
    ambiguous = runner.invoke(cli, rollback)
    assert (
        ambiguous.exit_code == 4
        and "action 'gpu-node-07/' is ambiguous: it fits" in ambiguous.output
    )
    done = runner.invoke(cli, [*rollback[:1], f"{plan}#1", *rollback[2:]])
    assert done.exit_code == 4 and re.search(  # the error names the step by its short id
        r"action [0-9a-f]{12}#1 changed no unit file", done.output
    )
