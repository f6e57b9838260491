"""What the web console reads: incidents as a list (filtered, pending approvals first, with
when each was last seen, how many of its plan's steps await a decision while it is open, and
its operators' label when they corrected it), one incident by id, and the filters' choices."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Select, and_, func, select

from advisor.core.ids import resolve_id
from advisor.core.statuses import ActionStatus, IncidentStatus
from advisor.store import EventStore
from advisor.store.schema import actions, incidents, runs
from advisor.views.read.corrections import Correction, corrections_of
from advisor.views.read.rows import IncidentView, fresh


@dataclass(frozen=True, slots=True)
class IncidentFilter:
    """Which incidents to list; None: any."""

    host: str | None = None
    unit: str | None = None
    label: str | None = None
    since_us: int | None = None
    until_us: int | None = None


@dataclass(frozen=True, slots=True)
class IncidentLine:
    """One incident as the list shows it."""

    incident: IncidentView
    last_seen_us: int  # when its last failed run was last heard from
    pending: int  # main steps of its plan that await a decision (0 once it is not open)
    operator: Correction | None = None  # its latest `advisor label` correction, if any

    @property
    def downtime_us(self) -> int:
        """From the first failed run's start to recovery (open: to the last run seen)."""
        return self.incident.downtime_us(self.last_seen_us)


def _waiting(conn: Connection) -> dict[str, int]:
    """Open incident → main steps of its plan that await a decision. A plan waits only while
    its incident is open (the executor skips a resolved one's steps as stale); read from the
    open incidents (an index of their own), each one's actions by its id."""
    a, i = actions.c, incidents.c
    rows = conn.execute(
        select(a.incident_id, func.count())
        .join(incidents, i.incident_id == a.incident_id)
        .where(i.status == IncidentStatus.OPEN)
        .where(a.status == ActionStatus.PROPOSED, a.alternative.is_(False))
        .group_by(a.incident_id)
    )
    return {str(incident): int(n) for incident, n in rows}


def _listing(flt: IncidentFilter) -> Select[Any]:
    """The incidents `flt` selects, with when each was last seen, newest first."""
    i, r = incidents.c, runs.c
    last_seen = func.coalesce(r.last_us, r.ended_us, r.started_us, i.opened_us)
    query = (
        select(incidents, last_seen.label("last_seen_us"))
        .outerjoin(runs, r.run_id == i.last_run_id)
        .where(i.status != IncidentStatus.SUPERSEDED)
    )
    conditions = [
        column == value
        for column, value in ((i.host, flt.host), (i.unit, flt.unit), (i.label, flt.label))
        if value is not None
    ]
    if flt.since_us is not None:
        conditions.append(last_seen >= flt.since_us)
    if flt.until_us is not None:
        conditions.append(i.opened_us <= flt.until_us)
    if conditions:
        query = query.where(and_(*conditions))
    return query.order_by(i.opened_us.desc(), i.incident_id)


def incident_list(
    store: EventStore, flt: IncidentFilter, *, limit: int = 200
) -> tuple[list[IncidentLine], int]:
    """The incidents `flt` selects, pending approvals first then newest first (at most
    `limit`), each with its operators' label (their corrections read in one query), and how
    many it selects in all; what is new is folded first. The newest are read down an index
    of opening times, so a fleet's history costs no more than its first page."""
    fresh(store)
    query = _listing(flt)
    with store.connect() as conn:
        waiting = _waiting(conn)
        ids = sorted(waiting)
        total = conn.execute(select(func.count()).select_from(query.subquery())).scalar_one()
        rows = [
            *conn.execute(query.where(incidents.c.incident_id.in_(ids)).limit(limit)).all(),
            *conn.execute(query.where(incidents.c.incident_id.not_in(ids)).limit(limit)).all(),
        ][:limit]
    said = corrections_of(store, (str(row._mapping["incident_id"]) for row in rows))
    lines = []
    for row in rows:
        mapping = row._mapping
        incident_id = str(mapping["incident_id"])
        lines.append(
            IncidentLine(
                IncidentView.from_row(mapping),
                int(mapping["last_seen_us"]),
                waiting.get(incident_id, 0),
                said.get(incident_id),
            )
        )
    return lines, int(total)


def incident_by_id(store: EventStore, incident_id: str) -> IncidentView | None:
    """One `incidents` row (None: no such incident); what is new is folded first."""
    fresh(store)
    with store.connect() as conn:
        row = conn.execute(select(incidents).where(incidents.c.incident_id == incident_id)).first()
    return None if row is None else IncidentView.from_row(row._mapping)


def resolve_incident(store: EventStore, given: str) -> str:
    """The incident id `given` names: the id, a prefix of it, or a prefix of its short id,
    as the command line takes it (`advisor.core.ids`); InputError when none fits or several
    do. The whole id costs one look-up; a prefix reads every incident's id."""
    fresh(store)
    i = incidents.c
    with store.connect() as conn:
        if conn.execute(select(i.incident_id).where(i.incident_id == given)).first():
            return given
        ids = conn.execute(select(i.incident_id)).scalars().all()
    return resolve_id(given, [str(x) for x in ids], "incident")


def choices(store: EventStore) -> dict[str, list[str]]:
    """The hosts, units and labels there are incidents of (the filters' choices)."""
    i = incidents.c
    out: dict[str, list[str]] = {}
    with store.connect() as conn:
        for name, column in (("host", i.host), ("unit", i.unit), ("label", i.label)):
            values = conn.execute(select(column).distinct().where(column.is_not(None))).scalars()
            out[name] = sorted(str(v) for v in values)
    return out
