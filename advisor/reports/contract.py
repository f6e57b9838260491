"""The `classify --json` object: a file's diagnosis and the plan for its primary run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from advisor.core.taxonomy import UNKNOWN
from advisor.diagnosis.classify import RunVerdict, verdict_facts
from advisor.parsing.lines import clean_text
from advisor.parsing.parsed import Parsed
from advisor.parsing.values import FACT_KEYS
from advisor.planning.context import PlanContext
from advisor.planning.recommend import plan, summary


class Judged(Protocol):
    """A diagnosis of a whole input: `classify.Diagnosis`, or `stream.StreamDiagnosis` (whose
    `parsed` holds only the lines a report may cite, by position, and counts them all)."""

    @property
    def parsed(self) -> Sequence[Parsed]: ...
    @property
    def verdicts(self) -> list[RunVerdict]: ...
    @property
    def primary(self) -> RunVerdict | None: ...


def to_contract(diagnosis: Judged, input_format: str, malformed: int = 0) -> dict[str, Any]:
    """The `classify --json` object (plus candidates and the runs seen); `malformed` is how
    many journal lines the reader skipped."""
    verdict = diagnosis.primary
    parsed = diagnosis.parsed
    if verdict is None:
        return {
            "label": UNKNOWN,
            "confidence": 0.0,
            "corroborated": True,
            "evidence": [],
            "facts": dict.fromkeys(FACT_KEYS),
            "actions": [],
            "candidates": [],
            "runs": [],
            "input": {"format": input_format, "lines": 0, "malformed": malformed},
        }
    facts = verdict_facts(verdict, parsed, diagnosis.verdicts)
    actions = plan(
        verdict.label,
        verdict.confidence,
        facts,
        PlanContext(unit=verdict.run.unit),
        corroborated=verdict.corroborated,
    )
    return {
        "label": verdict.label,
        "confidence": verdict.confidence,
        "corroborated": verdict.corroborated,
        "evidence": _evidence(verdict, parsed),
        "facts": facts,
        "actions": summary(actions),
        "candidates": _candidates(verdict),
        "runs": [_run(v, parsed) for v in diagnosis.verdicts],
        "input": {"format": input_format, "lines": len(parsed), "malformed": malformed},
    }


def _evidence(verdict: RunVerdict, parsed: Sequence[Parsed]) -> list[dict[str, Any]]:
    """The verdict's evidence lines: number, cleaned text and the catalogue message they are."""
    return [
        {
            "line": parsed[i].line.number,
            "text": clean_text(parsed[i].line.text),
            "message": parsed[i].messages[0] if parsed[i].messages else None,
        }
        for i in verdict.evidence
    ]


def _candidates(verdict: RunVerdict) -> list[dict[str, Any]]:
    """Every label considered for the run, with its source (and rule, for a rule's)."""
    return [
        {
            "label": c.label,
            "confidence": c.confidence,
            "source": c.source,
            **({"rule": c.rule_id} if c.rule_id else {}),
        }
        for c in verdict.candidates
    ]


def _run(verdict: RunVerdict, parsed: Sequence[Parsed]) -> dict[str, Any]:
    """One run seen in the input: its unit, invocation, verdict and line span."""
    return {
        "unit": verdict.run.unit,
        "invocation_id": verdict.run.invocation_id,
        "label": verdict.label,
        "confidence": verdict.confidence,
        "phase": verdict.phase,
        "first_line": parsed[verdict.run.indexes[0]].line.number,
        "last_line": parsed[verdict.run.indexes[-1]].line.number,
    }
