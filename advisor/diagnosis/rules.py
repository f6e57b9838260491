"""Declarative rules: TOML files in `rules/`, validated on load, matched against a run.

A rule file holds `[[rule]]` tables. A rule fires on a run when one of its `match` patterns
is found in a line (that line is the evidence; its named groups are facts), every `also`
pattern is found somewhere in the run, no `absent` pattern is, and its conditions on the
engine, the phase at the evidence line, readiness and the run's facts hold. Tiers are tried
in order — `failure`, then `fallback`, then `healthy` — and within the first tier that fires
the highest confidence wins (the earliest evidence breaks ties).

Users add a folder with `--rules DIR`; a rule there with the id of a shipped rule replaces it.
"""

from __future__ import annotations

import re
import re._parser as _sre_parse  # the regular-expression parser (Python 3.11+)
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from re._constants import LITERAL as _LITERAL
from typing import Any, Final, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from advisor.core.errors import InputError
from advisor.core.toml import load_toml
from advisor.parsing.catalog import Catalog, Condition, parse_condition, shipped_catalog
from advisor.parsing.facts import FACT_KEYS, FACT_TYPES, convert
from advisor.parsing.phases import Phase
from advisor.parsing.sequence import Parsed, Run

# The labels a rule may give: the taxonomy's failures, then `healthy`; `unknown` is no rule's.
FailureLabel = Literal[
    "sampler_warmup_oom",
    "kv_cache_oom",
    "weights_load_oom",
    "cuda_graph_oom",
    "runtime_oom",
    "gpu_memory_held",
    "wedged_stop",
    "nccl_error",
    "gpu_hardware_fault",
    "other_crash",
]
Label = Literal[FailureLabel, "healthy"]
FAILURE_LABELS: Final = get_args(FailureLabel)
LABELS: Final = (*FAILURE_LABELS, "unknown", "healthy")
TIERS: Final = ("failure", "fallback", "healthy")
MORE_EVIDENCE: Final = 2  # further lines the winning rule matched, cited as evidence too

_NAMED_GROUP = re.compile(r"\(\?P<(\w+)>")


class RuleSpec(BaseModel):
    """One rule as written in a file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]{0,80}$")
    label: Label
    confidence: float = Field(gt=0, le=1)
    tier: Literal["failure", "fallback", "healthy"] = "failure"
    description: str = ""
    engines: tuple[Literal["vllm", "sglang", "tgi"], ...] | None = None
    match: tuple[str, ...] = Field(min_length=1)
    also: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()
    phases: tuple[Phase, ...] | None = None
    after_ready: bool | None = None
    after_stop: bool | None = None
    died: bool | None = None
    facts: dict[str, bool | int | float | str] = Field(default_factory=dict)
    # `FACT OP NUMBER`: on the evidence line's facts and the run's (`kv_budget_gib < 0`).
    when: tuple[str, ...] = ()

    @field_validator("when")
    @classmethod
    def _conditions(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for text in value:
            parse_condition(text)
        return value

    @field_validator("match", "also", "absent")
    @classmethod
    def _compiles(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in patterns:
            try:
                compiled = re.compile(pattern)
            except re.error as e:
                raise ValueError(f"pattern {pattern!r} does not compile: {e}") from e
            for name in compiled.groupindex:
                if name not in FACT_TYPES:
                    raise ValueError(
                        f"named group {name!r} is not a fact (one of {', '.join(FACT_KEYS)})"
                    )
        return patterns

    @field_validator("facts")
    @classmethod
    def _known_facts(cls, facts: dict[str, Any]) -> dict[str, Any]:
        for name in facts:
            if name not in FACT_TYPES:
                raise ValueError(f"{name!r} is not a fact")
        return facts


class _RuleFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rule: list[dict[str, Any]] = Field(default_factory=list)


Reader = Callable[[re.Match[str]], dict[str, Any]]


@dataclass(frozen=True)
class Rule:
    spec: RuleSpec
    origin: str
    match: tuple[re.Pattern[str], ...]
    also: tuple[re.Pattern[str], ...]
    absent: tuple[re.Pattern[str], ...]
    when: tuple[Condition, ...] = ()
    # A rule made from a catalogue message: it looks only at lines parsing tagged with that
    # message, and reads its facts the message's way (units, signs).
    message: str | None = None
    reader: Reader | None = None

    @property
    def id(self) -> str:
        return self.spec.id


def _compile(spec: RuleSpec, origin: str) -> Rule:
    return Rule(
        spec,
        origin,
        tuple(re.compile(p) for p in spec.match),
        tuple(re.compile(p) for p in spec.also),
        tuple(re.compile(p) for p in spec.absent),
        tuple(parse_condition(t) for t in spec.when),
    )


def _field_path(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) or "(rule)"


def load_file(path: Path, text: str | None = None) -> list[Rule]:
    """Rules of one file; InputError naming the file, the rule and the field when bad."""
    data = load_toml(path, "rule file", text)
    try:
        container = _RuleFile.model_validate(data)
    except ValidationError as e:
        raise InputError(f"{path}: expected only [[rule]] tables: {e.errors()[0]['msg']}") from e
    rules = []
    for n, raw in enumerate(container.rule, start=1):
        rule_name = raw.get("id") if isinstance(raw.get("id"), str) else f"#{n}"
        try:
            spec = RuleSpec.model_validate(raw)
        except ValidationError as e:
            err = e.errors()[0]
            raise InputError(
                f"{path}: rule {rule_name}: field {_field_path(err['loc'])}: {err['msg']}"
            ) from e
        rules.append(_compile(spec, str(path)))
    return rules


def shipped_rule_files() -> list[tuple[str, str]]:
    """(name, text) of the rule files that ship with advisor."""
    folder = resources.files("advisor.rules")
    return sorted(
        (entry.name, entry.read_text(encoding="utf-8"))
        for entry in folder.iterdir()
        if entry.name.endswith(".toml")
    )


# An out-of-memory message means what the phase it happened in makes of it.
_OOM_BY_PHASE: Final = (
    ("weights", "weights_load_oom", {"phases": ["weights_loading"]}),
    ("graph", "cuda_graph_oom", {"phases": ["cuda_graph_capture"]}),
    ("sampler", "sampler_warmup_oom", {"phases": ["sampler_warmup"]}),
    ("kv", "kv_cache_oom", {"phases": ["kv_cache_allocation"]}),
    ("runtime", "runtime_oom", {"after_ready": True, "after_stop": False}),
    ("serving", "runtime_oom", {"phases": ["ready"]}),
)
_OOM_CONFIDENCE: Final = 0.92
# A catalogued readiness line means health only for a run that did not die; a catalogued
# crash message (most are relays: "Scheduler hit an exception") only when nothing says more.
_TIER_OF: Final[dict[str, dict[str, Any]]] = {
    "healthy": {"tier": "healthy", "died": False},
    "other_crash": {"tier": "fallback"},
}


def catalog_rules(catalog: Catalog) -> list[Rule]:
    """A rule for each catalogue message with a label (`oom`: one per phase it may hit)."""
    out = []
    for message in catalog.messages:
        spec = message.spec
        if spec.label is None:
            continue
        origin = f"{message.origin} (catalogue)"
        base = {
            "description": spec.meaning,
            "match": (message.template.regex.pattern,),
            "when": spec.when,
        }
        if spec.label == "oom":
            variants = [
                (
                    f"catalog.{spec.id}.{suffix}",
                    label,
                    min(message.confidence, _OOM_CONFIDENCE),
                    extra,
                )
                for suffix, label, extra in _OOM_BY_PHASE
            ]
        else:
            variants = [
                (f"catalog.{spec.id}", spec.label, message.confidence, _TIER_OF.get(spec.label, {}))
            ]
        for rule_id, label, confidence, extra in variants:
            rule_spec = RuleSpec.model_validate(
                {**base, **extra, "id": rule_id, "label": label, "confidence": confidence}
            )
            compiled = _compile(rule_spec, origin)
            out.append(
                Rule(
                    rule_spec,
                    origin,
                    (message.template.regex,),
                    (),
                    (),
                    compiled.when,
                    message.id,
                    message.template.read,
                )
            )
    return out


@dataclass(frozen=True)
class RuleSet:
    """The rules in force, with a cheap test of whether a line can match any of them: every
    pattern's longest mandatory literal (a substring test), else the pattern itself; a
    catalogue rule's line is one parsing tagged with its message."""

    rules: tuple[Rule, ...]
    cues: tuple[str, ...]
    uncued: tuple[re.Pattern[str], ...]
    messages: frozenset[str] = frozenset()

    def by_id(self, rule_id: str) -> Rule | None:
        return next((r for r in self.rules if r.id == rule_id), None)

    def may_match(self, body: str) -> bool:
        for cue in self.cues:
            if cue in body:
                return True
        return any(p.search(body) for p in self.uncued)


def literal_cue(pattern: str) -> str | None:
    """The longest run of literal characters that every match of `pattern` contains (taken
    from the top level of the parsed pattern only, so it is mandatory), if 3 or longer."""
    parsed = _sre_parse.parse(_NAMED_GROUP.sub("(?:", pattern))
    best, run = "", []
    for op, arg in parsed:
        if op is _LITERAL:
            run.append(chr(arg))
            continue
        if len(run) > len(best):
            best = "".join(run)
        run = []
    if len(run) > len(best):
        best = "".join(run)
    return best if len(best) >= 3 else None


def load_rules(extra_dirs: Iterable[Path] = ()) -> RuleSet:
    """Shipped rules, then each `--rules DIR` in order. A rule in a later folder replaces one
    with its id from the shipped rules or an earlier folder; within one folder ids are unique."""
    ordered: dict[str, Rule] = {}
    seen_in: dict[str, tuple[str, str]] = {}  # id → (folder, file)
    for name, text in shipped_rule_files():
        for rule in load_file(Path("rules") / name, text):
            _add(ordered, seen_in, rule, "(shipped)")
    for rule in catalog_rules(shipped_catalog()):
        _add(ordered, seen_in, rule, "(catalogue)")
    for folder in extra_dirs:
        if not folder.is_dir():
            raise InputError(f"{folder}: --rules expects a folder of .toml rule files")
        files = sorted(folder.glob("*.toml"))
        if not files:
            raise InputError(f"{folder}: no .toml rule files in this folder")
        for path in files:
            for rule in load_file(path):
                _add(ordered, seen_in, rule, str(folder))
    return build_ruleset(list(ordered.values()))


def _add(
    ordered: dict[str, Rule], seen_in: dict[str, tuple[str, str]], rule: Rule, folder: str
) -> None:
    previous = seen_in.get(rule.id)
    if previous is not None and previous[0] == folder:
        raise InputError(f"{rule.origin}: rule {rule.id}: id already used in {previous[1]}")
    ordered[rule.id] = rule
    seen_in[rule.id] = (folder, rule.origin)


def build_ruleset(rules: Sequence[Rule]) -> RuleSet:
    cues: set[str] = set()
    uncued: list[re.Pattern[str]] = []
    messages: set[str] = set()
    for rule in rules:
        if rule.message is not None:
            messages.add(rule.message)
            continue
        for text, compiled in zip(rule.spec.match, rule.match, strict=True):
            cue = literal_cue(text)
            if cue is None:
                uncued.append(compiled)
            else:
                cues.add(cue)
    return RuleSet(tuple(rules), tuple(sorted(cues)), tuple(uncued), frozenset(messages))


# ------------------------------------------------------------------ matching
@dataclass
class Hit:
    rule: Rule
    position: int  # the evidence line, as a position in the input
    phase: str | None
    facts: dict[str, Any] = field(default_factory=dict)
    support: list[int] = field(default_factory=list)  # further evidence positions

    @property
    def label(self) -> str:
        return self.rule.spec.label

    @property
    def confidence(self) -> float:
        return self.rule.spec.confidence


class _RunSearch:
    """Pattern searches over one run's lines, each done once."""

    def __init__(self, run: Run, parsed: Sequence[Parsed]) -> None:
        self.run = run
        self.parsed = parsed
        self._cache: dict[str, int | None] = {}

    def first(self, pattern: re.Pattern[str]) -> int | None:
        key = pattern.pattern
        if key not in self._cache:
            self._cache[key] = next(
                (i for i in self.run.indexes if pattern.search(self.parsed[i].body)), None
            )
        return self._cache[key]


def phase_at(run: Run, position: int, parsed: Sequence[Parsed] | None = None) -> str | None:
    """The phase a failure at `position` happened in: its traceback's frames say it best.
    A kernel message is not in step with the service's lines (a dmesg block pasted above
    them): it counts for the phase the run reached."""
    if parsed is not None and parsed[position].engine == "kernel":
        return next((tb.phase() for tb in run.tracebacks if tb.phase()), run.last_phase())
    for tb in run.tracebacks:
        if tb.indexes[0] <= position <= tb.indexes[-1] and position in tb.indexes:
            phase = tb.phase()
            if phase is not None:
                return phase
    # A re-raise in a parent process has no telling frames: the root cause's traceback,
    # the earliest one that has them, speaks for it.
    for tb in run.tracebacks:
        if tb.indexes[0] <= position:
            phase = tb.phase()
            if phase is not None:
                return phase
    return run.phase_before(position)


def _stated(rule: Rule, m: re.Match[str]) -> dict[str, Any]:
    """The facts a match states, read the rule's way."""
    if rule.reader is not None:
        return rule.reader(m)
    return {k: convert(k, v) for k, v in m.groupdict().items() if v is not None}


def run_facts(run: Run) -> dict[str, Any]:
    """The facts a run's condition checks see: config plus lifecycle."""
    return {**run.config, **run.event_facts}


def match_run(ruleset: RuleSet, run: Run, parsed: Sequence[Parsed]) -> list[Hit]:
    """Every rule that fires on the run (best first within tier order)."""
    candidates = [
        i
        for i in run.indexes
        if not parsed[i].facts.noise
        and (
            ruleset.may_match(parsed[i].body)
            or any(m in ruleset.messages for m in parsed[i].messages)
        )
    ]
    if not candidates:
        return []
    search = _RunSearch(run, parsed)
    facts = run_facts(run)
    hits: list[Hit] = []
    for rule in ruleset.rules:
        hit = _try(rule, run, parsed, candidates, search, facts)
        if hit is not None:
            hits.append(hit)
    hits.sort(key=lambda h: (TIERS.index(h.rule.spec.tier), -h.confidence, h.position))
    return hits


def _try(
    rule: Rule,
    run: Run,
    parsed: Sequence[Parsed],
    candidates: list[int],
    search: _RunSearch,
    facts: dict[str, Any],
) -> Hit | None:
    spec = rule.spec
    if spec.engines is not None and run.engine is not None and run.engine not in spec.engines:
        return None
    if spec.died is not None and run.died != spec.died:
        return None
    for key, wanted in spec.facts.items():
        if facts.get(key) != wanted:
            return None
    support = []
    for pattern in rule.also:
        found = search.first(pattern)
        if found is None:
            return None
        support.append(found)
    for pattern in rule.absent:
        if search.first(pattern) is not None:
            return None
    for i in candidates:
        body = parsed[i].body
        if rule.message is not None and rule.message not in parsed[i].messages:
            continue
        for pattern in rule.match:
            m = pattern.search(body)
            if m is None:
                continue
            phase = phase_at(run, i, parsed)
            if spec.phases is not None and phase not in spec.phases:
                continue
            if spec.after_ready is not None and (
                (run.ready_at is not None and run.ready_at < i) != spec.after_ready
            ):
                continue
            if spec.after_stop is not None and (
                (run.stop_at is not None and run.stop_at < i) != spec.after_stop
            ):
                continue
            stated = _stated(rule, m)
            if rule.when and not all(c.holds({**facts, **stated}) for c in rule.when):
                continue
            more = [
                j for j in candidates if j > i and any(p.search(parsed[j].body) for p in rule.match)
            ][:MORE_EVIDENCE]
            return Hit(
                rule, i, phase, {k: v for k, v in stated.items() if v is not None}, support + more
            )
    return None
