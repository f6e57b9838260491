"""Trying one rule on a log (`advisor rules test`): on which run it fires, on which line."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from advisor.core.errors import InputError
from advisor.diagnosis.rulefile import Rule
from advisor.diagnosis.rules import build_ruleset, load_rules, match_run
from advisor.parsing.lines import LogLine
from advisor.parsing.parsed import parse
from advisor.parsing.sequence import segment


def find_rule(rule_id: str, rules_dirs: Iterable[Path] = ()) -> Rule:
    """The rule RULE_ID in force (shipped, or from a `rules_dirs` folder); InputError when
    there is none."""
    rule = load_rules(rules_dirs).by_id(rule_id)
    if rule is None:
        raise InputError(f"no rule with id {rule_id!r} (see `advisor rules list`)")
    return rule


def try_rule(rule: Rule, lines: Sequence[LogLine]) -> list[dict[str, Any]]:
    """For each run of the log's `lines`, whether `rule` fires, on which line, in which
    phase, with which facts."""
    parsed = parse(lines)
    single = build_ruleset([rule])
    results = []
    for n, run in enumerate(segment(parsed), start=1):
        hits = match_run(single, run, parsed)
        hit = hits[0] if hits else None
        results.append(
            {
                "run": n,
                "fired": hit is not None,
                "line": parsed[hit.position].line.number if hit else None,
                "phase": hit.phase if hit else None,
                "facts": hit.facts if hit else {},
            }
        )
    return results
