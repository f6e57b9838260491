"""Counts over the projections, done by the database (GROUP BY), for readers that need only
totals — the metrics each scrape — however many incidents and steps the store holds. Rows are
never built one by one here: a scrape of a store of 10,000 incidents reads a few hundred
numbers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import case, func, select

from advisor.core.statuses import ActionStatus, IncidentStatus
from advisor.store.schema import actions, incidents

if TYPE_CHECKING:
    from advisor.store import EventStore


def incident_counts(store: EventStore) -> list[tuple[str, str, str | None, str, int]]:
    """(host, unit, label, status, how many) of the incidents not superseded."""
    i = incidents.c
    query = (
        select(i.host, i.unit, i.label, i.status, func.count())
        .where(i.status != IncidentStatus.SUPERSEDED)
        .group_by(i.host, i.unit, i.label, i.status)
    )
    with store.connect() as conn:
        return [(h, u, label, s, int(n)) for h, u, label, s, n in conn.execute(query)]


def proposal_latencies_us(store: EventStore) -> list[int]:
    """Per incident with a plan (superseded ones too): from the crash that opened it (the
    time its line was written) to when its first step was proposed (the time the proposal
    was recorded), in microseconds (never below 0). A log ingested long after it was
    written counts all the time since: the metric is for a store kept by `watch`."""
    a, i = actions.c, incidents.c
    first = func.min(a.proposed_recorded_us)
    query = (
        select(i.opened_us, first)
        .select_from(actions.join(incidents, a.incident_id == i.incident_id))
        .group_by(i.incident_id, i.opened_us)
        .having(first.is_not(None))  # proposed before migration 0013, its event since retained
    )
    with store.connect() as conn:
        return [max(0, int(first) - int(opened)) for opened, first in conn.execute(query)]


def action_counts(store: EventStore) -> list[tuple[str, str, int]]:
    """(kind, status, how many) of every step, alternatives too."""
    a = actions.c
    query = select(a.kind, a.status, func.count()).group_by(a.kind, a.status)
    with store.connect() as conn:
        return [(kind, status, int(n)) for kind, status, n in conn.execute(query)]


def plans_pending(store: EventStore) -> int:
    """Plans whose steps (alternatives aside) all still wait for approval."""
    a = actions.c
    decided = func.sum(case((a.status != ActionStatus.PROPOSED, 1), else_=0))
    waiting = (
        select(a.plan_id)
        .where(a.alternative.is_(False))
        .group_by(a.plan_id)
        .having(decided == 0)
        .subquery()
    )
    with store.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(waiting)).scalar_one())
