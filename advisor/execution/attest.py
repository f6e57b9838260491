"""What the executor runs comes from the hash chain, not from the `actions` projection alone.

The projection is derived data that anyone holding the store can edit (a row's spec, its
status); the events are chained and verifiable. Before a step runs, the executor finds the
step's `action.proposed` event (at the row's `proposed_seq`) and an `action.approved` event
for it after that, and runs the step as the event states it. A row that does not match the
chain is refused, naming the seq, so a forged or altered row never reaches systemd.
"""

from __future__ import annotations

import orjson

from advisor.core.actions import ActionApproved, ActionProposed, step_from_spec
from advisor.core.errors import IntegrityError
from advisor.core.steps import ActionStep
from advisor.store import EventFilter, EventStore
from advisor.views.read.rows import ActionRow

__all__ = [
    "attested_step",
]


def attested_step(store: EventStore, row: ActionRow) -> ActionStep:
    """The step of `row` as its `action.proposed` event records it, once an
    `action.approved` event names it; IntegrityError when the projection disagrees."""
    action_id, seq = row.action_id, row.proposed_seq
    proposed = next(iter(store.read(EventFilter(after_seq=seq - 1, limit=None), chunk=1)), None)
    payload = proposed.payload if proposed is not None and proposed.seq == seq else None
    if not isinstance(payload, ActionProposed) or payload.action_id != action_id:
        raise IntegrityError(
            f"action {action_id}: no action.proposed event for it at seq "
            f"{seq}; the actions table was altered (run `advisor verify`, "
            "then `advisor rebuild`)",
            first_bad_seq=seq,
        )
    spec = payload.model_dump(exclude={"type"}, exclude_none=True)
    if (
        dict(row.spec) != orjson.loads(orjson.dumps(spec, option=orjson.OPT_SORT_KEYS))
        or row.host != payload.host
    ):
        raise IntegrityError(
            f"action {action_id}: the actions table says another step than "
            f"the action.proposed event at seq {seq}; the table was altered "
            "(run `advisor verify`, then `advisor rebuild`)",
            first_bad_seq=seq,
        )
    approved = any(
        isinstance(e.payload, ActionApproved) and e.payload.action_id == action_id
        for e in store.read(EventFilter(type="action.approved", after_seq=seq))
    )
    if not approved:
        raise IntegrityError(
            f"action {action_id} (proposed at seq {seq}): marked approved, "
            "but no action.approved event names it; the actions table was "
            "altered (run `advisor verify`, then `advisor rebuild`)",
            first_bad_seq=seq,
        )
    return step_from_spec(spec)
