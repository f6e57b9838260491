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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from advisor.core.errors import InputError
from advisor.diagnosis.cues import literal_cue, literal_cues
from advisor.diagnosis.rulefile import (
    TIERS,
    Rule,
    catalog_rules,
    load_file,
    shipped_rule_files,
)
from advisor.parsing.catalog import shipped_catalog
from advisor.parsing.parsed import Parsed
from advisor.parsing.sequence import Run
from advisor.parsing.values import convert

__all__ = [
    "Hit",
    "RuleSet",
    "build_ruleset",
    "cued_search",
    "load_rules",
    "match_run",
    "phase_at",
    "run_facts",
]

MORE_EVIDENCE: Final = 2  # further lines the winning rule matched, cited as evidence too


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
        self._bodies: list[str] | None = None  # of the run's lines, read once

    def first(self, pattern: re.Pattern[str]) -> int | None:
        key = pattern.pattern
        if key not in self._cache:
            # A line without one of the pattern's literals is not searched: most are not.
            if self._bodies is None:
                self._bodies = [self.parsed[i].body for i in self.run.indexes]
            cues = literal_cues(key)
            self._cache[key] = next(
                (
                    i
                    for i, body in zip(self.run.indexes, self._bodies, strict=True)
                    if cued_search(pattern, cues, body)
                ),
                None,
            )
        return self._cache[key]


def cued_search(pattern: re.Pattern[str], cues: tuple[str, ...] | None, body: str) -> bool:
    """Does `pattern` find something in `body`? Searched only when `body` holds one of
    `cues` (`literal_cues`: literals one of which every match contains; None: unknown)."""
    if cues is not None:  # a loop, not any(): this runs on every line a run keeps
        for cue in cues:
            if cue in body:
                break
        else:
            return False
    return pattern.search(body) is not None


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
        for pattern in rule.patterns:
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
                j
                for j in candidates
                if j > i and any(p.search(parsed[j].body) for p in rule.patterns)
            ][:MORE_EVIDENCE]
            return Hit(
                rule, i, phase, {k: v for k, v in stated.items() if v is not None}, support + more
            )
    return None
