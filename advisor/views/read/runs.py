"""The `runs` rows the later stages read: what is left to diagnose, one run by id, a unit's
runs in time order."""

from __future__ import annotations

from sqlalchemy import or_, select

from advisor.core.units import not_a_server
from advisor.store import EventStore
from advisor.store.schema import incidents, runs
from advisor.views.fold.keys import CURRENT
from advisor.views.read.rows import RunView


def runs_to_diagnose(store: EventStore, *, final: bool) -> list[RunView]:
    """`runs` rows to diagnose now, in time order: ended ones not classified for their lines
    (with `final`, also those that died without ending); then the first runs of current
    incidents whose diagnosis is older than their label (or missing). A run of a unit that
    is no server's (`core.units.not_a_server`: a login session's scope, a socket, a user's
    service manager) is never among them: it opens no incident, and so gets no plan."""
    r, i = runs.c, incidents.c
    with store.connect() as conn:
        rows = conn.execute(
            select(runs)
            .where(or_(r.label.is_(None), r.label_stale))
            .where(r.ended | r.died)
            .order_by(r.started_us, r.run_id)
        ).all()
        unsaid = conn.execute(
            select(runs)
            .join(incidents, i.incident_id == r.run_id)
            .where(i.status.in_(CURRENT))
            .where(r.label.isnot(None))
            .where(or_(r.label_stale.is_(None), ~r.label_stale))
            .where(or_(i.classified_seq.is_(None), i.classified_seq < r.label_seq))
            .order_by(r.started_us, r.run_id)
        ).all()
    return [
        RunView.from_row(row._mapping)
        for row in rows
        if (row.ended or final) and not_a_server(row.unit) is None
    ] + [RunView.from_row(row._mapping) for row in unsaid if not_a_server(row.unit) is None]


def run_row(store: EventStore, run_id: str) -> RunView | None:
    """The `runs` row of `run_id` (None: no such run now)."""
    with store.connect() as conn:
        row = conn.execute(select(runs).where(runs.c.run_id == run_id)).first()
    return None if row is None else RunView.from_row(row._mapping)


def unit_runs(store: EventStore, unit: str, host: str | None = None) -> list[RunView]:
    """The `runs` rows of `unit` (on `host`, or any), in time order."""
    query = select(runs).where(runs.c.unit == unit)
    if host is not None:
        query = query.where(runs.c.host == host)
    with store.connect() as conn:
        rows = conn.execute(query.order_by(runs.c.started_us, runs.c.run_id)).all()
    return [RunView.from_row(row._mapping) for row in rows]


def came_up_ready(store: EventStore, unit: str, host: str | None, invocation_id: str) -> bool:
    """Did `unit`'s (on `host`, or any) run of `invocation_id` come up ready? One indexed
    read, not the unit's every run."""
    query = (
        select(runs.c.run_id)
        .where(runs.c.unit == unit, runs.c.invocation_id == invocation_id)
        .where(runs.c.ready_us.is_not(None))
    )
    if host is not None:
        query = query.where(runs.c.host == host)
    with store.connect() as conn:
        return conn.execute(query.limit(1)).first() is not None
