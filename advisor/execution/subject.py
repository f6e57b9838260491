"""What a step of a plan is about, as the store has it: its incident's row, and the `Subject`
a `notify` step's notice (and so its Alertmanager alert) is labelled with."""

from __future__ import annotations

from typing import Any

from advisor.execution.primitives import Subject
from advisor.store import EventStore
from advisor.views.reading import read_rows
from advisor.views.rows import ActionRow


def incident_of(store: EventStore, row: ActionRow) -> dict[str, Any] | None:
    """The `incidents` row of the step's incident (None: none, or not folded yet)."""
    if not row.incident_id:
        return None
    found = [
        i
        for i in read_rows(store, "incidents", host=row.host, unit=row.unit)
        if i["incident_id"] == row.incident_id
    ]
    return found[0] if found else None


def subject_of(store: EventStore, row: ActionRow) -> Subject:
    """The incident a step's notice is about: its id, service, failure label and start."""
    incident = incident_of(store, row) or {}
    return Subject(
        incident_id=row.incident_id or row.plan_id,
        host=row.host,
        unit=row.unit,
        label=incident.get("label"),
        started_us=incident.get("started_us") or incident.get("opened_us"),
    )
