"""EventStore: append batches of events (hash-chained, idempotent) and read them back.

The store can only append and read. Each append is one transaction that holds the
database's write lock (SQLite `BEGIN IMMEDIATE`, a PostgreSQL advisory lock), so the
global sequence and the hash chain stay linear with any number of writers; a reader's
checkpoint is saved in the same transaction as the events it covers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Final

import orjson
from sqlalchemy import Connection, Engine, select, text
from sqlalchemy.exc import SQLAlchemyError

from advisor.core.errors import IntegrityError, InvalidEventError, StoreError
from advisor.core.events import (
    NewEvent,
    Prepared,
    StoredEvent,
    load_payload,
    prepare_events,
    stored_event,
)
from advisor.store import migrate
from advisor.store.chain import GENESIS_HASH, RawEvent, chain_rows, stored_hash
from advisor.store.checkpointing import latest_checkpoint, save_checkpoint
from advisor.store.engine import WRITE_OPTION, first_line, make_engine, redact, retry_busy
from advisor.store.glance import Glance, glance
from advisor.store.schema import events, sources
from advisor.store.types import AppendResult, Checkpoint, EventFilter

# The hash chain lives in `chain`, readers' checkpoints in `checkpointing`; importers of this
# module find them here too.
__all__ = [
    "APPEND_LOCK_ID",
    "SHIP_PREFIX",
    "EventStore",
    "open_store",
    "read_payload",
]
# What `read` and `read_raw` give of each event before its payload, in this order.
_ENVELOPE = (
    events.c.seq,
    events.c.stream,
    events.c.type,
    events.c.schema_version,
    events.c.event_time_us,
    events.c.recorded_time_us,
    sources.c.name,
    events.c.idem_key,
)
# An event as stored (`RawEvent`): the envelope, the payload, the hash and the origin.
_RAW: Final = select(*_ENVELOPE, events.c.payload, events.c.hash, events.c.origin).join(
    sources, sources.c.id == events.c.source_id
)
SHIP_PREFIX: Final = "ship:"  # the source of events a host shipped here (`advisor.fleet.ship`)
APPEND_LOCK_ID = 0x616476_617070  # pg advisory lock key for appends
_IN_CHUNK = 500
# The keys go in as an array the planner cannot see into (an InitPlan): with a list of
# constants and no statistics on the table (a new partition, autovacuum off or behind), it
# takes `idem_key IN (…)` to match every row, and scans all of the source's events instead
# of probing the (source_id, idem_key) index: 0.5 s a look-up at 1,000,000 events, not 1 ms.
# The array is sent as its text (`{1,2,…}`, `_pg_bigints`): psycopg dumps a list of ints
# an element at a time in Python, 1.3 µs a key of the appender's CPU where the text costs 0.3.
_PG_EXISTING_KEYS = text(
    "SELECT idem_key FROM events WHERE source_id = :sid "
    "AND idem_key = ANY(ARRAY(SELECT unnest(CAST(:keys AS bigint[]))))"
)


_EVENT_COLUMNS = (
    "seq, stream, type, schema_version, event_time_us, recorded_time_us, "
    "source_id, idem_key, payload, hash, origin"
)
_SQLITE_INSERT = f"INSERT INTO events ({_EVENT_COLUMNS}) VALUES ({', '.join(['?'] * 11)})"
_PG_COPY = f"COPY events ({_EVENT_COLUMNS}) FROM STDIN (FORMAT BINARY)"
# The columns' types, in _EVENT_COLUMNS' order, for binary COPY: a row whose value does not
# fit its column fails the append, as it would in text (tests/store checks them against the
# table as migrated).
_PG_COPY_TYPES: Final = (
    "int8", "text", "varchar", "int4", "int8", "int8", "int4", "int8", "text", "bytea", "text",
)  # fmt: skip


class EventStore:
    def __init__(self, engine: Engine, url: str) -> None:
        self._engine = engine
        self.url = url
        self._source_ids: dict[str, int] = {}  # sources are append-only: ids never change
        self._observers: list[Callable[[AppendResult], None]] = []
        # PostgreSQL: events are partitioned (migration 0006); seqs below this have one.
        self._partitioned_below = 0

    def on_append(self, observer: Callable[[AppendResult], None]) -> None:
        """Call `observer` after every committed append that stored something."""
        self._observers.append(observer)

    @property
    def display_url(self) -> str:
        return redact(self.url)

    @property
    def dialect(self) -> str:
        return self._engine.dialect.name

    def connect(self, *, write: bool = False) -> Connection:
        """A connection to the store (`with store.connect() as conn:`); `write` marks one
        that writes, so SQLite takes its write lock at BEGIN (docs/integrity.md)."""
        conn = self._engine.connect()
        return conn.execution_options(**{WRITE_OPTION: True}) if write else conn

    def begin(self) -> AbstractContextManager[Connection]:
        """A connection in a transaction that commits at the end of the `with` block."""
        return self._engine.begin()

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> EventStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------------------

    def append(
        self, batch: Sequence[NewEvent], checkpoint: Checkpoint | None = None
    ) -> AppendResult:
        """Append a batch in one transaction (all or nothing), skipping events already stored."""
        return self.append_prepared(prepare_events(batch), checkpoint)

    def append_prepared(
        self,
        batch: Sequence[Prepared],
        checkpoint: Checkpoint | None = None,
        origins: Sequence[bytes | None] | None = None,
    ) -> AppendResult:
        """`append` for events already validated and serialised by `advisor.core.events.prepare`;
        `origins`, one per event, are shipped events' envelopes on their hosts."""
        if not batch and checkpoint is None:
            return AppendResult()
        if origins is not None and len(origins) != len(batch):
            raise ValueError("one origin per event")
        result = self._append_retrying(batch, checkpoint, origins)
        if result.appended:
            for observer in self._observers:
                observer(result)
        return result

    def _append_retrying(
        self,
        batch: Sequence[Prepared],
        checkpoint: Checkpoint | None,
        origins: Sequence[bytes | None] | None,
    ) -> AppendResult:
        try:
            return retry_busy(lambda: self._append_once(batch, checkpoint, origins))
        except SQLAlchemyError as e:
            raise StoreError(f"cannot append to {self.display_url}: {first_line(e)}") from e

    def _append_once(
        self,
        batch: Sequence[Prepared],
        checkpoint: Checkpoint | None,
        origins: Sequence[bytes | None] | None,
    ) -> AppendResult:
        result = AppendResult()
        partitioned_below = self._partitioned_below
        with self._engine.connect().execution_options(**{WRITE_OPTION: True}) as conn:
            with conn.begin():
                if self.dialect == "postgresql":
                    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": APPEND_LOCK_ID})
                source_ids, new_sources = self._intern_sources(conn, {ev[4] for ev in batch})
                seen = self._existing_keys(conn, batch, source_ids, new_sources)
                row = conn.execute(
                    select(events.c.seq, events.c.hash).order_by(events.c.seq.desc()).limit(1)
                ).first()
                last = (0, GENESIS_HASH) if row is None else (row[0], bytes(row[1]))
                rows, last_seq, result.duplicates = chain_rows(
                    batch, source_ids, seen, last, origins
                )
                if rows and self.dialect == "postgresql" and last_seq >= partitioned_below:
                    partitioned_below = conn.execute(
                        text("SELECT advisor_ensure_partitions(:s)"), {"s": last_seq}
                    ).scalar_one()
                if rows:
                    self._insert(conn, rows)
                if checkpoint is not None:
                    save_checkpoint(conn, checkpoint.name, checkpoint.position)
            self._source_ids.update(source_ids)
            self._partitioned_below = partitioned_below  # committed: the partitions exist
        result.appended = len(rows)
        result.last_seq = last_seq
        return result

    def _insert(self, conn: Connection, rows: list[tuple[Any, ...]]) -> None:
        """PostgreSQL: by binary COPY, in this transaction (an INSERT per row cost the server
        and psycopg a statement each: 68 µs an event where COPY takes a few; binary, not text,
        halves what COPY costs both sides: 2.8 → 1.4 µs a row here, 6 → 3 in the server);
        SQLite: one prepared INSERT run for every row."""
        if self.dialect == "postgresql":
            dbapi: Any = conn.connection.dbapi_connection  # psycopg's: it has copy()
            with dbapi.cursor() as cursor, cursor.copy(_PG_COPY) as copy:
                copy.set_types(_PG_COPY_TYPES)
                for row in rows:
                    copy.write_row(row)
            return
        conn.exec_driver_sql(_SQLITE_INSERT, rows)

    def _intern_sources(self, conn: Connection, names: set[str]) -> tuple[dict[str, int], set[str]]:
        ids = {n: self._source_ids[n] for n in names if n in self._source_ids}
        missing = names - ids.keys()
        if missing:
            for name, sid in conn.execute(
                select(sources.c.name, sources.c.id).where(sources.c.name.in_(sorted(missing)))
            ):
                ids[name] = sid
        new = names - ids.keys()
        if new:
            top = conn.execute(text("SELECT COALESCE(MAX(id), 0) FROM sources")).scalar_one()
            for offset, name in enumerate(sorted(new), start=1):
                ids[name] = top + offset
            conn.execute(sources.insert(), [{"id": ids[n], "name": n} for n in sorted(new)])
        return ids, new

    def _existing_keys(
        self,
        conn: Connection,
        batch: Sequence[Prepared],
        source_ids: dict[str, int],
        new_sources: set[str],
    ) -> set[tuple[int, int]]:
        by_source: dict[int, list[int]] = {}
        for _stream, _type, _version, _time, source, key, _body in batch:
            if source not in new_sources:  # a source interned just now has no events yet
                by_source.setdefault(source_ids[source], []).append(key)
        found: set[tuple[int, int]] = set()
        if self.dialect == "postgresql":
            for sid, keys in by_source.items():
                found.update(
                    (sid, k)
                    for (k,) in conn.execute(
                        _PG_EXISTING_KEYS, {"sid": sid, "keys": _pg_bigints(set(keys))}
                    )
                )
            return found
        # Plain driver SQL, one statement per chunk size: SQLAlchemy's expanding IN compiled
        # a new statement for each chunk, which cost more than the look-up.
        for sid, keys in by_source.items():
            unique = sorted(set(keys))
            for i in range(0, len(unique), _IN_CHUNK):
                chunk = unique[i : i + _IN_CHUNK]
                marks = ", ".join("?" * len(chunk))
                query = f"SELECT idem_key FROM events WHERE source_id = ? AND idem_key IN ({marks})"
                found.update((sid, k) for (k,) in conn.exec_driver_sql(query, (sid, *chunk)))
        return found

    # -- reading ---------------------------------------------------------------------------

    def checkpoint(self, name: str) -> dict[str, Any] | None:
        with self._engine.connect() as conn:
            value = latest_checkpoint(conn, name)
        if value is None:
            return None
        position: dict[str, Any] = orjson.loads(value)
        return position

    def read_raw(
        self, *, after_seq: int = 0, source: str | None = None, chunk: int = 10_000
    ) -> Iterator[RawEvent]:
        """Events as stored, in sequence order (with `source`: that source's, in key order)."""
        query, order, position = _RAW, events.c.seq, after_seq
        if source is not None:
            query = query.where(sources.c.name == source)
            order, position = events.c.idem_key, -1
        with self._engine.connect() as conn:
            while True:
                rows = conn.execute(
                    query.where(order > position).order_by(order).limit(chunk)
                ).all()
                for r in rows:
                    yield RawEvent(
                        r[0],
                        r[1],
                        r[2],
                        r[3],
                        r[4],
                        r[5],
                        r[6],
                        r[7],
                        r[8],
                        stored_hash(r[9]),
                        r[10],
                    )
                if len(rows) < chunk:
                    return
                position = rows[-1][7] if source is not None else rows[-1][0]

    def glance(self, *, after_seq: int, limit: int, message_chars: int = 400) -> list[Glance]:
        """The next `limit` events after `after_seq`, read only as far as deciding about them
        needs (`advisor.store.glance`)."""
        with self._engine.connect() as conn:
            return glance(conn, self.dialect, after_seq, limit, message_chars)

    def read_raw_at(self, seqs: Sequence[int]) -> list[RawEvent]:
        """The events at these seqs as stored, in sequence order (a seq it lacks is left out)."""
        out: list[RawEvent] = []
        unique = sorted(set(seqs))
        with self._engine.connect() as conn:
            for i in range(0, len(unique), _IN_CHUNK):
                part = events.c.seq.in_(unique[i : i + _IN_CHUNK])
                rows = conn.execute(_RAW.where(part).order_by(events.c.seq)).all()
                out.extend(RawEvent(*r[:9], stored_hash(r[9]), r[10]) for r in rows)
        return out

    def read(
        self, flt: EventFilter | None = None, *, chunk: int = 2000, tolerant: bool = False
    ) -> Iterator[StoredEvent]:
        """Events in sequence order; with a limit, the last `limit` that match. An event
        whose payload cannot be read raises IntegrityError, or with `tolerant` comes with the
        reason as its payload (a str), for the fold to skip and record."""
        flt = flt or EventFilter()
        query = select(*_ENVELOPE, events.c.payload).join(
            sources, sources.c.id == events.c.source_id
        )
        if flt.stream is not None:
            query = query.where(events.c.stream == flt.stream)
        if flt.type is not None:
            query = query.where(events.c.type == flt.type)
        if flt.since_us is not None:
            query = query.where(events.c.event_time_us >= flt.since_us)
        if flt.until_us is not None:
            query = query.where(events.c.event_time_us < flt.until_us)
        if flt.limit is not None:
            tail = query.order_by(events.c.seq.desc()).limit(flt.limit).subquery()
            query = select(tail).order_by(tail.c.seq)
            after = None
        else:
            query = query.order_by(events.c.seq).limit(chunk)
            after = flt.after_seq or 0
        with self._engine.connect() as conn:
            while True:
                q = query if after is None else query.where(events.c.seq > after)
                rows = conn.execute(q).all()
                for r in rows:
                    # (unvalidated: the row's types are the table's, and a payload that
                    # could not be read is carried as its reason)
                    yield stored_event(
                        r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7],
                        read_payload(r[0], r[2], r[3], r[8], tolerant),
                    )  # fmt: skip
                if after is None or len(rows) < chunk:
                    return
                after = rows[-1][0]


def _pg_bigints(values: set[int]) -> str:
    """A PostgreSQL array literal of integers (`{1,2,3}`), in order."""
    return "{" + ",".join(map(str, sorted(values))) + "}"


def read_payload(seq: int, type_: str, version: int, text: str, tolerant: bool = False) -> Any:
    """A stored payload, parsed; IntegrityError naming the seq when it cannot be (the
    store was altered, or a newer advisor wrote a type this one does not know) — with
    `tolerant`, the reason as a str instead."""
    try:
        return load_payload(type_, version, text)
    except (ValueError, KeyError, TypeError, InvalidEventError) as e:  # JSON, pydantic, upcast
        reason = str(e).splitlines()[0] if str(e) else e.__class__.__name__
        if tolerant:
            return f"its stored payload cannot be read: {reason[:200]}"
        raise IntegrityError(
            f"event seq {seq} ({type_}): its stored payload cannot be read "
            f"({reason[:200]}); the store was altered: run `advisor verify`",
            first_bad_seq=seq,
        ) from e


def open_store(
    url: str, *, upgrade: bool = True, read_only: bool = False, shared_schema: bool = False
) -> EventStore:
    """Open (and on first use create or upgrade) the store at `url`. `read_only`: for a
    command that only reads — the store must exist at the current schema revision, and it is
    opened read-only (nothing is created, migrated or written). `shared_schema`: create the
    tables even where the database (or PostgreSQL schema) already holds others."""
    engine = make_engine(url, read_only=read_only)
    try:
        if read_only:
            migrate.require_current(engine)
        elif upgrade:
            migrate.upgrade(engine, shared_schema=shared_schema)
    except BaseException:
        engine.dispose()
        raise
    return EventStore(engine, url)
