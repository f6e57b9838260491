"""Never worse than found: what a plan that stops short leaves behind.

A plan that stops before its restart — a step stale, refused, failed, or its executor gone —
hands the unit back as advisor found it: advisor's hold on restarts is lifted (the unit's own
`Restart=` applies again), and a unit that was running or crash-looping when the plan's first
step looked at it, and that advisor stopped, is started again under its own `Restart=` (the
words say so). A restart whose engine did not receive the plan's values has its `set_flag`
changes rolled back: they did nothing, and a change that did nothing must not stay.

What "found" was is the `before` state the plan's first started step recorded (its
`action.started` event), so a later executor — after a crash — knows it too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from advisor.core.actions import ActionStarted
from advisor.core.errors import AdvisorError
from advisor.core.kinds import RESTART, SET_FLAG, SETTING_KINDS
from advisor.core.statuses import ActionStatus
from advisor.execution.backends import Backend
from advisor.execution.decisions import plan_rows
from advisor.execution.rollback import rollback
from advisor.store import EventFilter, EventStore
from advisor.views.read.rows import ActionRow

RUNNING = frozenset({"active", "activating", "reloading"})


def found_state(store: EventStore, plan_id: str, unit: str) -> Mapping[str, Any] | None:
    """The unit as the plan's first started step on it saw it (None: no step started)."""
    rows = [r for r in plan_rows(store, plan_id) if r.unit == unit]
    if not rows:
        return None
    ids = {r.action_id for r in rows}
    after = min(r.proposed_seq for r in rows)
    for event in store.read(EventFilter(type="action.started", after_seq=after)):
        p = event.payload
        if isinstance(p, ActionStarted) and p.action_id in ids and p.before:
            return p.before
    return None


def hand_back(store: EventStore, backend: Backend, row: ActionRow) -> str:
    """Lift advisor's hold on the unit of a plan that stops here, and start the unit again if
    advisor found it running or looping and it is stopped now; the words to add."""
    if not row.unit:
        return ""
    words = ""
    try:
        done = backend.release_hold(row.unit)
    except AdvisorError as e:
        return f"; advisor's hold on restarts could not be lifted: {e}"
    if done:
        words += f"; {done}"
    found = found_state(store, row.plan_id, row.unit)
    start = getattr(backend, "start_unit", None)
    if found is None or start is None or found.get("active_state") not in RUNNING:
        return words
    try:
        now = backend.observe(row.unit)
        if now is None or not (now.stopped and now.sub_state != "auto-restart"):
            return words
        started = start(row.unit)
    except AdvisorError as e:
        return words + f"; {row.unit} could not be started again: {e}"
    was = f"{found.get('active_state')}/{found.get('sub_state')}"
    return (
        words + f"; advisor found {row.unit} {was} and had stopped it: started it again "
        f"under its own Restart={now.restart} ({started.detail})"
    )


def undo_flags(store: EventStore, backend: Backend, plan_id: str, unit: str | None) -> str:
    """Roll back the plan's `set_flag` changes on `unit`, newest first: the words to add."""
    done: list[str] = []
    for r in reversed(plan_rows(store, plan_id)):
        if (
            r.unit != unit
            or r.kind != SET_FLAG
            or r.status != ActionStatus.SUCCEEDED
            or not r.dropin
        ):
            continue
        try:
            rollback(store, backend, r.action_id, getattr(backend, "root", None), by="executor")
            done.append(r.action_id)
        except AdvisorError as e:
            return f"; advisor's change {r.action_id} could not be rolled back: {e}"
    if not done:
        return ""
    return f"; advisor's change was rolled back ({', '.join(done)}): it did not reach the engine"


def rollback_hint(store: EventStore, row: ActionRow) -> str:
    """A restart that does not come up: the changes it was to start with can be undone."""
    if row.kind != RESTART:
        return ""
    changed = [
        r.action_id
        for r in plan_rows(store, row.plan_id)
        if r.status == ActionStatus.SUCCEEDED and r.kind in SETTING_KINDS and r.written_text
    ]
    if not changed:
        return ""
    return "; to undo the plan's changes: " + ", ".join(
        f"`advisor rollback {a}`" for a in reversed(changed)
    )
