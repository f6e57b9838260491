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
gives (`runfold.starts_new_run`; no run starts in the microsecond its predecessor started,
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

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import partial
from itertools import islice
from typing import Any, Final
from weakref import WeakKeyDictionary

import orjson
from sqlalchemy import Connection, delete, select, text

from advisor.core.events import StoredEvent
from advisor.core.gcpause import fewer_collections
from advisor.store import EventFilter, EventStore
from advisor.store.checkpointing import latest_checkpoint, save_checkpoint
from advisor.store.engine import retry_busy
from advisor.store.schema import PROJECTION_TABLES, fold_pending
from advisor.views.fold.chunk import Fold
from advisor.views.fold.heads import fold_heads
from advisor.views.fold.sink import LineSink
from advisor.views.fold.skipped import fold_skips, record

CHECKPOINT: Final = "projections"
FOLD_VERSION: Final = 2  # 2: order-independent runs, labels by content, incidents from runs
PROJECTION_LOCK_ID: Final = 0x616476_70726F  # pg advisory lock key for folding ("advpro")
CHUNK: Final = 5000


def _position(position: Mapping[str, Any] | None) -> int:
    """The seq this fold folded through (0: none, or a store folded by another version)."""
    if not position or position.get("fold") != FOLD_VERSION:
        return 0
    return int(position["seq"])


def folded_through(conn: Connection) -> int:
    """The seq the projections were folded through (0: none, or by another fold version)."""
    current = latest_checkpoint(conn, CHECKPOINT)
    return _position(None if current is None else orjson.loads(current))


class Projector:
    """Folds events into the projection tables; one instance per process."""

    def __init__(self, store: EventStore, sink: LineSink | None = None) -> None:
        """`sink`: given each line as it is put into a run; by default the one a diagnoser
        of this process gave for `store` (`hand_lines`), so that every fold of it in the
        process (the executor's, `auto`'s) hands its lines over."""
        self.store = store
        self.sink = sink if sink is not None else _SINKS.get(store)
        self._skipped: list[tuple[StoredEvent, str]] = []  # by the last chunk folded

    def position(self) -> int:
        return _position(self.store.checkpoint(CHECKPOINT))

    def catch_up(self) -> int:
        """Fold every event not folded yet; return how many were folded."""
        with fewer_collections():
            return self._catch_up()

    def _catch_up(self) -> int:
        cp = self.store.checkpoint(CHECKPOINT)
        if cp is not None and cp.get("fold") != FOLD_VERSION:
            retry_busy(self._empty_if_other_fold)
        done = 0
        while True:
            after = self.position()
            batch = list(
                islice(
                    self.store.read(EventFilter(after_seq=after), chunk=CHUNK, tolerant=True), CHUNK
                )
            )
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
        with self._handing(), self._writing() as conn:
            marked = conn.execute(select(fold_pending).order_by(fold_pending.c.stream)).all()
            if not marked:
                return
            fold = Fold(conn, folded_through(conn), self.sink)
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
        with self._handing(), self._writing() as conn:
            # Re-read under the write lock: another process may have folded them.
            if folded_through(conn) != after:
                return False
            fold = Fold(conn, batch[-1].seq, self.sink)
            fold.apply(batch)
            fold_heads(conn, batch)
            self._skipped = fold.skipped
            _save_position(conn, batch[-1].seq)
        return True

    def rebuild(self) -> int:
        """Empty the projections and fold every event again."""
        with self._writing() as conn:
            _empty(conn)
        return self.catch_up()

    def _handing(self) -> AbstractContextManager[None]:
        """The lines a write transaction hands the sink count once it committed: entered
        around `_writing`, whose exit commits."""
        return nullcontext() if self.sink is None else self.sink.handing()

    @contextmanager
    def _writing(self) -> Iterator[Connection]:
        """A write transaction (SQLite: BEGIN IMMEDIATE), committed on success."""
        with self.store.connect(write=True) as conn, conn.begin():
            if conn.dialect.name == "postgresql":  # one folder at a time, as SQLite's lock
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PROJECTION_LOCK_ID})
            yield conn


_SINKS: WeakKeyDictionary[EventStore, LineSink] = WeakKeyDictionary()


def hand_lines(store: EventStore, sink: LineSink) -> None:
    """Every `Projector` of `store` made from now on in this process hands its lines to
    `sink` (the diagnoser's: `pipeline.processing.Processor`)."""
    _SINKS[store] = sink


def _empty(conn: Connection) -> None:
    for table in PROJECTION_TABLES:
        conn.execute(delete(table))
    _save_position(conn, 0)  # checkpoints are append-only: a new position, not a deletion


def _save_position(conn: Connection, seq: int) -> None:
    save_checkpoint(conn, CHECKPOINT, {"seq": seq, "fold": FOLD_VERSION})
