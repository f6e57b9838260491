"""Rolling back a step: put back the drop-in a set_flag / set_unit_option step wrote, as it was
before, when the file is still as the step left it.
"""

from __future__ import annotations

from pathlib import Path

from advisor.core.actions import ActionRolledBack
from advisor.core.errors import InputError
from advisor.core.statuses import ActionStatus
from advisor.execution.backends import Backend
from advisor.execution.decisions import (
    EXECUTOR_SOURCE,
    action_event,
    action_row,
    now_us,
    resolve_ident,
)
from advisor.execution.primitives import FileChange
from advisor.store import EventStore, leases
from advisor.views.fold.projector import Projector
from advisor.views.read.actions import all_actions
from advisor.views.read.rows import ActionRow


def rollback(
    store: EventStore, backend: Backend, action_id: str, root: Path | None = None, by: str = "human"
) -> str:
    """Put back the drop-in a set_flag / set_unit_option step wrote, as it was before
    (`action_id` may be a prefix: `decisions.resolve_ident`)."""
    action_id = resolve_ident(store, action_id, plans=False)
    row = action_row(store, action_id)
    if (
        row.status not in (ActionStatus.SUCCEEDED, ActionStatus.FAILED, ActionStatus.STARTED)
        or row.dropin is None
    ):
        raise InputError(f"action {action_id} changed no unit file (status {row.status})")
    if (
        row.status == ActionStatus.STARTED
    ):  # written, maybe, by an executor that died before saying so
        holder = leases.holder_of(store, f"plan:{row.plan_id}")
        if holder is not None and holder.expires_us > now_us():
            raise InputError(
                f"action {action_id} is being run by {holder.holder}: roll it "
                "back when that executor is done"
            )
    change = _recorded_change(store, row, root)
    outcome = backend.restore(change)
    store.append(
        [
            action_event(
                row,
                ActionRolledBack(action_id=action_id, detail=outcome.detail),
                EXECUTOR_SOURCE,
                f"rolled_back:{action_id}",
            )
        ]
    )
    Projector(store).catch_up()
    return outcome.detail


def _recorded_change(store: EventStore, row: ActionRow, root: Path | None) -> FileChange:
    from advisor.execution.confine import confined_dropin

    assert row.dropin is not None  # rollback refuses a step that wrote no drop-in
    path = confined_dropin(Path(row.dropin), root)
    written = row.written_text
    if written is None:  # recorded by an advisor that kept the old text in a side file
        kept = f" (its previous content was kept at {row.previous})" if row.previous else ""
        raise InputError(
            f"{row.action_id} was recorded before advisor kept what it wrote; "
            f"put {path} back by hand{kept}"
        )
    try:
        current = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        current = None
    if current != written:
        later = [
            r
            for r in all_actions(store)
            if r.dropin == row.dropin
            and r.proposed_seq > row.proposed_seq
            and r.status == ActionStatus.SUCCEEDED
        ]
        if later:
            raise InputError(
                f"{path} was changed again by {later[-1].action_id}: roll that back first"
            )
        if current == row.previous_text or (current is None and not row.had_previous):
            raise InputError(f"{path} is already as it was before {row.action_id}")
        raise InputError(f"{path} was edited since {row.action_id} wrote it; not overwriting")
    return FileChange(path, written, row.previous_text, bool(row.had_previous))
