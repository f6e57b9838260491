"""The decisions on a plan, and what reading and recording a step needs: a plan's rows and one
step's row (fresh: the views fold what is new first), approving and rejecting steps, and the
event advisor appends about a step.
"""

from __future__ import annotations

import time
from typing import Final

from advisor.core.actions import ActionApproved, ActionPayload, ActionRejected
from advisor.core.errors import InputError
from advisor.core.events import NewEvent
from advisor.core.ids import matching, resolve_id
from advisor.core.records import stable_key
from advisor.core.statuses import ActionStatus
from advisor.core.steps import ActionStep
from advisor.store import EventStore
from advisor.views.fold.projector import Projector
from advisor.views.read.actions import action_by_id, all_actions, plan_actions
from advisor.views.read.rows import ActionRow

EXECUTOR_SOURCE: Final = "executor"
HUMAN_SOURCE: Final = "approval"


def action_event(
    row: ActionRow, payload: ActionPayload, source: str, key: str, time_us: int | None = None
) -> NewEvent:
    """An event about the step `row`, on its unit's stream (the host's `advisor` stream for a
    step with no unit); `key` makes it idempotent. The payload is a model, so a misspelt or
    missing field fails where it is built."""
    stream = f"{row.host}/{row.unit or 'advisor'}"
    return NewEvent(
        stream=stream,
        time_us=time_us if time_us is not None else now_us(),
        source=source,
        key=stable_key(key.encode()),
        payload=payload,
    )


def now_us() -> int:
    return time.time_ns() // 1000


def plan_rows(store: EventStore, plan_id: str) -> list[ActionRow]:
    """A plan's `actions` rows in step order."""
    return plan_actions(store, plan_id)


def action_row(store: EventStore, action_id: str) -> ActionRow:
    """One step's `actions` row; InputError when there is none."""
    row = action_by_id(store, action_id)
    if row is None:
        raise InputError(f"no action {action_id!r} (see `advisor actions`)")
    return row


def resolve_ident(store: EventStore, ident: str, *, plans: bool) -> str:
    """The whole id of the step (or, with `plans`, the plan or step) that `ident` names: the
    id itself, a prefix of it, or a prefix of its short id (`advisor.core.ids`). InputError
    when nothing fits, or more than one."""
    if action_by_id(store, ident) is not None or (plans and plan_actions(store, ident)):
        return ident
    rows = all_actions(store)
    if plans:
        plan_ids = matching(ident, {r.plan_id for r in rows})
        if plan_ids:
            return resolve_id(ident, plan_ids, "plan")
    try:
        return resolve_id(ident, [r.action_id for r in rows], "action")
    except InputError as e:
        hint = " (see `advisor actions`)"
        if not plans and matching(ident, {r.plan_id for r in rows}):
            hint = f": {ident!r} names a plan; a step is PLAN#N{hint}"
        raise InputError(f"{e}{hint}") from e


def plan_of(store: EventStore, ident: str) -> str:
    """The whole id of the plan `ident` names — the plan, or one of its steps; whole, a
    prefix, or a prefix of the short id (`resolve_ident`)."""
    whole = resolve_ident(store, ident, plans=True)
    return whole if plan_rows(store, whole) else action_row(store, whole).plan_id


def step_of(row: ActionRow) -> ActionStep:
    return row.action


def approve(store: EventStore, ident: str, by: str) -> list[str]:
    """Approve one proposed action, or every non-alternative proposed step of a plan.
    Approving an alternative chooses it: the step it stands in for, if still proposed, is
    rejected in the same batch. `ident` may be a prefix (`resolve_ident`)."""
    ident = resolve_ident(store, ident, plans=True)
    rows = plan_rows(store, ident)
    events: list[NewEvent] = []
    if rows:
        chosen = [r for r in rows if r.status == ActionStatus.PROPOSED and not r.alternative]
    else:
        row = action_row(store, ident)
        if row.status != ActionStatus.PROPOSED:
            raise InputError(f"action {ident} is {row.status}, not proposed")
        chosen = [row]
        if row.alternative:
            main = _replaced_by(plan_rows(store, row.plan_id), row)
            if main is not None and main.status == ActionStatus.PROPOSED:
                why = f"alternative {ident} chosen instead"
                events.append(
                    action_event(
                        main,
                        ActionRejected(action_id=main.action_id, by=by, why=why),
                        HUMAN_SOURCE,
                        f"rejected:{main.action_id}",
                    )
                )
    events += [
        action_event(
            r,
            ActionApproved(action_id=r.action_id, by=by),
            HUMAN_SOURCE,
            f"approved:{r.action_id}",
        )
        for r in chosen
    ]
    store.append(events)
    Projector(store).catch_up()
    return [r.action_id for r in chosen]


def _replaced_by(rows: list[ActionRow], alternative: ActionRow) -> ActionRow | None:
    """The main step an alternative stands in for: the nearest non-alternative before it."""
    before = [r for r in rows if r.step < alternative.step and not r.alternative]
    return before[-1] if before else None


def reject(store: EventStore, action_id: str, by: str, why: str) -> str:
    """Record that the step `action_id` (or a prefix: `resolve_ident`) must never run; its
    whole id."""
    action_id = resolve_ident(store, action_id, plans=False)
    row = action_row(store, action_id)
    if row.status not in (ActionStatus.PROPOSED, ActionStatus.APPROVED):
        raise InputError(f"action {action_id} is {row.status}: too late to reject")
    store.append(
        [
            action_event(
                row,
                ActionRejected(action_id=action_id, by=by, why=why),
                HUMAN_SOURCE,
                f"rejected:{action_id}",
            )
        ]
    )
    Projector(store).catch_up()
    return action_id
