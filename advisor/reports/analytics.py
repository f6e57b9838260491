"""SQL over the history with DuckDB, through stable views; DuckDB is never a second source of
truth: it reads the store in place (SQLite or PostgreSQL, through the scanner extensions that
ship as Python packages pinned to DuckDB's version), or a Parquet export of it.

Views: `events`, `log_lines`, `gpu_samples`, `runs`, `incidents`, `actions`.

The store is always attached READ_ONLY (and a PostgreSQL session is opened read-only). A
sandboxed connection (`advisor query` unless --allow-files, `stats`, `export parquet`) reaches
nothing else: after the attach, external access is switched off (no file readers or writers,
no extension installed or loaded, no Python objects scanned; an export's own folder excepted,
through `allowed_directories`) and the configuration is locked, so a query cannot switch
anything back. The scanner extensions open SQLite files and PostgreSQL servers themselves,
past DuckDB's file-system checks, so ATTACH/DETACH and the scanners' functions are refused
in every query (`check_sql`), as are the statements that write files in a sandbox.

Many processes, one store: DuckDB opens a SQLite store only in a short-lived process of its
own (`advisor.reports.apart` says why: its SQLite would drop the locks of the process's other
connections), so the entry points that read the store — `query_store`, `stats.store_stats`,
`export_parquet` — run their DuckDB work there and hand back the rows; `connect_store` itself
is for that process (and for PostgreSQL).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

import duckdb

from advisor.core.errors import InputError, StoreError
from advisor.reports.apart import apart, duckdb_source
from advisor.reports.sandbox import check_sql, sql_literal
from advisor.reports.sandbox import first_line as _first_line
from advisor.reports.sandbox import new_duckdb as _duckdb
from advisor.reports.sandbox import seal as _seal
from advisor.store.engine import parse_url, redact

# What a query may run lives in `sandbox`; importers of this module find it here too.
__all__ = [
    "PROJECTIONS",
    "VIEWS",
    "Answer",
    "Connection",
    "connect_parquet",
    "connect_store",
    "events_select",
    "export_parquet",
    "query_parquet",
    "query_store",
]

PROJECTIONS: Final = ("runs", "incidents", "actions", "gpu_samples")
VIEWS: Final = ("events", "log_lines", "gpu_samples", "runs", "incidents", "actions")

_EVENTS_SELECT: Final = """
    SELECT e.seq, e.stream, split_part(e.stream, '/', 1) AS host, e.type,
           e.schema_version AS version, e.event_time_us AS time_us,
           make_timestamp(e.event_time_us) AS time, e.recorded_time_us AS recorded_us,
           s.name AS source, e.payload{extra}
    FROM store.{table} e JOIN store.sources s ON s.id = e.source_id"""
_LOG_LINES: Final = """
    SELECT seq, stream, host, time_us, time,
           json_extract_string(payload, '$.unit') AS unit,
           json_extract_string(payload, '$.message') AS message,
           CAST(json_extract(payload, '$.priority') AS INTEGER) AS priority,
           json_extract_string(payload, '$.invocation_id') AS invocation_id,
           json_extract_string(payload, '$.origin') AS origin
    FROM events WHERE type = 'log.recorded'"""


@dataclass(frozen=True)
class Answer:
    """A query's answer: how DuckDB read (`Connection.path`), the columns and the rows."""

    path: str
    columns: list[str]
    rows: list[tuple[Any, ...]]


@dataclass
class Connection:
    con: duckdb.DuckDBPyConnection
    path: str  # how the views read: "sqlite scanner", "postgres scanner", "parquet"
    sandbox: bool = False
    resources: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    def query(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run `sql` (checked: `check_sql`); the columns and rows of its last statement (none
        when that statement returns no rows)."""
        statements = check_sql(sql, sandbox=self.sandbox, con=self.con)
        try:
            for statement in statements[:-1]:
                self.con.execute(statement)
            relation = self.con.sql(statements[-1])
            if relation is None:
                return [], []
            columns = list(relation.columns)
            # TIMESTAMP WITH TIME ZONE values need pytz to become Python datetimes: they
            # come as DuckDB prints them (2026-02-21 00:33:16+00) instead.
            if any("TIME ZONE" in str(t) for t in relation.types):
                relation = relation.project(
                    ", ".join(
                        f"CAST(#{i} AS VARCHAR)" if "TIME ZONE" in str(t) else f"#{i}"
                        for i, t in enumerate(relation.types, start=1)
                    )
                )
            return columns, relation.fetchall()
        except duckdb.Error as e:
            raise InputError(f"query: {_first_line(e)}") from e

    def close(self) -> None:
        try:
            self.con.close()
        finally:
            self.resources.close()


def query_store(url: str, sql: str, *, sandbox: bool) -> Answer:
    """`sql` over the store at `url` (`Connection.query`); for SQLite, in a process of its
    own (`apart`)."""
    return apart(url, _query_store, url, sql, sandbox)


def _query_store(url: str, sql: str, sandbox: bool) -> Answer:
    conn = connect_store(url, sandbox=sandbox)
    try:
        return Answer(conn.path, *conn.query(sql))
    finally:
        conn.close()


def query_parquet(folder: Path, sql: str, *, sandbox: bool) -> Answer:
    """`sql` over a Parquet export (`connect_parquet`)."""
    conn = connect_parquet(folder, sandbox=sandbox)
    try:
        return Answer(conn.path, *conn.query(sql))
    finally:
        conn.close()


def _extension(package: str) -> str:
    module = importlib.import_module(package)
    found = sorted(Path(module.__file__ or "").parent.rglob("*.duckdb_extension"))
    if not found:
        raise StoreError(f"{package} has no DuckDB extension file")
    return str(found[-1])


def _require_store(url: str) -> None:
    """The store exists at this advisor's schema revision (one line naming it if not),
    looked at read-only: DuckDB's own errors would name a table, not the store."""
    from advisor.store import open_store

    open_store(url, read_only=True).close()


def connect_store(url: str, *, sandbox: bool = False, folder: Path | None = None) -> Connection:
    """DuckDB attached read-only to the store at `url`, with the views; `sandbox`: reaching
    nothing else but `folder` (module docstring). A SQLite store only in a process of its
    own (`apart`)."""
    parsed = parse_url(url)
    sqlite = parsed.get_backend_name() == "sqlite"
    if sqlite and parsed.database in (None, "", ":memory:"):
        raise InputError("query needs a store in a file, not an in-memory one")
    _require_store(url)
    resources = contextlib.ExitStack()
    con = _duckdb(sandbox)
    dsn = ""
    try:
        if sqlite:
            source, path = duckdb_source(url, resources)
            con.execute(f"LOAD {sql_literal(_extension('duckdb_extension_sqlite_scanner'))}")
            con.execute(f"ATTACH {sql_literal(source)} AS store (TYPE sqlite, READ_ONLY)")
        else:
            con.execute(f"LOAD {sql_literal(_extension('duckdb_extension_postgres_scanner'))}")
            options = str(parsed.query.get("options", ""))
            schema = re.search(r"search_path(?:=|%3D)([\w$]+)", options)
            # The server keeps the session read-only too, whatever DuckDB sends on it.
            read_only = quote(f"{options} -c default_transaction_read_only=on".strip())
            dsn = (
                parsed.set(drivername="postgresql", query={}).render_as_string(hide_password=False)
                + f"?options={read_only}"
            )
            with_schema = f", SCHEMA {sql_literal(schema.group(1))}" if schema else ""
            # filters reach the server as WHERE clauses its indexes answer (by default the
            # scanner splits a table into page ranges, which no index serves)
            con.execute("SET pg_use_ctid_scan = false")
            con.execute(
                f"ATTACH {sql_literal(dsn)} AS store (TYPE postgres{with_schema}, READ_ONLY)"
            )
            path = "postgres scanner"
        con.execute(f"CREATE VIEW events AS {events_select()}")
        for name in PROJECTIONS:
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM store.{name}")
        con.execute(f"CREATE VIEW log_lines AS {_LOG_LINES}")
        if sandbox:
            _seal(con, folder)
    except BaseException as e:
        con.close()
        resources.close()
        if not isinstance(e, duckdb.Error):
            raise
        message = _first_line(e).replace(dsn, redact(url)) if dsn else _first_line(e)
        raise StoreError(f"DuckDB cannot read the store: {message}") from e
    return Connection(con, path, sandbox, resources)


def events_select(table: str = "events", extra: str = "") -> str:
    """The `events` view's SELECT over the attached store's `table` (a partition of it, for
    retention), with `extra` columns after the payload."""
    quoted = '"' + table.replace('"', '""') + '"'
    return _EVENTS_SELECT.format(table=quoted, extra=extra)


def connect_parquet(folder: Path, *, sandbox: bool = False) -> Connection:
    """The same views over an export written by `export_parquet`, or over the events that
    `advisor retention` wrote (those have no projection files: only the event views);
    `sandbox`: reading that folder and nothing else."""
    if not (folder / "events").is_dir():
        raise InputError(f"{folder}: not a Parquet export (no events/ folder)")
    folder = folder.resolve()
    con = _duckdb(sandbox)
    try:
        pattern = sql_literal(str(folder / "events" / "**" / "*.parquet"))
        con.execute(
            "CREATE VIEW events AS SELECT seq, stream, host, type, version, time_us, "
            f"time, recorded_us, source, payload FROM read_parquet({pattern}, "
            "hive_partitioning = true, union_by_name = true)"
        )
        for name in PROJECTIONS:
            if (folder / f"{name}.parquet").is_file():
                con.execute(
                    f"CREATE VIEW {name} AS SELECT * FROM "
                    f"read_parquet({sql_literal(str(folder / f'{name}.parquet'))})"
                )
        con.execute(f"CREATE VIEW log_lines AS {_LOG_LINES}")
        if sandbox:
            _seal(con, folder)
    except duckdb.Error as e:
        con.close()
        raise InputError(f"{folder}: not a readable Parquet export: {_first_line(e)}") from e
    return Connection(con, "parquet", sandbox)


def export_parquet(url: str, folder: Path, *, force: bool = False) -> dict[str, int]:
    """Events partitioned by day and host, and each projection table, as Parquet. Written
    under a hidden folder inside FOLDER and moved into place at the end, events/ last: an
    export that failed leaves nothing (and, with `force`, the earlier export as it was), and
    events/ is there only when all of it is. `force` replaces an earlier export in FOLDER."""
    if (folder / "events").exists() and not force:
        raise InputError(
            f"{folder}: already holds an export (events/); use an empty folder, or --force "
            "to replace it"
        )
    if folder.exists() and not folder.is_dir():
        raise InputError(f"{folder}: not a folder")
    created = [p for p in (folder, *folder.parents) if not p.exists()]  # removed on failure
    try:
        folder.mkdir(parents=True, exist_ok=True)
        stage = Path(folder.resolve(), f".export-{os.getpid()}.partial")
        stage.mkdir()
    except OSError as e:
        raise InputError(
            f"{folder}: cannot write an export there: {e.strerror or e.__class__.__name__}"
        ) from e
    done = False
    try:
        counts = apart(url, _export_store, url, stage)
        for name in PROJECTIONS:
            os.replace(stage / f"{name}.parquet", folder / f"{name}.parquet")
        if (folder / "events").exists():  # --force: the old events go with the stage
            os.replace(folder / "events", stage / "replaced-events")
        os.replace(stage / "events", folder / "events")
        done = True
    except OSError as e:
        raise InputError(
            f"{folder}: cannot write the export: {e.strerror or e.__class__.__name__}"
        ) from e
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(stage)
        if not done:
            with contextlib.suppress(OSError):
                for made in created:
                    made.rmdir()
    return counts


def _export_store(url: str, stage: Path) -> dict[str, int]:
    conn = connect_store(url, sandbox=True, folder=stage)
    try:
        return _export(conn, stage)
    finally:
        conn.close()


def _export(conn: Connection, stage: Path) -> dict[str, int]:
    try:
        conn.con.execute(
            "COPY (SELECT *, strftime(time, '%Y-%m-%d') AS day FROM events) TO "
            f"{sql_literal(str(stage / 'events'))} (FORMAT parquet, PARTITION_BY (day, host))"
        )
        counts = {"events": _count(conn, "events")}
        for name in PROJECTIONS:
            conn.con.execute(
                f"COPY (SELECT * FROM {name}) TO "
                f"{sql_literal(str(stage / f'{name}.parquet'))} (FORMAT parquet)"
            )
            counts[name] = _count(conn, name)
    except (duckdb.IOException, duckdb.PermissionException) as e:
        raise InputError(f"{stage.parent}: cannot write the export: {_first_line(e)}") from e
    except duckdb.Error as e:
        raise StoreError(f"export: DuckDB cannot read the store: {_first_line(e)}") from e
    return counts


def _count(conn: Connection, view: str) -> int:
    row = conn.con.execute(f"SELECT count(*) FROM {view}").fetchone()
    return int(row[0]) if row else 0
