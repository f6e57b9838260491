"""Operators' corrections of incidents' labels (`label.corrected` events), read from the
events themselves: no projection holds them, so `advisor rebuild` has nothing to redo and a
correction reads the same on every store that holds its event. An incident's operator label
is its latest correction (by position in the store). The lists of incidents (`advisor
incidents`, the console's list) read the corrections of all their incidents at once
(`corrections_of`: one query, on the events' type index), not one incident at a time."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from advisor.core.payloads import LabelCorrected
from advisor.core.timefmt import format_us
from advisor.store import EventFilter, EventStore

CORRECTED = "label.corrected"


@dataclass(frozen=True, slots=True)
class Correction:
    """One operator's correction: the event's payload, its position and its time."""

    seq: int
    time_us: int
    payload: LabelCorrected

    def as_json(self) -> dict[str, object]:
        p = self.payload
        return {
            "label": p.label,
            "by": p.by,
            "why": p.why,
            "replaces": p.replaces,
            "time": format_us(self.time_us),
            "seq": self.seq,
        }


def latest_corrections(store: EventStore, incident_id: str | None = None) -> dict[str, Correction]:
    """Each corrected incident's latest correction (of `incident_id` alone, when given)."""
    return _latest(store, None if incident_id is None else {incident_id})


def corrections_of(store: EventStore, incident_ids: Iterable[str]) -> dict[str, Correction]:
    """The latest correction of each of `incident_ids` that operators corrected, read in one
    pass over the `label.corrected` events (a list's incidents, not one query each)."""
    wanted = set(incident_ids)
    return _latest(store, wanted) if wanted else {}


def _latest(store: EventStore, wanted: set[str] | None) -> dict[str, Correction]:
    out: dict[str, Correction] = {}
    for event in store.read(EventFilter(type=CORRECTED)):
        p = event.payload
        if not isinstance(p, LabelCorrected):
            continue
        if wanted is not None and p.incident_id not in wanted:
            continue
        known = out.get(p.incident_id)
        if known is None or event.seq > known.seq:
            out[p.incident_id] = Correction(event.seq, event.time_us, p)
    return out


def with_operator_labels(store: EventStore, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`incidents` rows (as dicts) with their operators' labels: `operator_label` (None when
    no one corrected the incident) and `operator` (the latest correction as `explain --json`
    gives it, else None); the rows' own columns, the diagnosis among them, stay as they are."""
    found = corrections_of(store, (str(row["incident_id"]) for row in rows))
    for row in rows:
        said = found.get(str(row["incident_id"]))
        row["operator_label"] = None if said is None else said.payload.label
        row["operator"] = None if said is None else said.as_json()
    return rows
