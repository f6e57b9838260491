"""Operators' corrections of incidents' labels (`label.corrected` events), read from the
events themselves: no projection holds them, so `advisor rebuild` has nothing to redo and a
correction reads the same on every store that holds its event. An incident's operator label
is its latest correction (by position in the store)."""

from __future__ import annotations

from dataclasses import dataclass

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
    out: dict[str, Correction] = {}
    for event in store.read(EventFilter(type=CORRECTED)):
        p = event.payload
        if not isinstance(p, LabelCorrected):
            continue
        if incident_id is not None and p.incident_id != incident_id:
            continue
        known = out.get(p.incident_id)
        if known is None or event.seq > known.seq:
            out[p.incident_id] = Correction(event.seq, event.time_us, p)
    return out
