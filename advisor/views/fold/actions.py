"""Actions: each proposed step's row, moved on by the events that decide and carry it out."""

from __future__ import annotations

from typing import Any

import orjson

from advisor.core.actions import (
    ActionApproved,
    ActionFailed,
    ActionProposed,
    ActionRejected,
    ActionRolledBack,
    ActionSkipped,
    ActionStarted,
    ActionSucceeded,
)
from advisor.core.events import StoredEvent
from advisor.core.statuses import ActionStatus
from advisor.store.schema import actions
from advisor.views.fold.foldbase import FoldBase


class ActionRows(FoldBase):
    """The fold's part that keeps the `actions` rows."""

    def _action(self, event: StoredEvent) -> None:
        p = event.payload
        if isinstance(p, ActionProposed):
            if self._load(self.actions, actions.c.action_id, p.action_id) is None:
                self.actions[p.action_id] = _proposed_row(event, p)
            return
        action_id = getattr(p, "action_id", None)
        row = (
            self._load(self.actions, actions.c.action_id, action_id)
            if isinstance(action_id, str)
            else None
        )
        if row is None:
            return
        row["updated_us"] = event.time_us
        _advance(row, p)


def _proposed_row(event: StoredEvent, p: ActionProposed) -> dict[str, Any]:
    """A proposed step's new row: its spec kept, all that decides and carries it out empty."""
    spec = p.model_dump(exclude={"type"}, exclude_none=True)
    return {
        "action_id": p.action_id,
        "plan_id": p.plan_id,
        "step": p.step,
        "incident_id": p.incident_id,
        "host": p.host,
        "unit": p.unit,
        "kind": p.kind,
        "alternative": p.alternative,
        "spec": orjson.dumps(spec, option=orjson.OPT_SORT_KEYS).decode(),
        "status": ActionStatus.PROPOSED,
        "proposed_seq": event.seq,
        "proposed_us": event.time_us,
        "updated_us": event.time_us,
        "decided_by": None,
        "decided_why": None,
        "detail": None,
        "dropin": None,
        "previous": None,
        "executor": None,
        "state_after": None,
        "written_text": None,
        "previous_text": None,
        "had_previous": None,
        "proposed_recorded_us": event.recorded_us,
    }


def _advance(row: dict[str, Any], p: object) -> None:
    """Move a step's row on by the event that decides it or carries it out."""
    if isinstance(p, ActionApproved):
        row.update(status=ActionStatus.APPROVED, decided_by=p.by)
    elif isinstance(p, ActionRejected):
        row.update(status=ActionStatus.REJECTED, decided_by=p.by, decided_why=p.why)
    elif isinstance(p, ActionStarted):
        row.update(
            status=ActionStatus.STARTED,
            executor=p.executor,
            dropin=p.dropin,
            written_text=p.written_text,
            previous_text=p.previous_text,
            had_previous=p.had_previous,
        )
    elif isinstance(p, ActionSucceeded):
        row.update(
            status=ActionStatus.SUCCEEDED,
            detail=p.detail,
            dropin=p.dropin or row["dropin"],
            previous=p.previous,
            state_after=_state(p.after),
        )
    elif isinstance(p, ActionFailed):
        row.update(status=ActionStatus.FAILED, detail=p.error, state_after=_state(p.after))
    elif isinstance(p, ActionSkipped):
        row.update(
            status=ActionStatus.STALE if p.stale else ActionStatus.SKIPPED,
            detail=p.why,
            state_after=_state(p.after),
        )
    elif isinstance(p, ActionRolledBack):
        row.update(status=ActionStatus.ROLLED_BACK, detail=p.detail)


def _state(after: dict[str, Any] | None) -> str | None:
    return None if after is None else orjson.dumps(after, option=orjson.OPT_SORT_KEYS).decode()
