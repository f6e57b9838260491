"""Read models folded from events: service runs, incidents, GPU samples.

`Projector.catch_up()` reads the events after its checkpoint in sequence order and folds each
one into the tables; the rows and the checkpoint are written in one transaction per chunk.
The fold looks at one event at a time and at nothing but events, so the tables after any
sequence of catch-ups equal the tables after one `rebuild()` — row for row.

A run's peak GPU memory is the largest GPU sample inside its time window (those attributed to
its unit where there are any), so it does not depend on whether the samples were ingested
before or after the log lines. It is computed from all the window's samples when the window
changes (a new run, a run's end), and otherwise kept up from the samples a chunk adds: a run
that serves for weeks is not scanned again with every chunk.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from itertools import islice
from typing import Any, Final

import orjson
from sqlalchemy import Column, Connection, delete, func, select, text

from advisor.diagnosis.facts import PHASE_ORDER, merge_config
from advisor.diagnosis.lines import LogLine
from advisor.diagnosis.sequence import Parsed, ended_badly, parse, says_died, starts_new_run
from advisor.events import (
    ActionApproved,
    ActionFailed,
    ActionProposed,
    ActionRejected,
    ActionRolledBack,
    ActionSkipped,
    ActionStarted,
    ActionSucceeded,
    GpuSampled,
    IncidentClassified,
    IncidentOpened,
    IncidentRecurred,
    IncidentResolved,
    LogRecorded,
    RunClassified,
    StoredEvent,
)
from advisor.store import EventFilter, EventStore
from advisor.store.engine import WRITE_OPTION, retry_busy
from advisor.store.schema import (
    PROJECTION_TABLES,
    actions,
    checkpoints,
    gpu_samples,
    incidents,
    runs,
)

CHECKPOINT: Final = "projections"
PROJECTION_LOCK_ID: Final = 0x616476_70726F  # pg advisory lock key for folding ("advpro")
CHUNK: Final = 5000
_END: Final = frozenset({"exit", "failed", "deactivated", "stopped", "start_failed",
                         "start_limit", "restart_scheduled"})
_APP_ENGINES: Final = frozenset({"vllm", "sglang", "tgi"})
_EVENT_FACTS: Final = ("exit_code", "exit_signal", "unit_result")


def config_key(config: dict[str, Any]) -> str:
    """A short stable name for a configuration: a failure after a config change is new."""
    return hashlib.blake2b(orjson.dumps(config, option=orjson.OPT_SORT_KEYS),
                           digest_size=8).hexdigest()


@dataclass
class RunRow:
    """A `runs` row being folded. It answers `sequence.Boundary` for run cutting."""

    run_id: str
    stream: str
    host: str
    unit: str
    invocation_id: str | None
    first_seq: int
    last_seq: int
    started_us: int
    ended_us: int | None = None
    lines: int = 0
    engine: str | None = None
    phases: list[str] = field(default_factory=list)
    last_phase: str | None = None
    ready_us: int | None = None
    stop_us: int | None = None
    config: dict[str, Any] = field(default_factory=dict)
    exit_code: int | None = None
    exit_signal: str | None = None
    unit_result: str | None = None
    restart_count: int | None = None
    stop_timed_out: bool = False
    ended: bool = False
    died: bool = False
    outcome: str = "starting"
    peak_gpu_used_bytes: int | None = None
    peak_gpu_total_bytes: int | None = None
    label: str | None = None
    confidence: float | None = None
    incident_id: str | None = None
    peak_gpu_from_unit: bool | None = None
    events: set[str] = field(default_factory=set)

    @property
    def has_app_lines(self) -> bool:
        return self.engine is not None or bool(self.phases)

    @property
    def ready(self) -> bool:
        return self.ready_us is not None

    @property
    def has_phases(self) -> bool:
        return bool(self.phases)

    def absorb(self, p: Parsed, seq: int, time_us: int) -> None:
        self.last_seq = seq
        self.lines += 1
        f = p.facts
        if p.engine in _APP_ENGINES and self.engine is None:
            self.engine = p.engine
        merge_config(self.config, f)
        if f.phase is not None:
            if f.phase not in self.phases:
                self.phases.append(f.phase)
            if f.phase != "shutdown" and (self.last_phase is None or
                                          PHASE_ORDER[f.phase] > PHASE_ORDER[self.last_phase]):
                self.last_phase = f.phase
            if f.phase == "ready" and self.ready_us is None:
                self.ready_us = time_us
            if f.phase == "shutdown" and self.stop_us is None:
                self.stop_us = time_us
        if f.event is not None:
            self.events.add(f.event)
            if f.event == "stop_requested" and self.stop_us is None:
                self.stop_us = time_us
            if f.event in _END and not self.ended:
                self.ended, self.ended_us = True, time_us
            for key in _EVENT_FACTS:
                if key in f.facts and getattr(self, key) is None:
                    setattr(self, key, f.facts[key])
            if f.facts.get("stop_timed_out"):
                self.stop_timed_out = True
            if "restart_count" in f.facts:
                self.restart_count = max(f.facts["restart_count"], self.restart_count or 0)
        if not self.died and (ended_badly(self._event_facts(), self.events) or (
                self.stop_us is None and not f.noise and says_died(p.body))):
            self.died = True
        self.outcome = ("failed" if self.died else "stopped" if self.ended
                        else "stopping" if self.stop_us is not None
                        else "ready" if self.ready_us is not None else "starting")

    def _event_facts(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in _EVENT_FACTS}

    def row(self) -> dict[str, Any]:
        values = {c.name: getattr(self, c.name) for c in runs.columns}
        values["phases"] = orjson.dumps(self.phases).decode()
        values["config"] = orjson.dumps(self.config, option=orjson.OPT_SORT_KEYS).decode()
        return values

    @classmethod
    def from_row(cls, row: Any) -> RunRow:
        values = dict(row._mapping)
        values["phases"] = orjson.loads(values["phases"])
        values["config"] = orjson.loads(values["config"])
        run = cls(**values)
        run.events = _events_implied(run)
        return run


def _events_implied(run: RunRow) -> set[str]:
    """Enough of the lifecycle to go on folding a run reloaded from its row."""
    implied = set()
    if run.unit_result is not None:
        implied.add("failed")
    if run.ended:
        implied.add("exit")
    return implied


def _run_id(stream: str, time_us: int) -> str:
    """`HOST/UNIT@<time of the run's first line>`: the same in every store the events reach
    (a sequence number would differ once events are shipped to a central store)."""
    when = datetime.fromtimestamp(time_us / 1_000_000, tz=UTC)
    return f"{stream}@{when.strftime('%Y-%m-%dT%H:%M:%S.%fZ')}"


class Projector:
    """Folds events into the projection tables; one instance per process."""

    def __init__(self, store: EventStore) -> None:
        self.store = store

    def position(self) -> int:
        cp = self.store.checkpoint(CHECKPOINT)
        return int(cp["seq"]) if cp else 0

    def catch_up(self) -> int:
        """Fold every event not folded yet; return how many were folded."""
        done = 0
        while True:
            after = self.position()
            batch = list(islice(self.store.read(EventFilter(after_seq=after), chunk=CHUNK),
                                CHUNK))
            if not batch:
                return done
            if retry_busy(partial(self._fold, batch, after)):
                done += len(batch)

    def _fold(self, batch: list[StoredEvent], after: int) -> bool:
        """Fold one chunk in one write transaction; False when another process folded it."""
        with self._writing() as conn:
            # Re-read under the write lock: another process may have folded them.
            current = conn.execute(select(checkpoints.c.position).where(
                checkpoints.c.name == CHECKPOINT)).scalar()
            if current is not None and int(orjson.loads(current)["seq"]) != after:
                return False
            _Fold(conn).apply(batch)
            _save_position(conn, batch[-1].seq)
        return True

    def rebuild(self) -> int:
        """Empty the projections and fold every event again."""
        with self._writing() as conn:
            for table in PROJECTION_TABLES:
                conn.execute(delete(table))
            conn.execute(delete(checkpoints).where(checkpoints.c.name == CHECKPOINT))
        return self.catch_up()

    @contextmanager
    def _writing(self) -> Iterator[Connection]:
        """A write transaction (SQLite: BEGIN IMMEDIATE), committed on success."""
        with self.store.engine.connect().execution_options(**{WRITE_OPTION: True}) as conn, \
                conn.begin():
            if conn.dialect.name == "postgresql":  # one folder at a time, as SQLite's lock
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PROJECTION_LOCK_ID})
            yield conn


def _save_position(conn: Connection, seq: int) -> None:
    position = orjson.dumps({"seq": seq}).decode()
    now = time.time_ns() // 1000
    updated = conn.execute(checkpoints.update().where(checkpoints.c.name == CHECKPOINT)
                           .values(position=position, updated_time_us=now))
    if updated.rowcount == 0:
        conn.execute(checkpoints.insert().values(name=CHECKPOINT, position=position,
                                                 updated_time_us=now))


class _Fold:
    """One chunk's fold: rows loaded on first touch, written back at the end."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.current: dict[str, RunRow | None] = {}   # stream → its latest run
        self.runs: dict[str, RunRow] = {}             # run_id → row, touched in this chunk
        self.incidents: dict[str, dict[str, Any]] = {}
        self.actions: dict[str, dict[str, Any]] = {}
        self.samples: list[dict[str, Any]] = []       # gpu_samples rows of this chunk
        self.loaded_windows: dict[str, tuple[int, int | None]] = {}  # run_id → as loaded

    def apply(self, batch: Iterable[StoredEvent]) -> None:
        for event in batch:
            p = event.payload
            if isinstance(p, LogRecorded):
                self._log(event, p)
            elif isinstance(p, GpuSampled):
                self._sample(event, p)
            elif isinstance(p, RunClassified):
                run = self._run(p.run_id)
                if run is not None:
                    run.label, run.confidence = p.label, p.confidence
            elif event.type.startswith("action."):
                self._action(event)
            else:
                self._incident(event)
        self._recompute_peaks()
        self._write()

    # -- logs --------------------------------------------------------------------------
    def _latest(self, stream: str) -> RunRow | None:
        if stream not in self.current:
            row = self.conn.execute(select(runs).where(runs.c.stream == stream)
                                    .order_by(runs.c.first_seq.desc()).limit(1)).first()
            run = RunRow.from_row(row) if row is not None else None
            if run is not None:
                run = self._loaded(run)
            self.current[stream] = run
        return self.current[stream]

    def _run(self, run_id: str) -> RunRow | None:
        if run_id not in self.runs:
            row = self.conn.execute(select(runs).where(runs.c.run_id == run_id)).first()
            if row is None:
                return None
            self._loaded(RunRow.from_row(row))
        return self.runs[run_id]

    def _loaded(self, run: RunRow) -> RunRow:
        if run.run_id not in self.runs:
            self.runs[run.run_id] = run
            self.loaded_windows[run.run_id] = (run.started_us, run.ended_us)
        return self.runs[run.run_id]

    def _log(self, event: StoredEvent, p: LogRecorded) -> None:
        host, _, unit = event.stream.partition("/")
        if not unit or unit == "kernel":
            return
        line = LogLine(number=event.seq, text=p.message or "", time_us=event.time_us,
                       unit=p.unit, host=p.host, invocation_id=p.invocation_id, pid=p.pid,
                       identifier=p.identifier, message_id=p.message_id,
                       transport=p.transport, fields=p.fields or {})
        parsed = parse([line])[0]
        run = self._latest(event.stream)
        if run is None or starts_new_run(run, parsed):
            run = RunRow(_run_id(event.stream, event.time_us), event.stream, host, unit,
                         p.invocation_id, event.seq, event.seq, event.time_us)
            self.runs[run.run_id] = run
            self.current[event.stream] = run
        elif run.invocation_id is None and p.invocation_id is not None:
            run.invocation_id = p.invocation_id
        run.absorb(parsed, event.seq, event.time_us)

    # -- GPU samples -------------------------------------------------------------------
    def _sample(self, event: StoredEvent, p: GpuSampled) -> None:
        units = sorted({q.unit for q in p.processes or () if q.unit})
        self.samples.append({
            "seq": event.seq, "host": p.host, "gpu": p.index, "time_us": event.time_us,
            "used_bytes": p.memory_used_bytes, "total_bytes": p.memory_total_bytes,
            "units": ",".join(units) if units else None})

    def _recompute_peaks(self) -> None:
        by_host: dict[str, list[dict[str, Any]]] = {}
        for sample in self.samples:
            by_host.setdefault(sample["host"], []).append(sample)
        if self.samples:
            self.conn.execute(gpu_samples.insert(), self.samples)
        for host, new in by_host.items():
            low, high = min(s["time_us"] for s in new), max(s["time_us"] for s in new)
            covering = self.conn.execute(
                select(runs.c.run_id).where(runs.c.host == host)
                .where(runs.c.started_us <= high)
                .where((runs.c.ended_us.is_(None)) | (runs.c.ended_us >= low))).scalars()
            for run_id in covering:
                self._run(run_id)
        for run in self.runs.values():
            window_kept = self.loaded_windows.get(run.run_id) == (run.started_us, run.ended_us)
            if window_kept and run.peak_gpu_from_unit is not None:
                self._raise_peak(run, by_host.get(run.host, ()))
            else:
                self._peak(run)

    def _raise_peak(self, run: RunRow, new: Iterable[dict[str, Any]]) -> None:
        """Keep the peak of a run whose window did not change up to date with new samples
        (what `_peak` would find, without reading the window's older samples)."""
        inside = [(s["used_bytes"], s["total_bytes"], run.unit in (s["units"] or ""))
                  for s in new if run.started_us <= s["time_us"]
                  and (run.ended_us is None or s["time_us"] <= run.ended_us)]
        own = [(used, total) for used, total, mine in inside if mine]
        if own and not run.peak_gpu_from_unit:  # the first of its own: they alone count now
            best, run.peak_gpu_from_unit = max(own), True
        else:
            candidates = own if run.peak_gpu_from_unit else [(u, t) for u, t, _ in inside]
            if not candidates:
                return
            best = max(candidates)
            if run.peak_gpu_used_bytes is not None:
                best = max(best, (run.peak_gpu_used_bytes, run.peak_gpu_total_bytes or 0))
        run.peak_gpu_used_bytes, run.peak_gpu_total_bytes = best

    def _peak(self, run: RunRow) -> None:
        window = (select(gpu_samples.c.used_bytes, gpu_samples.c.total_bytes)
                  .where(gpu_samples.c.host == run.host)
                  .where(gpu_samples.c.time_us >= run.started_us))
        if run.ended_us is not None:
            window = window.where(gpu_samples.c.time_us <= run.ended_us)
        own = window.where(gpu_samples.c.units.contains(run.unit, autoescape=True))
        has_own = self.conn.execute(select(func.count()).select_from(own.subquery())).scalar()
        query = own if has_own else window
        best = self.conn.execute(query.order_by(gpu_samples.c.used_bytes.desc(),
                                                gpu_samples.c.total_bytes.desc()).limit(1)).first()
        run.peak_gpu_used_bytes = best[0] if best else None
        run.peak_gpu_total_bytes = best[1] if best else None
        run.peak_gpu_from_unit = bool(has_own)

    # -- diagnoses ---------------------------------------------------------------------
    def _load(self, cache: dict[str, dict[str, Any]], key: Column[str],
              value: str) -> dict[str, Any] | None:
        """The row of `key`'s table whose `key` is `value`, from `cache` or the database."""
        if value not in cache:
            row = self.conn.execute(select(key.table).where(key == value)).first()
            if row is None:
                return None
            cache[value] = {str(k): v for k, v in row._mapping.items()}
        return cache[value]

    def _incident(self, event: StoredEvent) -> None:
        p = event.payload
        if isinstance(p, IncidentOpened):
            self.incidents[p.incident_id] = {
                "incident_id": p.incident_id, "stream": event.stream, "host": p.host,
                "unit": p.unit, "opened_seq": event.seq, "opened_us": event.time_us,
                "config_key": p.config_key, "first_run_id": p.run_id, "last_run_id": p.run_id,
                "runs": 1, "status": "open", "label": None, "confidence": None, "phase": None,
                "facts": None, "evidence": None, "candidates": None, "classified_seq": None,
                "resolved_us": None, "resolved_run_id": None}
            self._link(p.run_id, p.incident_id)
            return
        if not isinstance(p, IncidentClassified | IncidentRecurred | IncidentResolved):
            return
        incident = self._load(self.incidents, incidents.c.incident_id, p.incident_id)
        if incident is None:
            return
        if isinstance(p, IncidentClassified):
            incident.update(
                label=p.label, confidence=p.confidence, phase=p.phase,
                facts=orjson.dumps(p.facts, option=orjson.OPT_SORT_KEYS).decode(),
                evidence=orjson.dumps([e.model_dump() for e in p.evidence]).decode(),
                candidates=orjson.dumps([c.model_dump() for c in p.candidates]).decode(),
                classified_seq=event.seq)
        elif isinstance(p, IncidentRecurred):
            incident.update(runs=p.runs, last_run_id=p.run_id)
            self._link(p.run_id, p.incident_id)
        else:
            incident.update(status="resolved", resolved_us=event.time_us,
                            resolved_run_id=p.run_id)

    def _link(self, run_id: str, incident_id: str) -> None:
        run = self._run(run_id)
        if run is not None:
            run.incident_id = incident_id

    # -- actions -----------------------------------------------------------------------
    def _action(self, event: StoredEvent) -> None:
        p = event.payload
        if isinstance(p, ActionProposed):
            if self._load(self.actions, actions.c.action_id, p.action_id) is not None:
                return
            spec = p.model_dump(exclude={"type"}, exclude_none=True)
            self.actions[p.action_id] = {
                "action_id": p.action_id, "plan_id": p.plan_id, "step": p.step,
                "incident_id": p.incident_id, "host": p.host, "unit": p.unit, "kind": p.kind,
                "alternative": p.alternative,
                "spec": orjson.dumps(spec, option=orjson.OPT_SORT_KEYS).decode(),
                "status": "proposed", "proposed_seq": event.seq, "proposed_us": event.time_us,
                "updated_us": event.time_us, "decided_by": None, "decided_why": None,
                "detail": None, "dropin": None, "previous": None, "executor": None,
                "state_after": None, "written_text": None, "previous_text": None,
                "had_previous": None}
            return
        action_id = getattr(p, "action_id", None)
        row = (self._load(self.actions, actions.c.action_id, action_id)
               if isinstance(action_id, str) else None)
        if row is None:
            return
        row["updated_us"] = event.time_us
        if isinstance(p, ActionApproved):
            row.update(status="approved", decided_by=p.by)
        elif isinstance(p, ActionRejected):
            row.update(status="rejected", decided_by=p.by, decided_why=p.why)
        elif isinstance(p, ActionStarted):
            row.update(status="started", executor=p.executor, dropin=p.dropin,
                       written_text=p.written_text, previous_text=p.previous_text,
                       had_previous=p.had_previous)
        elif isinstance(p, ActionSucceeded):
            row.update(status="succeeded", detail=p.detail, dropin=p.dropin or row["dropin"],
                       previous=p.previous, state_after=_state(p.after))
        elif isinstance(p, ActionFailed):
            row.update(status="failed", detail=p.error, state_after=_state(p.after))
        elif isinstance(p, ActionSkipped):
            row.update(status="stale" if p.stale else "skipped", detail=p.why,
                       state_after=_state(p.after))
        elif isinstance(p, ActionRolledBack):
            row.update(status="rolled_back", detail=p.detail)

    # -- writing -----------------------------------------------------------------------
    def _write(self) -> None:
        if self.runs:
            ids = sorted(self.runs)
            self.conn.execute(delete(runs).where(runs.c.run_id.in_(ids)))
            self.conn.execute(runs.insert(), [self.runs[i].row() for i in ids])
        if self.incidents:
            ids = sorted(self.incidents)
            self.conn.execute(delete(incidents).where(incidents.c.incident_id.in_(ids)))
            self.conn.execute(incidents.insert(), [self.incidents[i] for i in ids])
        if self.actions:
            ids = sorted(self.actions)
            self.conn.execute(delete(actions).where(actions.c.action_id.in_(ids)))
            self.conn.execute(actions.insert(), [self.actions[i] for i in ids])


def _state(after: dict[str, Any] | None) -> str | None:
    return None if after is None else orjson.dumps(after, option=orjson.OPT_SORT_KEYS).decode()


# ------------------------------------------------------------------ reading
def read_rows(store: EventStore, table_name: str, *, unit: str | None = None,
              host: str | None = None) -> list[dict[str, Any]]:
    """Rows of a projection table in a stable order, optionally for one unit / host."""
    table = {t.name: t for t in PROJECTION_TABLES}[table_name]
    query = select(table)
    if unit is not None and "unit" in table.c:
        query = query.where(table.c.unit == unit)
    if host is not None and "host" in table.c:
        query = query.where(table.c.host == host)
    order = {"runs": runs.c.first_seq, "incidents": incidents.c.opened_seq,
             "gpu_samples": gpu_samples.c.seq, "actions": actions.c.proposed_seq}[table_name]
    with store.engine.connect() as conn:
        rows = conn.execute(query.order_by(order, *table.primary_key)).all()
    return [{str(k): v for k, v in r._mapping.items()} for r in rows]
