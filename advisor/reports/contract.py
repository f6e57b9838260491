"""The `classify --json` object: a file's diagnosis and the plan for its primary run."""

from __future__ import annotations

from typing import Any

from advisor.diagnosis.classify import Diagnosis, facts_of
from advisor.parsing.facts import FACT_KEYS
from advisor.parsing.lines import clean_text
from advisor.planning.recommend import PlanContext, plan, summary


def to_contract(diagnosis: Diagnosis, input_format: str) -> dict[str, Any]:
    """The `classify --json` object (plus candidates and the runs seen)."""
    verdict = diagnosis.primary
    parsed = diagnosis.parsed
    if verdict is None:
        return {
            "label": "unknown",
            "confidence": 0.0,
            "evidence": [],
            "facts": dict.fromkeys(FACT_KEYS),
            "actions": [],
            "candidates": [],
            "runs": [],
            "input": {"format": input_format, "lines": 0},
        }
    evidence = [
        {"line": parsed[i].line.number, "text": clean_text(parsed[i].line.text)}
        for i in verdict.evidence
    ]
    facts = facts_of(diagnosis)
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
        "evidence": evidence,
        "facts": facts,
        "actions": summary(actions),
        "candidates": [
            {
                "label": c.label,
                "confidence": c.confidence,
                "source": c.source,
                **({"rule": c.rule_id} if c.rule_id else {}),
            }
            for c in verdict.candidates
        ],
        "runs": [
            {
                "unit": v.run.unit,
                "invocation_id": v.run.invocation_id,
                "label": v.label,
                "confidence": v.confidence,
                "phase": v.phase,
                "first_line": parsed[v.run.indexes[0]].line.number,
                "last_line": parsed[v.run.indexes[-1]].line.number,
            }
            for v in diagnosis.verdicts
        ],
        "input": {"format": input_format, "lines": len(parsed)},
    }
