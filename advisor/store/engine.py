"""Engines for the two supported databases, configured for many concurrent appenders."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Final, TypeVar
from urllib.parse import quote

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, OperationalError
from sqlalchemy.pool import StaticPool
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from advisor.core.errors import StoreError

# Waiting writers queue on SQLite's busy handler for this long before the store retries.
SQLITE_BUSY_TIMEOUT_S = 60.0
WRITE_OPTION = "advisor_write"
SQLITE_CACHE_KIB = 16 * 1024  # 32 MiB was no faster at 1,000,000 events, and costs RSS
SQLITE_WAL_CHECKPOINT_PAGES = 16384


T = TypeVar("T")
K = TypeVar("K", int, str)
BUSY_RETRIES = 8
IN_CHUNK: Final = 500  # values in one SQL `IN (...)` list


def in_parts(values: Iterable[K]) -> Iterator[list[K]]:
    """`values`, each once and sorted, in lists short enough for one SQL `IN (...)`."""
    unique = sorted(set(values))
    for i in range(0, len(unique), IN_CHUNK):
        yield unique[i : i + IN_CHUNK]


def is_busy(e: OperationalError) -> bool:
    """SQLite's "database is locked" / "busy": another writer, worth waiting for."""
    message = str(e.orig).lower()
    return "locked" in message or "busy" in message


def retry_busy(work: Callable[[], T]) -> T:
    """Run `work`, again after a pause when SQLite says it is busy without having waited
    (a lock upgrade, a journal-mode switch racing another process on a new file): up to
    BUSY_RETRIES times in all, the pauses from 0.05 s doubling up to 2 s."""
    return Retrying(
        retry=retry_if_exception(_busy),
        stop=stop_after_attempt(BUSY_RETRIES),
        wait=wait_exponential(multiplier=0.05, max=2.0),
        reraise=True,
    )(work)


def _busy(e: BaseException) -> bool:
    return isinstance(e, OperationalError) and is_busy(e)


def parse_url(url: str) -> URL:
    try:
        parsed = make_url(url)
    except ArgumentError as e:
        raise StoreError(
            f"--db {url!r} is not a database URL (sqlite:///PATH or "
            "postgresql+psycopg://USER@HOST/DB)"
        ) from e
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise StoreError(
            f"--db {redact(url)}: unsupported database "
            f"{parsed.get_backend_name()!r}; use SQLite or PostgreSQL"
        )
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


def make_engine(url: str, *, read_only: bool = False) -> Engine:
    """An engine for `url`; `read_only`: for a command that only reads — a store that does
    not exist is refused, nothing is created, and every transaction is read-only."""
    parsed = parse_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_reader(parsed) if read_only else _sqlite_engine(parsed)
    # No server-side prepared statements: after five executions psycopg prepares a query and
    # PostgreSQL may switch to a generic plan, which for the idempotency look-up
    # (`source_id = $1 AND idem_key IN ($2 … $501)`) is a scan of the whole table; appends
    # slowed from 0.2 s to 5 s a batch by 100,000 events.
    connect_args: dict[str, Any] = (
        {"prepare_threshold": None} if parsed.get_driver_name() == "psycopg" else {}
    )
    connect_args.update(pg_timeouts(parsed))
    engine = create_engine(parsed, pool_pre_ping=True, connect_args=connect_args)
    if read_only:

        @event.listens_for(engine, "connect")
        def _read_only(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.execute("SET default_transaction_read_only = on")
            dbapi_conn.commit()

    return engine


# Every PostgreSQL connection is bounded: a server that accepts TCP and never answers fails the
# connect after PG_CONNECT_TIMEOUT_S; a peer that vanished mid-statement is dropped by TCP
# keepalives and tcp_user_timeout; a statement, or a transaction left idle, that runs past its
# bound is ended by the server. A URL's own settings (query parameters, `options=-c...`) win.
PG_CONNECT_TIMEOUT_S = 5
PG_STATEMENT_TIMEOUT_MS = 300_000
PG_IDLE_IN_TRANSACTION_TIMEOUT_MS = 300_000
PG_TCP_USER_TIMEOUT_MS = 30_000


def pg_timeouts(url: URL) -> dict[str, Any]:
    """libpq connection parameters bounding every wait on the server (see above)."""
    wanted: dict[str, Any] = {
        "connect_timeout": PG_CONNECT_TIMEOUT_S,
        "keepalives": 1,
        "keepalives_idle": 10,
        "keepalives_interval": 5,
        "keepalives_count": 3,
        "tcp_user_timeout": PG_TCP_USER_TIMEOUT_MS,
    }
    params = {k: v for k, v in wanted.items() if k not in url.query}
    given = url.query.get("options", "")
    given = " ".join(given) if isinstance(given, tuple) else given
    params["options"] = " ".join(
        filter(
            None,
            (
                f"-c statement_timeout={PG_STATEMENT_TIMEOUT_MS}",
                f"-c idle_in_transaction_session_timeout={PG_IDLE_IN_TRANSACTION_TIMEOUT_MS}",
                given,
            ),
        )
    )  # later settings win: the URL's own
    return params


def _ours_or_empty(cursor: Any) -> bool:
    """A new file or an advisor store: switched to WAL. Another application's database is
    left as it is (`advisor db upgrade` refuses it unless told to share it)."""
    cursor.execute(
        "SELECT count(*), count(*) FILTER (WHERE name = 'alembic_version') "
        "FROM sqlite_master WHERE type = 'table'"
    )
    tables, ours = cursor.fetchone()
    return bool(tables == 0 or ours)


def _sqlite_reader(url: URL) -> Engine:
    """A SQLite store opened read-only (`mode=ro`, `query_only`): no folder, file, WAL or
    schema is created; on read-only media, immutable (`sqlite_read_uri`)."""
    uri = sqlite_read_uri(url)

    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(
            uri, uri=True, timeout=SQLITE_BUSY_TIMEOUT_S, check_same_thread=False
        )
        conn.isolation_level = None
        conn.execute("PRAGMA query_only=1")
        conn.execute(f"PRAGMA busy_timeout={int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
        return conn

    engine = create_engine("sqlite://", creator=connect)

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN")

    return engine


def sqlite_read_uri(url: URL) -> str:
    """The URI a reader opens the SQLite store at `url` with: `mode=ro`; on read-only media
    (a read-only mount, an immutable file, an evidence copy) where SQLite cannot even keep its
    WAL index, `immutable=1` — refused if the file has a WAL that was never checkpointed,
    whose events that would hide. A store that does not exist is refused."""
    database = url.database or ""
    if database in ("", ":memory:"):
        raise StoreError("--db sqlite:// (in memory) holds no store to read")
    path = Path(database).expanduser()
    if not path.is_file():
        what = "is not a file" if path.exists() else "does not exist"
        raise StoreError(
            f"--db {redact(url)}: {path} {what}; a reading command never "
            "creates a store (a writing command or `advisor db upgrade` does)"
        )
    target = f"file:{quote(str(path.resolve()))}"
    immutable = not _sqlite_readable(f"{target}?mode=ro")
    if immutable:
        wal = path.with_name(path.name + "-wal")
        if wal.exists() and wal.stat().st_size > 0:
            raise StoreError(
                f"--db {redact(url)}: on read-only media with a write-ahead log "
                f"({wal}) that was never checkpointed; copy the store and its "
                "-wal file to writable storage to read it"
            )
    return f"{target}?immutable=1" if immutable else f"{target}?mode=ro"


def _sqlite_readable(uri: str) -> bool:
    """Whether SQLite can read the file through `uri` (a WAL store on read-only media
    cannot: it needs to create or write its -shm index)."""
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=SQLITE_BUSY_TIMEOUT_S)
    except sqlite3.Error:
        return False
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return True
    except sqlite3.OperationalError as e:
        message = str(e).lower()
        if "readonly" in message or "read-only" in message or "unable to open" in message:
            return False
        raise StoreError(f"cannot read the store {uri}: {e}") from e
    except sqlite3.DatabaseError as e:
        raise StoreError(
            f"{uri.removeprefix('file:').split('?')[0]} is not a SQLite store: {e}"
        ) from e
    finally:
        conn.close()


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
        if not in_memory and _ours_or_empty(cursor):
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
