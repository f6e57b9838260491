"""Operators correct a diagnosis, and the model learns from it.

`record` appends a `label.corrected` event for an incident (`advisor label`); the diagnosis
stays as it was, and the latest correction is the incident's operator label
(`advisor.views.read.corrections`). `training_records` turns the corrected incidents of a
store into training examples for `advisor model train --store`: the lines of the incident's
first run as the store holds them, labelled with the operator's label, weighted
`CORRECTION_WEIGHT` times a corpus example, one per incident (its latest correction) and one
per set of lines. `agreement` says, per operator label, how often the rules and model agree
with the operators.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any, Final

from pydantic import ValidationError

from advisor.core.errors import InputError
from advisor.core.events import NewEvent
from advisor.core.payloads import MAX_WHY, LabelCorrected
from advisor.core.records import stable_key
from advisor.core.taxonomy import LABELS, MODEL_LABELS
from advisor.diagnosis.classify import Candidate, diagnose
from advisor.diagnosis.model import LinearModel
from advisor.diagnosis.rules import RuleSet
from advisor.parsing.lines import LogLine
from advisor.store import EventStore
from advisor.views.fold.projector import Projector
from advisor.views.read.console import incident_by_id, resolve_incident
from advisor.views.read.corrections import Correction, latest_corrections
from advisor.views.read.reading import run_lines
from advisor.views.read.runs import run_row

__all__ = [
    "CORRECTION_WEIGHT",
    "SOURCE",
    "agreement",
    "format_agreement",
    "record",
    "training_records",
]

CORRECTION_WEIGHT: Final = 3.0  # an operator's label counts as three corpus examples
SOURCE: Final = "operator"


def record(store: EventStore, given: str, label: str, by: str, why: str = "") -> Correction:
    """Record that incident `given` (an id, a prefix, a short id's prefix) is `label`, said
    by `by` because `why`; the correction as stored. InputError for an unknown label or
    incident, or a label the incident already has from its operators."""
    if label not in LABELS:
        raise InputError(f"no label {label!r}: one of {', '.join(LABELS)}")
    if len(why) > MAX_WHY:
        raise InputError(f"--why: at most {MAX_WHY} characters, not {len(why)}")
    incident_id = resolve_incident(store, given)
    row = incident_by_id(store, incident_id)
    if row is None:  # (resolved a moment ago: only a rebuild in between can do this)
        raise InputError(f"incident {given!r}: no such incident")
    before = latest_corrections(store, incident_id).get(incident_id)
    replaces = before.payload.label if before is not None else row.label
    if before is not None and before.payload.label == label:
        said = f"already labelled {label} by {before.payload.by}"
        raise InputError(f"incident {incident_id} is {said}")
    now = time.time_ns() // 1000
    try:
        payload = LabelCorrected(
            incident_id=incident_id, label=label, by=by, why=why, replaces=replaces
        )
    except ValidationError as e:  # `by`: a name, no control characters
        raise InputError(f"label: {e.errors()[0]['msg']}") from e
    key = stable_key(f"corrected:{incident_id}:{label}:{by}:{now}".encode())
    event = NewEvent(stream=row.stream, time_us=now, source=SOURCE, key=key, payload=payload)
    store.append([event])
    Projector(store).catch_up()  # (the fold passes it by: read-only readers then need not)
    return latest_corrections(store, incident_id)[incident_id]


def _incident_lines(store: EventStore, incident_id: str) -> list[LogLine] | None:
    """The lines of the incident's first run (None: the incident or its run is gone)."""
    row = incident_by_id(store, incident_id)
    run = None if row is None else run_row(store, row.first_run_id)
    return None if run is None else list(run_lines(store, run))


def _corrected(store: EventStore) -> Iterable[tuple[str, Correction, list[LogLine]]]:
    for incident_id, correction in sorted(latest_corrections(store).items()):
        lines = _incident_lines(store, incident_id)
        if lines:
            yield incident_id, correction, lines


def training_records(store: EventStore) -> list[dict[str, Any]]:
    """The corrected incidents as corpus records ({id, label, lines, weight}): the labels the
    model may learn (not `unknown`), one per incident, and one per identical set of lines
    (the latest correction of them wins)."""
    by_lines: dict[tuple[str, ...], tuple[int, dict[str, Any]]] = {}
    for incident_id, correction, lines in _corrected(store):
        if correction.payload.label not in MODEL_LABELS:
            continue
        texts = tuple(line.text for line in lines)
        known = by_lines.get(texts)
        if known is not None and known[0] > correction.seq:
            continue
        record_ = {
            "id": f"store:{incident_id}",
            "label": correction.payload.label,
            "lines": list(texts),
            "weight": CORRECTION_WEIGHT,
        }
        by_lines[texts] = (correction.seq, record_)
    return [r for _, r in sorted(by_lines.values(), key=lambda kv: kv[1]["id"])]


def agreement(store: EventStore, rules: RuleSet, model: LinearModel | None) -> dict[str, Any]:
    """Per operator label: how many incidents operators gave it (n), and how often the label
    rules and model give the incident's lines now (`agreement`), the model's own label
    (`agreement_model_only`: a rule of confidence 0.85 or more keeps its label against the
    model) and the diagnosis recorded at the time (`agreement_recorded`) are theirs."""
    tally: dict[str, dict[str, int]] = {}
    for _, correction, lines in _corrected(store):
        primary = diagnose(lines, rules, model).primary
        said = correction.payload.label
        t = tally.setdefault(said, {"n": 0, "now": 0, "then": 0, "model": 0})
        t["n"] += 1
        t["now"] += primary is not None and primary.label == said
        t["then"] += correction.payload.replaces == said
        t["model"] += primary is not None and _model_label(primary.candidates) == said
    per_label = {
        label: {
            "n": t["n"],
            "agreement": round(t["now"] / t["n"], 3),
            "agreement_recorded": round(t["then"] / t["n"], 3),
            "agreement_model_only": round(t["model"] / t["n"], 3),
        }
        for label, t in sorted(tally.items())
    }
    total = sum(t["n"] for t in tally.values())
    return {
        "corrections": total,
        "agreement": round(sum(t["now"] for t in tally.values()) / total, 3) if total else None,
        "per_label": per_label,
    }


def _model_label(candidates: Sequence[Candidate]) -> str | None:
    """The model's own label among a verdict's candidates (None: no model, or it said none)."""
    said = [c for c in candidates if c.source == "model"]
    return max(said, key=lambda c: c.confidence).label if said else None


def format_agreement(report: dict[str, Any]) -> str:
    """`agreement`'s report for a person: one line per operator label."""
    if not report["corrections"]:
        return "operators: no corrected incidents in the store (advisor label INCIDENT LABEL)"
    lines = [
        f"operators: {report['corrections']} corrected incident(s), rules and model agree "
        f"with {report['agreement']:.1%} of them",
        f"  {'operator label':<20} {'n':>5} {'agree':>6} {'model':>6} {'at the time':>11}",
    ]
    for label, s in report["per_label"].items():
        lines.append(
            f"  {label:<20} {s['n']:>5} {s['agreement']:>6.3f} "
            f"{s['agreement_model_only']:>6.3f} {s['agreement_recorded']:>11.3f}"
        )
    return "\n".join(lines)
