"""Read models folded from events: service runs, incidents, GPU samples.

`Projector.catch_up()` reads the events after its checkpoint in sequence order and folds them
into the tables; the rows and the checkpoint are written in one transaction per chunk. What
the tables hold depends on the set of events folded, never on the order they arrived in: the
tables after any sequence of catch-ups equal the tables after one `rebuild()` — row for row —
and a store that got the same events in another order (a journal ingested newer half first,
ingesters of consecutive slices running at once, a host's backlog arriving late) holds the
same runs and incidents.

Runs. A stream's (`HOST/UNIT`) log lines stand in one total order that does not depend on
arrival, `order_key`: their time, then the journal's own order for lines of the same
microsecond (journald's sequence number from the cursor, a text log's line number, else the
monotonic clock and the line's content). Its runs are what cutting its lines in that order
gives (`sequence.starts_new_run`; no run starts in the microsecond its predecessor started,
so that `HOST/UNIT@<time of its first line>` names one run). A chunk whose lines all come
after the stream's last folded line goes on from there (the usual case: nothing is read
again). A chunk that brings an older line marks the stream (`fold_pending`: from the
earliest such line to the latest), and so do the stream's lines in later chunks; at the end
of the catch-up the marked streams are re-derived, each once: from the stored run the
earliest line falls in, the stored runs are dropped and the stream's lines cut again in order
(a range read on events (stream, time)), until the cut, past the latest line, starts a run
where a stored run starts — from there on nothing changed, and the stored runs stay. (An
older half of a journal folded after the newer half is so re-derived once, not once a chunk.)

Labels. A `run.classified` names the run and what it judged (`content`, `run_content`: where
its first and last lines stand, how many there are, its peak GPU memory); each is kept in
`run_labels`. A run's label is the one given for what it is now; a run whose lines (or peak)
changed since keeps the latest label it was given, marked `label_stale`, until the diagnoser
judges it again (its incident does not come and go meanwhile); a run cut again with the same
lines keeps its label. A version 1 `run.classified` (no content) holds whatever the run is.

Incidents are a function of each unit's classified runs in time order: a failed run opens an
incident unless one with the same label and config key is open (a restart loop counts once:
the incident's `runs`), and a run that comes up ready resolves every incident open before it
(then its own failure, if it fails later, opens a new one). An incident's id is its first
run's id. They are worked out again for the units a chunk changed, from the last run before
the change that came up ready (nothing is open after it) to the first one after the change.
What the diagnoser said of an incident (`incident.classified`: label, facts, evidence) is
kept by id. An id it named that the runs no longer make an incident (late lines showed its
first run to be a recurrence, or cut that run differently) stays, as a row with status
`superseded` and `superseded_by` the incident that holds its run now: its plan is not of an
open incident, so `auto` leaves it and the executor finds its steps stale. `incident.opened`,
`incident.recurred` and `incident.resolved` events say what the diagnoser saw when it wrote
them; the fold works incidents out from the runs.

A run's peak GPU memory is the largest GPU sample inside its time window (those attributed to
its unit where there are any), so it does not depend on whether the samples were ingested
before or after the log lines. It is computed from all the window's samples when the window
changes (a new run, a run's end), and otherwise kept up from the samples a chunk adds: a run
that serves for weeks is not scanned again with every chunk.

The fold's version is part of its checkpoint (`FOLD_VERSION`): the first catch-up of a store
folded by another version empties the projections and folds every event again.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from itertools import islice
from typing import Any, Final, NamedTuple

import orjson
from sqlalchemy import Column, Connection, Row, bindparam, delete, func, select, text, update

from advisor.core.events import (
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
    LogRecorded,
    RunClassified,
    StoredEvent,
    canonical_payload,
    load_payload,
)
from advisor.parsing.facts import PHASE_ORDER, merge_config
from advisor.parsing.lines import LogLine
from advisor.parsing.sequence import Parsed, ended_badly, parse, says_died, starts_new_run
from advisor.store import EventFilter, EventStore
from advisor.store.engine import retry_busy
from advisor.store.schema import (
    PROJECTION_TABLES,
    actions,
    events,
    fold_pending,
    gpu_samples,
    incidents,
    run_labels,
    runs,
    sources,
)
from advisor.store.store import latest_checkpoint, read_payload, save_checkpoint
from advisor.views.skipped import environmental, fit_row, fold_skips, reason_of, record, unusable

CHECKPOINT: Final = "projections"
FOLD_VERSION: Final = 2   # 2: order-independent runs, labels by content, incidents from runs
PROJECTION_LOCK_ID: Final = 0x616476_70726F  # pg advisory lock key for folding ("advpro")
CHUNK: Final = 5000
_PAGE: Final = 2000       # rows a re-derivation reads at a time
_IN: Final = 500          # ids in one IN (…)
_END: Final = frozenset({"exit", "failed", "deactivated", "stopped", "start_failed",
                         "start_limit", "restart_scheduled"})
_APP_ENGINES: Final = frozenset({"vllm", "sglang", "tgi"})
_EVENT_FACTS: Final = ("exit_code", "exit_signal", "unit_result")
# The labels that are not a failure (`classify.RunVerdict.failed` is False for them).
NOT_FAILURES: Final = frozenset({"healthy", "unknown"})
CURRENT: Final = ("open", "resolved")   # incident statuses; the other is "superseded"
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_SEQNUM = re.compile(r"(?:^|;)i=([0-9a-fA-F]{1,16})(?=;|$)")
_NUMBER_MAX: Final = 10**20 - 1


def config_key(config: dict[str, Any]) -> str:
    """A short stable name for a configuration: a failure after a config change is new."""
    return hashlib.blake2b(orjson.dumps(config, option=orjson.OPT_SORT_KEYS),
                           digest_size=8).hexdigest()


def _digest(value: str | bytes) -> str:
    data = value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=8).hexdigest()


@functools.lru_cache(maxsize=1024)  # a journal's seqnum id, a log's path: the same on each line
def _name_digest(value: str) -> str:
    return _digest(value)


def _seqnum(cursor: str) -> tuple[int, str] | None:
    """journald's sequence number and seqnum id from a cursor (`s=…;i=<hex>;…`)."""
    m = _SEQNUM.search(cursor)
    if m is None:
        return None
    if cursor.startswith("s="):
        start = 2
    else:
        start = cursor.find(";s=") + 3
        if start == 2:  # no seqnum id
            return int(m.group(1), 16), ""
    end = cursor.find(";", start)
    return int(m.group(1), 16), cursor[start:end if end >= 0 else None]


def _number(value: int | None) -> int:
    return 0 if value is None else max(0, min(value, _NUMBER_MAX))


def order_key(time_us: int, p: LogRecorded) -> str:
    """Where a log line stands in its stream whatever order it arrived in, as text that sorts
    as the order does: its time, then for lines of the same microsecond the journal's own
    order — journald's sequence number (`i=` of the cursor, the seqnum id `s=` apart), a text
    log's line number (of its file), else the monotonic clock and the line's content. The
    same line gives the same key in every store (it is made of the payload, not of seqs)."""
    when = f"{max(0, time_us):019d}"
    journald = _seqnum(p.cursor) if p.cursor else None
    if journald is not None:
        return f"{when} 0{journald[0]:020d} {_name_digest(journald[1])}"
    if p.line_no is not None:
        return f"{when} 1{_number(p.line_no):020d} {_name_digest(p.path or '')}"
    return f"{when} 2{_number(p.monotonic_us):020d} {_digest(canonical_payload(p))}"


def run_content(first_key: str, last_key: str, lines: int, peak_used: int | None = None,
                peak_total: int | None = None) -> str:
    """What a diagnosis of a run judges: its lines — with its first and last lines' places
    and their count, the same set of lines (a stream only gains lines) in every store that
    holds them — and its peak GPU memory."""
    return _digest(f"{first_key}\n{last_key}\n{lines}\n{peak_used}\n{peak_total}")


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
    first_key: str = ""
    last_key: str = ""
    last_us: int = 0
    label_stale: bool = False
    label_seq: int | None = None
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

    @property
    def content(self) -> str:
        return run_content(self.first_key, self.last_key, self.lines, self.peak_gpu_used_bytes,
                           self.peak_gpu_total_bytes)

    def absorb(self, p: Parsed, seq: int, time_us: int, key: str) -> None:
        self.last_seq, self.last_key, self.last_us = seq, key, time_us
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
            for key_ in _EVENT_FACTS:
                if key_ in f.facts and getattr(self, key_) is None:
                    setattr(self, key_, f.facts[key_])
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
        values = {c.name: getattr(self, c.name) for c in runs.columns if c.name != "lifecycle"}
        values["phases"] = orjson.dumps(self.phases).decode()
        values["config"] = orjson.dumps(self.config, option=orjson.OPT_SORT_KEYS).decode()
        values["lifecycle"] = orjson.dumps(sorted(self.events)).decode()
        return values

    @classmethod
    def from_row(cls, row: Any) -> RunRow:
        values = dict(row._mapping)
        values.pop("content", None)
        lifecycle = values.pop("lifecycle", None)
        values["phases"] = orjson.loads(values["phases"])
        values["config"] = orjson.loads(values["config"])
        values["first_key"] = values["first_key"] or ""
        values["last_key"] = values["last_key"] or ""
        values["last_us"] = values["last_us"] or values["started_us"]
        values["label_stale"] = bool(values["label_stale"])
        run = cls(**values)
        run.events = set(orjson.loads(lifecycle)) if lifecycle else _events_implied(run)
        return run


def _events_implied(run: RunRow) -> set[str]:
    """Enough of the lifecycle to go on folding a run whose row did not keep it."""
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


def _id_time(run_id: str, default: int) -> int:
    """The time a run id (`…@<time>`) names, or `default` when it names none."""
    _, at, when = run_id.rpartition("@")
    if at:
        try:
            parsed = datetime.strptime(when, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        except ValueError:
            return default
        return (parsed - _EPOCH) // timedelta(microseconds=1)
    return default


def _position(position: Mapping[str, Any] | None) -> int:
    """The seq this fold folded through (0: none, or a store folded by another version)."""
    if not position or position.get("fold") != FOLD_VERSION:
        return 0
    return int(position["seq"])


class Projector:
    """Folds events into the projection tables; one instance per process."""

    def __init__(self, store: EventStore) -> None:
        self.store = store
        self._skipped: list[tuple[StoredEvent, str]] = []  # by the last chunk folded

    def position(self) -> int:
        return _position(self.store.checkpoint(CHECKPOINT))

    def catch_up(self) -> int:
        """Fold every event not folded yet; return how many were folded."""
        cp = self.store.checkpoint(CHECKPOINT)
        if cp is not None and cp.get("fold") != FOLD_VERSION:
            retry_busy(self._empty_if_other_fold)
        done = 0
        while True:
            after = self.position()
            batch = list(islice(self.store.read(EventFilter(after_seq=after), chunk=CHUNK,
                                                tolerant=True), CHUNK))
            if not batch:
                if self._pending():
                    retry_busy(self._settle)
                    record(self.store, fold_skips(self._skipped))
                    continue
                return done
            if retry_busy(partial(self._fold, batch, after)):
                done += len(batch)
                record(self.store, fold_skips(self._skipped))  # folded next time round

    def _pending(self) -> bool:
        with self.store.connect() as conn:
            return conn.execute(select(fold_pending.c.stream).limit(1)).first() is not None

    def _settle(self) -> None:
        """Re-derive the streams older lines came to (`fold_pending`), in one transaction."""
        self._skipped = []
        with self._writing() as conn:
            marked = conn.execute(select(fold_pending).order_by(fold_pending.c.stream)).all()
            if not marked:
                return
            current = latest_checkpoint(conn, CHECKPOINT)
            fold = _Fold(conn, _position(None if current is None else orjson.loads(current)))
            for mark in marked:
                fold.rederive(mark.stream, mark.first_key, mark.first_us, mark.last_key)
            conn.execute(delete(fold_pending))
            fold.finish()
            self._skipped = fold.skipped

    def _empty_if_other_fold(self) -> None:
        """Another version folded these tables: empty them, to fold everything again."""
        with self._writing() as conn:
            current = latest_checkpoint(conn, CHECKPOINT)
            if current is not None and orjson.loads(current).get("fold") != FOLD_VERSION:
                _empty(conn)

    def _fold(self, batch: list[StoredEvent], after: int) -> bool:
        """Fold one chunk in one write transaction; False when another process folded it."""
        with self._writing() as conn:
            # Re-read under the write lock: another process may have folded them.
            current = latest_checkpoint(conn, CHECKPOINT)
            if _position(None if current is None else orjson.loads(current)) != after:
                return False
            fold = _Fold(conn, batch[-1].seq)
            fold.apply(batch)
            self._skipped = fold.skipped
            _save_position(conn, batch[-1].seq)
        return True

    def rebuild(self) -> int:
        """Empty the projections and fold every event again."""
        with self._writing() as conn:
            _empty(conn)
        return self.catch_up()

    @contextmanager
    def _writing(self) -> Iterator[Connection]:
        """A write transaction (SQLite: BEGIN IMMEDIATE), committed on success."""
        with self.store.connect(write=True) as conn, \
                conn.begin():
            if conn.dialect.name == "postgresql":  # one folder at a time, as SQLite's lock
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PROJECTION_LOCK_ID})
            yield conn


def _empty(conn: Connection) -> None:
    for table in PROJECTION_TABLES:
        conn.execute(delete(table))
    _save_position(conn, 0)  # checkpoints are append-only: a new position, not a deletion


def _save_position(conn: Connection, seq: int) -> None:
    save_checkpoint(conn, CHECKPOINT, {"seq": seq, "fold": FOLD_VERSION})


class _Line(NamedTuple):
    """A log line on its way into a run, at its place in the stream's order."""

    key: str
    seq: int
    time_us: int
    invocation_id: str | None
    parsed: Parsed
    event: StoredEvent | None  # this chunk's own lines: to report one that cannot be used


class _Loaded(NamedTuple):
    """A stored run as the chunk found it."""

    stream: str
    started_us: int
    window: tuple[int, int | None]
    content: str
    incidence: tuple[Any, ...] | None
    incident_id: str | None


def _parsed(seq: int, time_us: int, p: LogRecorded) -> Parsed:
    line = LogLine(number=seq, text=p.message or "", time_us=time_us,
                   unit=p.unit, host=p.host, invocation_id=p.invocation_id, pid=p.pid,
                   identifier=p.identifier, message_id=p.message_id,
                   transport=p.transport, fields=p.fields or {})
    return parse([line])[0]


def _incidence(run: RunRow) -> tuple[Any, ...] | None:
    """What of a run the incidents depend on (None: nothing, it neither failed nor came up)."""
    failed = run.label is not None and run.label not in NOT_FAILURES
    if not failed and run.ready_us is None:
        return None
    if not failed:
        return (None, None, None, None, None, run.ready_us)
    return (run.label, run.confidence, config_key(run.config), run.ended_us, run.first_seq,
            run.ready_us)


def _label_for(content: str, found: Sequence[Row[Any]]
               ) -> tuple[str | None, float | None, bool, int | None]:
    """(label, confidence, stale, seq): the latest label given for these lines (or by a
    version 1 event, for any), else the latest given to the run at all, stale."""
    for wanted in (content, ""):
        same = [r for r in found if r.content == wanted]
        if same:
            best = max(same, key=lambda r: r.seq)
            return best.label, best.confidence, False, best.seq
    if found:
        best = max(found, key=lambda r: r.seq)
        return best.label, best.confidence, True, best.seq
    return None, None, False, None


class _Fold:
    """One chunk's fold: rows loaded on first touch, written back at the end."""

    def __init__(self, conn: Connection, upto: int) -> None:
        self.conn = conn
        self.upto = upto                              # the chunk's last seq
        self.current: dict[str, RunRow | None] = {}   # stream → its latest run
        self.runs: dict[str, RunRow] = {}             # run_id → row, touched in this chunk
        self.fresh: set[str] = set()                  # runs cut in this chunk
        self.deleted: set[str] = set()                # stored runs a re-derivation dropped
        self.loaded: dict[str, _Loaded] = {}          # run_id → the stored run as found
        self.lines: dict[str, list[_Line]] = {}       # stream → this chunk's log lines
        self.marks: dict[str, tuple[str, int, str]] = {}  # stream → fold_pending, changed
        self.labels: dict[tuple[str, str], dict[str, Any]] = {}  # this chunk's run.classified
        self.named: set[str] = set()                  # runs those name
        self.classified: dict[str, tuple[StoredEvent, IncidentClassified]] = {}
        self.incidents: dict[str, dict[str, Any]] = {}
        self.dropped: set[str] = set()                # incident rows no longer kept
        self.actions: dict[str, dict[str, Any]] = {}
        self.samples: list[dict[str, Any]] = []       # gpu_samples rows of this chunk
        self.skipped: list[tuple[StoredEvent, str]] = []  # events not folded, and why

    def apply(self, batch: Iterable[StoredEvent]) -> None:
        for event in batch:
            # An event the tables cannot hold is skipped before it changes anything; one that
            # raises all the same is skipped too (the store's own failures propagate).
            reason = unusable(event)
            if reason is None:
                try:
                    self._apply_one(event)
                    continue
                except Exception as e:
                    if environmental(e):
                        raise
                    reason = reason_of(e)
            self.skipped.append((event, reason))
        self._place_lines()
        self.finish()

    def finish(self) -> None:
        """What the chunk's (or the re-derivation's) runs change: peaks, labels, incidents;
        all written."""
        self._recompute_peaks()
        self._label_runs()
        self._write_runs()
        self._recompute_incidents()
        self._write()

    def _apply_one(self, event: StoredEvent) -> None:
        p = event.payload
        if isinstance(p, LogRecorded):
            self._log(event, p)
        elif isinstance(p, GpuSampled):
            self._sample(event, p)
        elif isinstance(p, RunClassified):
            content = p.content or ""
            self.labels[(p.run_id, content)] = {
                "run_id": p.run_id, "content": content, "label": p.label,
                "confidence": p.confidence, "phase": p.phase, "seq": event.seq}
            self.named.add(p.run_id)
        elif event.type.startswith("action."):
            self._action(event)
        elif isinstance(p, IncidentClassified):
            self.classified[p.incident_id] = (event, p)
        # incident.opened / recurred / resolved: what the diagnoser saw when it wrote them;
        # the incidents are worked out from the runs (`_recompute_incidents`)

    # -- logs --------------------------------------------------------------------------
    def _latest(self, stream: str) -> RunRow | None:
        if stream not in self.current:
            row = self.conn.execute(select(runs).where(runs.c.stream == stream)
                                    .order_by(runs.c.started_us.desc()).limit(1)).first()
            self.current[stream] = self._loaded(RunRow.from_row(row)) if row is not None \
                else None
        return self.current[stream]

    def _run(self, run_id: str) -> RunRow | None:
        if run_id in self.deleted:
            return None
        if run_id not in self.runs:
            row = self.conn.execute(select(runs).where(runs.c.run_id == run_id)).first()
            if row is None:
                return None
            self._loaded(RunRow.from_row(row))
        return self.runs[run_id]

    def _loaded(self, run: RunRow) -> RunRow:
        if run.run_id not in self.runs:
            self.runs[run.run_id] = run
            self._remember(run)
        return self.runs[run.run_id]

    def _remember(self, run: RunRow) -> None:
        if run.run_id not in self.loaded:
            self.loaded[run.run_id] = _Loaded(run.stream, run.started_us,
                                              (run.started_us, run.ended_us), run.content,
                                              _incidence(run), run.incident_id)

    def _log(self, event: StoredEvent, p: LogRecorded) -> None:
        _host, _, unit = event.stream.partition("/")
        if not unit or unit == "kernel":
            return
        self.lines.setdefault(event.stream, []).append(_Line(
            order_key(event.time_us, p), event.seq, event.time_us, p.invocation_id,
            _parsed(event.seq, event.time_us, p), event))

    def _place_lines(self) -> None:
        """Put the chunk's lines into their streams' runs, in each stream's order; a stream
        that gets a line older than its last (or is marked already) is marked instead, to be
        re-derived at the end of the catch-up."""
        streams = sorted(self.lines)
        marked: dict[str, Any] = {}
        for i in range(0, len(streams), _IN):
            for row in self.conn.execute(select(fold_pending).where(
                    fold_pending.c.stream.in_(streams[i:i + _IN]))).all():
                marked[row.stream] = row
        for stream in streams:
            lines = sorted(self.lines[stream], key=lambda line: (line.key, line.seq))
            first, last = lines[0], lines[-1]
            mark = marked.get(stream)
            latest = None if mark is not None else self._latest(stream)
            if mark is None and (latest is None or first.key >= latest.last_key):
                run = latest
                for line in lines:
                    run = self._take(stream, run, line)
                self.current[stream] = run
            elif mark is None:
                self.marks[stream] = (first.key, first.time_us, last.key)
            else:
                earlier = first.key < mark.first_key
                self.marks[stream] = (first.key if earlier else mark.first_key,
                                      first.time_us if earlier else mark.first_us,
                                      max(last.key, mark.last_key))

    def _begins(self, run: RunRow | None, line: _Line) -> bool:
        """Does `line` start a run after `run` (the run of the line before it)?"""
        return run is None or (line.time_us != run.started_us
                               and starts_new_run(run, line.parsed))

    def _take(self, stream: str, run: RunRow | None, line: _Line) -> RunRow | None:
        """Add `line` after `run`: to it, or to the new run it starts; return the run it is
        in now. A line that cannot be used is left out (reported once, when first folded)."""
        try:
            if self._begins(run, line):
                host, _, unit = stream.partition("/")
                taker = RunRow(_run_id(stream, line.time_us), stream, host, unit,
                               line.invocation_id, line.seq, line.seq, line.time_us,
                               first_key=line.key, last_key=line.key, last_us=line.time_us)
            else:
                assert run is not None
                taker = run
                if taker.invocation_id is None and line.invocation_id is not None:
                    taker.invocation_id = line.invocation_id
            taker.absorb(line.parsed, line.seq, line.time_us, line.key)
        except Exception as e:
            if environmental(e):
                raise
            if line.event is not None:
                self.skipped.append((line.event, reason_of(e)))
            return run
        if taker is not run:
            self.runs[taker.run_id] = taker
            self.fresh.add(taker.run_id)
            self.deleted.discard(taker.run_id)
        return taker

    def rederive(self, stream: str, first_key: str, first_us: int, last_key: str) -> None:
        """Cut `stream`'s runs again from the stored run its line at `first_key` falls in, in
        order, until past `last_key` a run starts where a stored run starts."""
        start = self._start_of(stream, first_key, first_us)
        since = first_us if start is None else start
        stored = self._stored_runs(stream, since)
        pending = next(stored, None)
        run: RunRow | None = None
        for line in self._stream_lines(stream, since):
            while pending is not None and pending.first_key < line.key:
                self._drop(pending)
                pending = next(stored, None)
            if pending is not None and run is not None and line.key > last_key \
                    and pending.first_key == line.key and self._safely_begins(run, line):
                return  # the runs from `pending` on are what they were; so is the latest
            run = self._take(stream, run, line)
        while pending is not None:
            self._drop(pending)
            pending = next(stored, None)
        self.current[stream] = run if run is not None else self._before(stream, since)

    def _safely_begins(self, run: RunRow, line: _Line) -> bool:
        try:
            return self._begins(run, line)
        except Exception as e:
            if environmental(e):
                raise
            return False

    def _start_of(self, stream: str, key: str, time_us: int) -> int | None:
        """When the stored run the line at `key` falls in started (None: before them all)."""
        rows = self.conn.execute(select(runs.c.started_us, runs.c.first_key)
                                 .where(runs.c.stream == stream)
                                 .where(runs.c.started_us <= time_us)
                                 .order_by(runs.c.started_us.desc()).limit(2)).all()
        for started_us, first_key in rows:
            if (first_key or "") <= key:
                return int(started_us)
        return None

    def _stored_runs(self, stream: str, since: int) -> Iterator[RunRow]:
        """The stream's stored runs that start at `since` or later, in order."""
        after = since - 1
        while True:
            rows = self.conn.execute(select(runs).where(runs.c.stream == stream)
                                     .where(runs.c.started_us > after)
                                     .order_by(runs.c.started_us).limit(_PAGE)).all()
            for row in rows:
                known = self.runs.get(row.run_id)
                yield known if known is not None and row.run_id not in self.fresh \
                    else RunRow.from_row(row)
            if len(rows) < _PAGE:
                return
            after = rows[-1].started_us

    def _stream_lines(self, stream: str, since: int) -> Iterator[_Line]:
        """The stream's log lines from `since` on, folded by the end of this chunk, in the
        stream's order: a range read on (stream, time), each microsecond's lines put in order."""
        query = (select(events.c.seq, events.c.event_time_us, events.c.schema_version,
                        events.c.payload, events.c.recorded_time_us, sources.c.name,
                        events.c.idem_key)
                 .join(sources, sources.c.id == events.c.source_id)
                 .where(events.c.stream == stream).where(events.c.type == "log.recorded")
                 .where(events.c.seq <= self.upto))
        at, after_seq = since, 0
        group: list[_Line] = []
        while True:
            rows = self.conn.execute(
                query.where(events.c.event_time_us >= at)  # the index range's start
                .where((events.c.event_time_us > at)
                       | ((events.c.event_time_us == at) & (events.c.seq > after_seq)))
                .order_by(events.c.event_time_us, events.c.seq).limit(_PAGE)).all()
            for row in rows:
                if group and row.event_time_us != group[0].time_us:
                    yield from sorted(group, key=lambda line: (line.key, line.seq))
                    group = []
                line = self._stored_line(stream, row)
                if line is not None:
                    group.append(line)
            if len(rows) < _PAGE:
                yield from sorted(group, key=lambda line: (line.key, line.seq))
                return
            at, after_seq = rows[-1].event_time_us, rows[-1].seq

    def _stored_line(self, stream: str, row: Any) -> _Line | None:
        """A stored log line as the fold first took it; None for one it left out then."""
        try:
            p = load_payload("log.recorded", row.schema_version, row.payload)
            assert isinstance(p, LogRecorded)
            event = StoredEvent.model_construct(
                seq=row.seq, stream=stream, type="log.recorded", version=row.schema_version,
                time_us=row.event_time_us, recorded_us=row.recorded_time_us, source=row.name,
                key=row.idem_key, payload=p)
            if unusable(event) is not None:
                return None
            return _Line(order_key(event.time_us, p), event.seq, event.time_us,
                         p.invocation_id, _parsed(event.seq, event.time_us, p), None)
        except Exception as e:
            if environmental(e):
                raise
            return None

    def _drop(self, stored: RunRow) -> None:
        """A stored run the re-derivation did not cut again: it goes (unless cut again)."""
        self._remember(stored)
        if stored.run_id in self.fresh:
            return
        self.runs.pop(stored.run_id, None)
        self.deleted.add(stored.run_id)

    def _before(self, stream: str, since: int) -> RunRow | None:
        row = self.conn.execute(select(runs).where(runs.c.stream == stream)
                                .where(runs.c.started_us < since)
                                .order_by(runs.c.started_us.desc()).limit(1)).first()
        return None if row is None else self._loaded(RunRow.from_row(row))

    # -- labels ------------------------------------------------------------------------
    def _label_runs(self) -> None:
        """Keep this chunk's classifications; label the runs they name and the runs whose
        lines changed (a run cut again finds the label its lines were given)."""
        if self.labels:
            keys = sorted(self.labels)
            self.conn.execute(delete(run_labels).where(run_labels.c.run_id == bindparam("r"))
                              .where(run_labels.c.content == bindparam("c")),
                              [{"r": r, "c": c} for r, c in keys])
            self.conn.execute(run_labels.insert(),
                              [fit_row(run_labels, self.labels[k]) for k in keys])
        for run_id in sorted(self.named):
            self._run(run_id)
        todo = [run for run in self.runs.values()
                if run.run_id in self.fresh or run.run_id in self.named
                or self.loaded[run.run_id].content != run.content]
        found: dict[str, list[Row[Any]]] = {}
        ids = sorted({run.run_id for run in todo})
        for i in range(0, len(ids), _IN):
            for row in self.conn.execute(select(run_labels).where(
                    run_labels.c.run_id.in_(ids[i:i + _IN]))).all():
                found.setdefault(row.run_id, []).append(row)
        for run in todo:
            run.label, run.confidence, run.label_stale, run.label_seq = _label_for(
                run.content, found.get(run.run_id, ()))

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
            loaded = None if run.run_id in self.fresh else self.loaded.get(run.run_id)
            window_kept = loaded is not None and loaded.window == (run.started_us, run.ended_us)
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

    # -- incidents ---------------------------------------------------------------------
    def _load(self, cache: dict[str, dict[str, Any]], key: Column[str],
              value: str) -> dict[str, Any] | None:
        """The row of `key`'s table whose `key` is `value`, from `cache` or the database."""
        if value not in cache:
            row = self.conn.execute(select(key.table).where(key == value)).first()
            if row is None:
                return None
            cache[value] = {str(k): v for k, v in row._mapping.items()}
        return cache[value]

    def _incident_row(self, row: Row[Any]) -> dict[str, Any]:
        return self.incidents.setdefault(row.incident_id,
                                         {str(k): v for k, v in row._mapping.items()})

    def _recompute_incidents(self) -> None:
        """Work the incidents out again over the span of each unit's runs that changed in
        what incidents depend on; then take this chunk's `incident.classified`."""
        spans: dict[str, tuple[int, int]] = {}
        for run_id in sorted(self.deleted | set(self.runs)):
            before = self.loaded.get(run_id)
            run = self.runs.get(run_id)
            now = None if run is None else _incidence(run)
            if now == (None if before is None else before.incidence):
                continue
            times = [t for t in (None if before is None else before.started_us,
                                 None if run is None else run.started_us) if t is not None]
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
        r, i = runs.c, incidents.c
        ready_before = self.conn.execute(select(func.max(r.started_us)).where(
            r.stream == stream, r.ready_us.isnot(None), r.started_us < low)).scalar()
        ready_after = self.conn.execute(select(func.min(r.started_us)).where(
            r.stream == stream, r.ready_us.isnot(None), r.started_us > high)).scalar()
        open_: dict[tuple[str, str], dict[str, Any]] = {}
        query = select(incidents).where(i.stream == stream, i.status.in_(CURRENT),
                                        i.started_us < low)
        if ready_before is not None:
            query = query.where(i.started_us >= ready_before)
        for row in self.conn.execute(query.order_by(i.started_us)).all():
            incident = self._incident_row(row)
            label = self.conn.execute(select(r.label).where(
                r.run_id == incident["first_run_id"])).scalar()
            count, last_start = self.conn.execute(select(func.count(), func.max(r.started_us))
                                                  .where(r.stream == stream)
                                                  .where(r.incident_id == row.incident_id)
                                                  .where(r.started_us < low)).one()
            last = self.conn.execute(select(r.run_id).where(r.stream == stream)
                                     .where(r.started_us == last_start)).scalar()
            incident.update(runs=count, last_run_id=last or incident["first_run_id"],
                            status="open", resolved_us=None, resolved_run_id=None)
            if label is not None:
                open_[(label, incident["config_key"])] = incident
        scan = select(r.run_id, r.host, r.unit, r.started_us, r.first_seq, r.ended_us,
                      r.ready_us, r.label, r.confidence, r.config, r.incident_id
                      ).where(r.stream == stream, r.started_us >= low)
        if ready_after is not None:
            scan = scan.where(r.started_us <= ready_after)
        made: dict[str, dict[str, Any]] = {}
        holder: dict[str, str | None] = {}
        moved: list[dict[str, Any]] = []
        for run in self.conn.execute(scan.order_by(r.started_us)).all():
            if run.ready_us is not None:  # it came up: what was open is over
                for incident in open_.values():
                    incident.update(status="resolved", resolved_us=run.ready_us,
                                    resolved_run_id=run.run_id)
                open_.clear()
                if run.started_us == ready_after:
                    break  # from here on nothing changed
            now = None
            if run.label is not None and run.label not in NOT_FAILURES:
                key = (run.label, config_key(orjson.loads(run.config)))
                recurred = open_.get(key)
                if recurred is None:
                    made[run.run_id] = open_[key] = _new_incident(stream, run, key[1])
                    now = run.run_id
                else:
                    recurred.update(runs=recurred["runs"] + 1, last_run_id=run.run_id)
                    now = recurred["incident_id"]
            holder[run.run_id] = now
            if now != run.incident_id:
                moved.append({"r": run.run_id, "i": now})
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
        if moved:
            self.conn.execute(update(runs).where(runs.c.run_id == bindparam("r"))
                              .values(incident_id=bindparam("i")), moved)

    def _take_classifications(self) -> None:
        """What the diagnoser said of an incident, on its row; an id it named that is no
        incident (now) gets a `superseded` row."""
        for incident_id, (event, p) in sorted(self.classified.items()):
            found = None if incident_id in self.dropped else self._load(
                self.incidents, incidents.c.incident_id, incident_id)
            if found is not None:
                row = found
            else:
                host, _, unit = event.stream.partition("/")
                now = self.conn.execute(select(runs.c.incident_id).where(
                    runs.c.run_id == incident_id)).scalar()
                row = _superseded({"incident_id": incident_id, "stream": event.stream,
                                   "host": host, "unit": unit, "started_us": event.time_us,
                                   "classified_seq": event.seq}, now)
                self.incidents[incident_id] = row
                self.dropped.discard(incident_id)
            row.update(
                label=p.label, confidence=p.confidence, phase=p.phase,
                facts=orjson.dumps(p.facts, option=orjson.OPT_SORT_KEYS).decode(),
                evidence=orjson.dumps([e.model_dump() for e in p.evidence]).decode(),
                candidates=orjson.dumps([c.model_dump() for c in p.candidates]).decode(),
                classified_seq=event.seq)
            if row["status"] == "superseded":
                row["opened_seq"] = event.seq

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
    def _write_runs(self) -> None:
        for run in self.runs.values():
            loaded = self.loaded.get(run.run_id)
            if run.run_id in self.fresh and loaded is not None:
                run.incident_id = loaded.incident_id  # the incidents say if that changes
        gone = sorted(self.deleted | set(self.runs))
        for i in range(0, len(gone), _IN):
            self.conn.execute(delete(runs).where(runs.c.run_id.in_(gone[i:i + _IN])))
        if self.runs:
            self.conn.execute(runs.insert(), [fit_row(runs, self.runs[i].row())
                                              for i in sorted(self.runs)])

    def _write(self) -> None:
        if self.marks:
            streams = sorted(self.marks)
            self.conn.execute(delete(fold_pending).where(fold_pending.c.stream.in_(streams)))
            self.conn.execute(fold_pending.insert(), [
                {"stream": stream, "first_key": self.marks[stream][0],
                 "first_us": self.marks[stream][1], "last_key": self.marks[stream][2]}
                for stream in streams])
        if self.incidents or self.dropped:
            ids = sorted(set(self.incidents) | self.dropped)
            for i in range(0, len(ids), _IN):
                self.conn.execute(delete(incidents).where(
                    incidents.c.incident_id.in_(ids[i:i + _IN])))
            if self.incidents:
                self.conn.execute(incidents.insert(), [fit_row(incidents, self.incidents[i])
                                                       for i in sorted(self.incidents)])
        if self.actions:
            ids = sorted(self.actions)
            self.conn.execute(delete(actions).where(actions.c.action_id.in_(ids)))
            self.conn.execute(actions.insert(), [fit_row(actions, self.actions[i]) for i in ids])


def _new_incident(stream: str, run: Any, key: str) -> dict[str, Any]:
    return {"incident_id": run.run_id, "stream": stream, "host": run.host, "unit": run.unit,
            "started_us": run.started_us, "opened_seq": run.first_seq,
            "opened_us": run.ended_us or run.started_us, "config_key": key,
            "first_run_id": run.run_id, "last_run_id": run.run_id, "runs": 1, "status": "open",
            "label": run.label, "confidence": run.confidence, "phase": None, "facts": None,
            "evidence": None, "candidates": None, "classified_seq": None, "resolved_us": None,
            "resolved_run_id": None, "superseded_by": None}


_DIAGNOSIS: Final = ("phase", "facts", "evidence", "candidates", "classified_seq")


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
    when = _id_time(incident_id, int(old["started_us"] or 0))
    row = {name: old.get(name) for name in _DIAGNOSIS}
    row.update(label=old.get("label"), confidence=old.get("confidence"))
    row.update(incident_id=incident_id, stream=old["stream"], host=old["host"],
               unit=old["unit"], started_us=when, opened_us=when,
               opened_seq=old["classified_seq"], config_key="", first_run_id=incident_id,
               last_run_id=incident_id, runs=0, status="superseded", resolved_us=None,
               resolved_run_id=None, superseded_by=holder if holder != incident_id else None)
    return row


def _state(after: dict[str, Any] | None) -> str | None:
    return None if after is None else orjson.dumps(after, option=orjson.OPT_SORT_KEYS).decode()


# ------------------------------------------------------------------ reading
def read_rows(store: EventStore, table_name: str, *, unit: str | None = None,
              host: str | None = None) -> list[dict[str, Any]]:
    """Rows of a projection table in a stable order (runs and incidents in time order),
    optionally for one unit / host. Incidents include `superseded` ones."""
    table = {t.name: t for t in PROJECTION_TABLES}[table_name]
    query = select(table)
    if unit is not None and "unit" in table.c:
        query = query.where(table.c.unit == unit)
    if host is not None and "host" in table.c:
        query = query.where(table.c.host == host)
    order = {"runs": runs.c.started_us, "incidents": incidents.c.started_us,
             "gpu_samples": gpu_samples.c.seq, "actions": actions.c.proposed_seq,
             "run_labels": run_labels.c.seq, "fold_pending": fold_pending.c.stream}[table_name]
    with store.connect() as conn:
        rows = conn.execute(query.order_by(order, *table.primary_key)).all()
    return [{str(k): v for k, v in r._mapping.items()} for r in rows]


def run_log_events(store: EventStore, run: Mapping[str, Any]) -> list[StoredEvent]:
    """A run's own log lines (a `runs` row), in the fold's order: the stream's lines from its
    first line's place to its last's (read in (time, seq) order on the stream's time index,
    a page at a time)."""
    first, last = run["first_key"] or "", run["last_key"] or ""
    until = run["last_us"] or run["started_us"]
    query = (select(events.c.seq, events.c.event_time_us, events.c.schema_version,
                    events.c.payload, events.c.recorded_time_us, sources.c.name,
                    events.c.idem_key)
             .join(sources, sources.c.id == events.c.source_id)
             .where(events.c.stream == run["stream"]).where(events.c.type == "log.recorded")
             .where(events.c.event_time_us <= until))
    found: list[StoredEvent] = []
    at, after_seq = run["started_us"], 0
    with store.connect() as conn:
        while True:
            rows = conn.execute(
                query.where(events.c.event_time_us >= at)  # the index range's start
                .where((events.c.event_time_us > at)
                       | ((events.c.event_time_us == at) & (events.c.seq > after_seq)))
                .order_by(events.c.event_time_us, events.c.seq).limit(_PAGE)).all()
            for row in rows:
                p = read_payload(row.seq, "log.recorded", row.schema_version, row.payload)
                if not isinstance(p, LogRecorded):
                    continue
                # Only the first and last lines' microseconds can hold other runs' lines.
                if row.event_time_us in (run["started_us"], until) \
                        and not first <= order_key(row.event_time_us, p) <= last:
                    continue
                found.append(StoredEvent.model_construct(
                    seq=row.seq, stream=run["stream"], type="log.recorded",
                    version=row.schema_version, time_us=row.event_time_us,
                    recorded_us=row.recorded_time_us, source=row.name, key=row.idem_key,
                    payload=p))
            if len(rows) < _PAGE:
                break
            at, after_seq = rows[-1].event_time_us, rows[-1].seq
    return in_line_order(found)


def in_line_order(lines: Iterable[StoredEvent]) -> list[StoredEvent]:
    """Log events given in time order, in the order `order_key` gives: the lines of one
    microsecond put in the journal's order (their keys are worked out for those alone)."""
    ordered: list[StoredEvent] = []
    group: list[StoredEvent] = []

    def flush() -> None:
        if len(group) > 1:
            group.sort(key=lambda e: (order_key(e.time_us, e.payload)
                                      if isinstance(e.payload, LogRecorded) else "", e.seq))
        ordered.extend(group)
        group.clear()

    for event in lines:
        if group and event.time_us != group[0].time_us:
            flush()
        group.append(event)
    flush()
    return ordered
