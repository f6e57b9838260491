"""Incidents, worked out from each unit's classified runs in time order: a failed run opens
an incident unless one with the same label and config key is open (a restart loop counts
once, and a start refused because GPU memory was still held joins the incident of the
failure it follows from), and a run that comes up ready resolves every incident open before
it. What the diagnoser said of an incident (`incident.classified`) is kept by id; an id it
named that the runs no longer make an incident stays, as a `superseded` row."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson
from sqlalchemy import Row, bindparam, func, select, update

from advisor.core.statuses import IncidentStatus
from advisor.core.taxonomy import GPU_MEMORY_HELD, NOT_FAILURES
from advisor.store.schema import incidents, runs
from advisor.views.fold.foldbase import FoldBase, incidence
from advisor.views.fold.keys import CURRENT, config_key, id_time

_DIAGNOSIS: Final = ("phase", "facts", "evidence", "candidates", "classified_seq")
# A failure that follows from another one of the same loop (not a cause of its own).
CONSEQUENCE: Final = GPU_MEMORY_HELD
Open = dict[tuple[str, str], dict[str, Any]]  # (label, config key) → the incident open


class IncidentRows(FoldBase):
    """The fold's part that works the incidents out."""

    def _incident_row(self, row: Row[Any]) -> dict[str, Any]:
        return self.incidents.setdefault(
            row.incident_id, {str(k): v for k, v in row._mapping.items()}
        )

    def _recompute_incidents(self) -> None:
        """Work the incidents out again over the span of each unit's runs that changed in
        what incidents depend on; then take this chunk's `incident.classified`."""
        spans: dict[str, tuple[int, int]] = {}
        for run_id in sorted(self.deleted | set(self.runs)):
            before = self.loaded.get(run_id)
            run = self.runs.get(run_id)
            now = None if run is None else incidence(run)
            if now == (None if before is None else before.incidence):
                continue
            times = [
                t
                for t in (
                    None if before is None else before.started_us,
                    None if run is None else run.started_us,
                )
                if t is not None
            ]
            stream = run.stream if run is not None else before.stream if before else ""
            low, high = spans.get(stream, (min(times), max(times)))
            spans[stream] = (min(low, *times), max(high, *times))
        for stream, (low, high) in sorted(spans.items()):
            self._incidents_of(stream, low, high)
        self._take_classifications()

    def _incidents_of(self, stream: str, low: int, high: int) -> None:
        """The incidents of `stream`'s runs, worked out again for runs that changed between
        `low` and `high` (start times): from the state just before `low` — the incidents open
        then, with their runs so far — up to the first run after `high` that came up ready."""
        r = runs.c
        ready_after = self.conn.execute(
            select(func.min(r.started_us)).where(
                r.stream == stream, r.ready_us.isnot(None), r.started_us > high
            )
        ).scalar()
        open_ = self._open_before(stream, low)
        made, holder, moved = self._scan(stream, low, ready_after, open_)
        self._replace_incidents(stream, low, ready_after, made, holder)
        if moved:
            self.conn.execute(
                update(runs)
                .where(runs.c.run_id == bindparam("r"))
                .values(incident_id=bindparam("i")),
                moved,
            )

    def _open_before(self, stream: str, low: int) -> Open:
        """The incidents open just before `low`, with their runs up to it (three reads for
        all of them, not three for each: a unit crash-looping through configs has many)."""
        r, i = runs.c, incidents.c
        ready_before = self.conn.execute(
            select(func.max(r.started_us)).where(
                r.stream == stream, r.ready_us.isnot(None), r.started_us < low
            )
        ).scalar()
        query = select(incidents).where(
            i.stream == stream, i.status.in_(CURRENT), i.started_us < low
        )
        if ready_before is not None:
            query = query.where(i.started_us >= ready_before)
        rows = self.conn.execute(query.order_by(i.started_us)).all()
        if not rows:
            return {}
        labels = dict(
            self.conn.execute(
                select(r.run_id, r.label).where(r.run_id.in_({row.first_run_id for row in rows}))
            ).all()
        )
        counts = {
            incident_id: (count, last_start)
            for incident_id, count, last_start in self.conn.execute(
                select(r.incident_id, func.count(), func.max(r.started_us))
                .where(r.stream == stream, r.started_us < low)
                .where(r.incident_id.in_({row.incident_id for row in rows}))
                .group_by(r.incident_id)
            ).all()
        }
        lasts = self._runs_started_at(stream, {t for _, t in counts.values() if t is not None})
        open_: Open = {}
        for row in rows:
            incident = self._incident_row(row)
            count, last_start = counts.get(row.incident_id, (0, None))
            incident.update(
                runs=count,
                last_run_id=lasts.get(last_start) or incident["first_run_id"],
                status=IncidentStatus.OPEN,
                resolved_us=None,
                resolved_run_id=None,
            )
            label = labels.get(incident["first_run_id"])
            if label is not None:
                open_[(label, incident["config_key"])] = incident
        return open_

    def _runs_started_at(self, stream: str, starts: set[int]) -> dict[int, str]:
        """A run of `stream` that started at each of `starts` (the first the database gives
        where several did)."""
        if not starts:
            return {}
        r = runs.c
        found: dict[int, str] = {}
        for run_id, started in self.conn.execute(
            select(r.run_id, r.started_us).where(r.stream == stream, r.started_us.in_(starts))
        ).all():
            found.setdefault(started, run_id)
        return found

    def _scan(
        self, stream: str, low: int, ready_after: int | None, open_: Open
    ) -> tuple[dict[str, dict[str, Any]], dict[str, str | None], list[dict[str, Any]]]:
        """The runs from `low` on, in order: the incidents they open (by id), the incident
        each run is in, and the runs whose incident changed."""
        r = runs.c
        scan = select(
            r.run_id,
            r.host,
            r.unit,
            r.started_us,
            r.first_seq,
            r.ended_us,
            r.ready_us,
            r.label,
            r.confidence,
            r.config,
            r.incident_id,
        ).where(r.stream == stream, r.started_us >= low)
        if ready_after is not None:
            scan = scan.where(r.started_us <= ready_after)
        made: dict[str, dict[str, Any]] = {}
        holder: dict[str, str | None] = {}
        moved: list[dict[str, Any]] = []
        for run in self.conn.execute(scan.order_by(r.started_us)).all():
            if run.ready_us is not None:  # it came up: what was open is over
                for incident in open_.values():
                    incident.update(
                        status=IncidentStatus.RESOLVED,
                        resolved_us=run.ready_us,
                        resolved_run_id=run.run_id,
                    )
                open_.clear()
                if run.started_us == ready_after:
                    break  # from here on nothing changed
            now = None
            if run.label is not None and run.label not in NOT_FAILURES:
                key = (run.label, config_key(orjson.loads(run.config)))
                recurred = _cause_of(open_, key) or open_.get(key)
                if recurred is None:
                    made[run.run_id] = open_[key] = _new_incident(stream, run, key[1])
                    now = run.run_id
                else:
                    recurred.update(runs=recurred["runs"] + 1, last_run_id=run.run_id)
                    now = recurred["incident_id"]
            holder[run.run_id] = now
            if now != run.incident_id:
                moved.append({"r": run.run_id, "i": now})
        return made, holder, moved

    def _replace_incidents(
        self,
        stream: str,
        low: int,
        ready_after: int | None,
        made: dict[str, dict[str, Any]],
        holder: dict[str, str | None],
    ) -> None:
        """The stored incidents from `low` on give way to those `made`; one the diagnoser
        classified stays, superseded."""
        i = incidents.c
        query = select(incidents).where(i.stream == stream, i.started_us >= low)
        if ready_after is not None:
            query = query.where(i.started_us < ready_after)
        for row in self.conn.execute(query).all():
            old = self._incident_row(row)
            if row.incident_id in made:
                _keep_diagnosis(made[row.incident_id], old)
            elif old["classified_seq"] is not None:
                self.incidents[row.incident_id] = _superseded(old, holder.get(row.incident_id))
            else:
                del self.incidents[row.incident_id]
                self.dropped.add(row.incident_id)
        for incident_id, incident in made.items():
            self.incidents[incident_id] = incident
            self.dropped.discard(incident_id)

    def _take_classifications(self) -> None:
        """What the diagnoser said of an incident, on its row; an id it named that is no
        incident (now) gets a `superseded` row."""
        for incident_id, (event, p) in sorted(self.classified.items()):
            found = (
                None
                if incident_id in self.dropped
                else self._load(self.incidents, incidents.c.incident_id, incident_id)
            )
            if found is not None:
                row = found
            else:
                host, _, unit = event.stream.partition("/")
                now = self.conn.execute(
                    select(runs.c.incident_id).where(runs.c.run_id == incident_id)
                ).scalar()
                row = _superseded(
                    {
                        "incident_id": incident_id,
                        "stream": event.stream,
                        "host": host,
                        "unit": unit,
                        "started_us": event.time_us,
                        "classified_seq": event.seq,
                    },
                    now,
                )
                self.incidents[incident_id] = row
                self.dropped.discard(incident_id)
            row.update(
                label=p.label,
                confidence=p.confidence,
                phase=p.phase,
                facts=orjson.dumps(p.facts, option=orjson.OPT_SORT_KEYS).decode(),
                evidence=orjson.dumps([e.model_dump() for e in p.evidence]).decode(),
                candidates=orjson.dumps([c.model_dump() for c in p.candidates]).decode(),
                classified_seq=event.seq,
            )
            if row["status"] == IncidentStatus.SUPERSEDED:
                row["opened_seq"] = event.seq


def _cause_of(open_: Open, key: tuple[str, str]) -> dict[str, Any] | None:
    """For a start refused because GPU memory was still held: the incident open for the
    same configuration whose failure it follows from (a restart loop quicker than the
    driver's release alternates the two), if there is one. One loop, one incident."""
    label, config = key
    if label != CONSEQUENCE:
        return None
    for (other, other_config), incident in open_.items():
        if other != CONSEQUENCE and other_config == config:
            return incident
    return None


def _new_incident(stream: str, run: Any, key: str) -> dict[str, Any]:
    return {
        "incident_id": run.run_id,
        "stream": stream,
        "host": run.host,
        "unit": run.unit,
        "started_us": run.started_us,
        "opened_seq": run.first_seq,
        "opened_us": run.ended_us or run.started_us,
        "config_key": key,
        "first_run_id": run.run_id,
        "last_run_id": run.run_id,
        "runs": 1,
        "status": IncidentStatus.OPEN,
        "label": run.label,
        "confidence": run.confidence,
        "phase": None,
        "facts": None,
        "evidence": None,
        "candidates": None,
        "classified_seq": None,
        "resolved_us": None,
        "resolved_run_id": None,
        "superseded_by": None,
    }


def _keep_diagnosis(new: dict[str, Any], old: Mapping[str, Any]) -> None:
    """What the diagnoser said of the incident stays on its row (its label too)."""
    for name in _DIAGNOSIS:
        new[name] = old.get(name)
    if old.get("classified_seq") is not None:
        new["label"], new["confidence"] = old.get("label"), old.get("confidence")


def _superseded(old: Mapping[str, Any], holder: str | None) -> dict[str, Any]:
    """The row of an id the diagnoser named that is no incident: what it said, and the
    incident that holds the run now (made of events only, whatever came before)."""
    incident_id = str(old["incident_id"])
    when = id_time(incident_id, int(old["started_us"] or 0))
    row = {name: old.get(name) for name in _DIAGNOSIS}
    row.update(label=old.get("label"), confidence=old.get("confidence"))
    row.update(
        incident_id=incident_id,
        stream=old["stream"],
        host=old["host"],
        unit=old["unit"],
        started_us=when,
        opened_us=when,
        opened_seq=old["classified_seq"],
        config_key="",
        first_run_id=incident_id,
        last_run_id=incident_id,
        runs=0,
        status=IncidentStatus.SUPERSEDED,
        resolved_us=None,
        resolved_run_id=None,
        superseded_by=holder if holder != incident_id else None,
    )
    return row
