"""Engines for the two supported databases, configured for many concurrent appenders."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, OperationalError
from sqlalchemy.pool import StaticPool

from advisor.errors import StoreError

# Waiting writers queue on SQLite's busy handler for this long before the store retries.
SQLITE_BUSY_TIMEOUT_S = 60.0
WRITE_OPTION = "advisor_write"
SQLITE_CACHE_KIB = 16 * 1024  # 32 MiB was no faster at 1,000,000 events, and costs RSS
SQLITE_WAL_CHECKPOINT_PAGES = 16384


T = TypeVar("T")
BUSY_RETRIES = 8


def is_busy(e: OperationalError) -> bool:
    """SQLite's "database is locked" / "busy": another writer, worth waiting for."""
    message = str(e.orig).lower()
    return "locked" in message or "busy" in message


def retry_busy(work: Callable[[], T]) -> T:
    """Run `work`, again after a pause when SQLite says it is busy without having waited
    (a lock upgrade, a journal-mode switch racing another process on a new file)."""
    delay = 0.05
    for attempt in range(BUSY_RETRIES):
        try:
            return work()
        except OperationalError as e:
            if not is_busy(e) or attempt == BUSY_RETRIES - 1:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 2.0)
    raise AssertionError("unreachable")


def parse_url(url: str) -> URL:
    try:
        parsed = make_url(url)
    except ArgumentError as e:
        raise StoreError(f"--db {url!r} is not a database URL (sqlite:///PATH or "
                         "postgresql+psycopg://USER@HOST/DB)") from e
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise StoreError(f"--db {redact(url)}: unsupported database "
                         f"{parsed.get_backend_name()!r}; use SQLite or PostgreSQL")
    if parsed.get_backend_name() == "postgresql" and parsed.get_driver_name() != "psycopg":
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def first_line(e: BaseException) -> str:
    """A database error as one line, without SQLAlchemy's SQL echo and background link."""
    orig = getattr(e, "orig", None)
    text = str(orig if orig is not None else e).strip()
    return (text.splitlines() or [e.__class__.__name__])[0]


def redact(url: str | URL) -> str:
    parsed = url if isinstance(url, URL) else make_url(url)
    return parsed.render_as_string(hide_password=True)


def make_engine(url: str) -> Engine:
    parsed = parse_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed)
    # No server-side prepared statements: after five executions psycopg prepares a query and
    # PostgreSQL may switch to a generic plan, which for the idempotency look-up
    # (`source_id = $1 AND idem_key IN ($2 … $501)`) is a scan of the whole table; appends
    # slowed from 0.2 s to 5 s a batch by 100,000 events.
    connect_args = {"prepare_threshold": None} if parsed.get_driver_name() == "psycopg" else {}
    return create_engine(parsed, pool_pre_ping=True, connect_args=connect_args)


def _sqlite_engine(url: URL) -> Engine:
    database = url.database or ""
    in_memory = database in ("", ":memory:")
    if not in_memory:
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    kwargs: dict[str, Any] = {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_S}}
    if in_memory:
        kwargs.update(poolclass=StaticPool, connect_args={"check_same_thread": False})
    engine = create_engine(url, **kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event issue BEGIN itself (see below).
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        if not in_memory:
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        # The idempotency index takes keys in random order: a larger page cache keeps its
        # upper levels in memory, and checkpointing the WAL less often halves the writes
        # (measured with 150,000 journal entries: 19 → 14.5 µs per appended event).
        cursor.execute(f"PRAGMA cache_size=-{SQLITE_CACHE_KIB}")
        cursor.execute(f"PRAGMA wal_autocheckpoint={SQLITE_WAL_CHECKPOINT_PAGES}")
        cursor.execute(f"PRAGMA busy_timeout={int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # A writer takes the lock up front: a deferred transaction that later wants to
        # write can fail with SQLITE_BUSY without waiting, which is what users would see.
        immediate = conn.get_execution_options().get(WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine
