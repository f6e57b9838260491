"""Reading the `incidents` rows back, and asking whether a failed run would open an incident
as the fold works them out. The fold's part that works them out is
`advisor.views.fold.incidents`."""

from __future__ import annotations

import orjson
from sqlalchemy import select

from advisor.core.taxonomy import NOT_FAILURES
from advisor.store import EventStore
from advisor.store.schema import incidents, runs
from advisor.views.fold.incidents import CONSEQUENCE
from advisor.views.fold.keys import config_key
from advisor.views.read.rows import IncidentView, RunView


def would_open_incident(store: EventStore, run: RunView, label: str) -> bool:
    """Would `run` (a `runs` row), failed as `label`, open an incident (not add to one open
    before it), as the fold works incidents out: it does unless an incident of the unit with
    the same label and config key opened since the last run before it that came up ready —
    or it came up ready itself (which ended what was open)."""
    if run.ready_us is not None:
        return True
    r = runs.c
    key = config_key(dict(run.config))
    with store.connect() as conn:
        ready = conn.execute(
            select(r.started_us)
            .where(r.stream == run.stream)
            .where(r.ready_us.isnot(None))
            .where(r.started_us < run.started_us)
            .order_by(r.started_us.desc())
            .limit(1)
        ).scalar()
        labels = [label]
        if label == CONSEQUENCE:  # it joins the incident of the failure it follows from
            labels = [
                str(x)
                for x in conn.execute(
                    select(r.label).where(r.stream == run.stream).distinct()
                ).scalars()
                if x is not None and x not in NOT_FAILURES
            ]
        firsts = (
            select(r.config)
            .where(r.stream == run.stream)
            .where(r.incident_id == r.run_id)
            .where(r.label.in_(labels))
            .where(r.started_us < run.started_us)
        )
        if ready is not None:
            firsts = firsts.where(r.started_us >= ready)
        configs = conn.execute(firsts).scalars().all()
    return all(config_key(orjson.loads(config)) != key for config in configs)


def incident_rows(
    store: EventStore, *, unit: str | None = None, host: str | None = None
) -> list[IncidentView]:
    """The `incidents` rows (of `unit`, on `host`) in time order, `superseded` ones too."""
    i = incidents.c
    query = select(incidents)
    if unit is not None:
        query = query.where(i.unit == unit)
    if host is not None:
        query = query.where(i.host == host)
    with store.connect() as conn:
        rows = conn.execute(query.order_by(i.started_us, i.incident_id)).all()
    return [IncidentView.from_row(row._mapping) for row in rows]
