"""Reading the `actions` rows back (what is new folded first): one plan's steps, one step,
every step. The fold's part that keeps them is `advisor.views.fold.actions`."""

from __future__ import annotations

from sqlalchemy import select

from advisor.store import EventStore
from advisor.store.schema import actions
from advisor.views.read.rows import ActionRow, fresh


def plan_actions(store: EventStore, plan_id: str) -> list[ActionRow]:
    """The `actions` rows of one plan, in step order (what is new folded first)."""
    fresh(store)
    with store.connect() as conn:
        rows = conn.execute(
            select(actions).where(actions.c.plan_id == plan_id).order_by(actions.c.step)
        ).all()
    return [ActionRow.from_row(r._mapping) for r in rows]


def action_by_id(store: EventStore, action_id: str) -> ActionRow | None:
    """The `actions` row of one step (None: no such action; what is new folded first)."""
    fresh(store)
    with store.connect() as conn:
        row = conn.execute(select(actions).where(actions.c.action_id == action_id)).first()
    return None if row is None else ActionRow.from_row(row._mapping)


def all_actions(
    store: EventStore, *, unit: str | None = None, host: str | None = None, fold: bool = True
) -> list[ActionRow]:
    """Every `actions` row in the order the steps were proposed, optionally of one unit /
    host (what is new folded first; with `fold` False the table as it is, for a reader
    beside the process that folds, such as the metrics)."""
    if fold:
        fresh(store)
    query = select(actions)
    if unit is not None:
        query = query.where(actions.c.unit == unit)
    if host is not None:
        query = query.where(actions.c.host == host)
    with store.connect() as conn:
        rows = conn.execute(query.order_by(actions.c.proposed_seq, actions.c.action_id)).all()
    return [ActionRow.from_row(r._mapping) for r in rows]
