"""The rows the views hand out: typed and frozen, their JSON columns decoded once when read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import orjson

from advisor.core.actions import ActionStep, step_from_spec
from advisor.store import EventStore


# The `actions` columns kept as JSON text in the table, decoded in an `ActionRow`.
def fresh(store: EventStore) -> int:
    """Fold what is new into the projections before they are read; the events folded."""
    # Imported here: the projector's fold is built from the views' own modules.
    from advisor.views.projector import Projector

    return Projector(store).catch_up()


@dataclass(frozen=True, slots=True)
class ActionRow:
    """One `actions` row: a proposed step and what became of it. `spec` is the proposal as
    its event states it, `action` the step it describes, `state_after` the unit as the step
    left it (None: not recorded)."""

    action_id: str
    plan_id: str
    step: int
    incident_id: str | None
    host: str
    unit: str | None
    kind: str
    alternative: bool
    spec: Mapping[str, Any]
    action: ActionStep
    status: str
    proposed_seq: int
    proposed_us: int
    updated_us: int
    decided_by: str | None
    decided_why: str | None
    detail: str | None
    dropin: str | None
    previous: str | None
    executor: str | None
    state_after: Mapping[str, Any] | None
    written_text: str | None
    previous_text: str | None
    had_previous: bool | None

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> ActionRow:
        """The row as the table holds it (`{column: value}`, JSON columns as text)."""
        spec = orjson.loads(row["spec"])
        state_after = orjson.loads(row["state_after"]) if row["state_after"] else None
        return cls(
            action_id=row["action_id"],
            plan_id=row["plan_id"],
            step=int(row["step"]),
            incident_id=row["incident_id"],
            host=row["host"],
            unit=row["unit"],
            kind=row["kind"],
            alternative=bool(row["alternative"]),
            spec=spec,
            action=step_from_spec(spec),
            status=row["status"],
            proposed_seq=int(row["proposed_seq"]),
            proposed_us=int(row["proposed_us"]),
            updated_us=int(row["updated_us"]),
            decided_by=row["decided_by"],
            decided_why=row["decided_why"],
            detail=row["detail"],
            dropin=row["dropin"],
            previous=row["previous"],
            executor=row["executor"],
            state_after=state_after,
            written_text=row["written_text"],
            previous_text=row["previous_text"],
            had_previous=None if row["had_previous"] is None else bool(row["had_previous"]),
        )

    def columns(self) -> dict[str, Any]:
        """The row's columns by name, JSON columns decoded (what `advisor actions --json`
        shows)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "action"}
