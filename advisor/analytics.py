"""SQL over the history with DuckDB, through stable views; DuckDB is never a second source of
truth: it reads the store in place (SQLite or PostgreSQL, through the scanner extensions that
ship as Python packages pinned to DuckDB's version), or a Parquet export of it.

Views: `events`, `log_lines`, `gpu_samples`, `runs`, `incidents`, `actions`.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import duckdb

from advisor.errors import InputError, StoreError
from advisor.store.engine import parse_url

PROJECTIONS: Final = ("runs", "incidents", "actions", "gpu_samples")
VIEWS: Final = ("events", "log_lines", "gpu_samples", "runs", "incidents", "actions")

_EVENTS_SELECT: Final = """
    SELECT e.seq, e.stream, split_part(e.stream, '/', 1) AS host, e.type,
           e.schema_version AS version, e.event_time_us AS time_us,
           make_timestamp(e.event_time_us) AS time, e.recorded_time_us AS recorded_us,
           s.name AS source, e.payload
    FROM {src}.events e JOIN {src}.sources s ON s.id = e.source_id"""
_LOG_LINES: Final = """
    SELECT seq, stream, host, time_us, time,
           json_extract_string(payload, '$.unit') AS unit,
           json_extract_string(payload, '$.message') AS message,
           CAST(json_extract(payload, '$.priority') AS INTEGER) AS priority,
           json_extract_string(payload, '$.invocation_id') AS invocation_id,
           json_extract_string(payload, '$.origin') AS origin
    FROM events WHERE type = 'log.recorded'"""


@dataclass
class Connection:
    con: duckdb.DuckDBPyConnection
    path: str        # how the views read: "sqlite scanner", "postgres scanner", "parquet"

    def query(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        try:
            cursor = self.con.execute(sql)
        except duckdb.Error as e:
            raise InputError(f"query: {str(e).splitlines()[0]}") from e
        columns = [d[0] for d in cursor.description or ()]
        return columns, cursor.fetchall()

    def close(self) -> None:
        self.con.close()


def _literal(text: str) -> str:
    """A SQL string literal (ATTACH, COPY and read_parquet take no parameters here)."""
    if "\0" in text:
        raise InputError("a path or connection string with a NUL character")
    return "'" + text.replace("'", "''") + "'"


def _extension(package: str) -> str:
    module = importlib.import_module(package)
    found = sorted(Path(module.__file__ or "").parent.rglob("*.duckdb_extension"))
    if not found:
        raise StoreError(f"{package} has no DuckDB extension file")
    return str(found[-1])


def connect_store(url: str) -> Connection:
    """DuckDB attached read-only to the store at `url`, with the views."""
    parsed = parse_url(url)
    con = duckdb.connect()
    try:
        if parsed.get_backend_name() == "sqlite":
            if not parsed.database or parsed.database == ":memory:":
                raise InputError("query needs a store in a file, not an in-memory one")
            con.execute(f"LOAD {_literal(_extension('duckdb_extension_sqlite_scanner'))}")
            con.execute(f"ATTACH {_literal(parsed.database)} AS store (TYPE sqlite, READ_ONLY)")
            path = "sqlite scanner"
        else:
            con.execute(f"LOAD {_literal(_extension('duckdb_extension_postgres_scanner'))}")
            options = str(parsed.query.get("options", ""))
            schema = re.search(r"search_path(?:=|%3D)([\w$]+)", options)
            dsn = parsed.set(drivername="postgresql", query={}).render_as_string(
                hide_password=False)
            with_schema = f", SCHEMA {_literal(schema.group(1))}" if schema else ""
            con.execute(f"ATTACH {_literal(dsn)} AS store (TYPE postgres{with_schema}, "
                        "READ_ONLY)")
            path = "postgres scanner"
        con.execute(f"CREATE VIEW events AS {_EVENTS_SELECT.format(src='store')}")
        for name in PROJECTIONS:
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM store.{name}")
        con.execute(f"CREATE VIEW log_lines AS {_LOG_LINES}")
    except duckdb.Error as e:
        con.close()
        raise StoreError(f"DuckDB cannot read the store: {str(e).splitlines()[0]}") from e
    return Connection(con, path)


def connect_parquet(folder: Path) -> Connection:
    """The same views over an export written by `export_parquet`."""
    if not (folder / "events").is_dir():
        raise InputError(f"{folder}: not a Parquet export (no events/ folder)")
    con = duckdb.connect()
    pattern = _literal(str(folder / "events" / "**" / "*.parquet"))
    con.execute("CREATE VIEW events AS SELECT seq, stream, host, type, version, time_us, time, "
                f"recorded_us, source, payload FROM read_parquet({pattern}, "
                "hive_partitioning = true)")
    for name in PROJECTIONS:
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM "
                    f"read_parquet({_literal(str(folder / f'{name}.parquet'))})")
    con.execute(f"CREATE VIEW log_lines AS {_LOG_LINES}")
    return Connection(con, "parquet")


def export_parquet(url: str, folder: Path) -> dict[str, int]:
    """Events partitioned by day and host, and each projection table, as Parquet."""
    conn = connect_store(url)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if (folder / "events").exists():
            raise InputError(f"{folder}: already holds an export (events/); use an empty folder")
        conn.con.execute(
            "COPY (SELECT *, strftime(time, '%Y-%m-%d') AS day FROM events) TO "
            f"{_literal(str(folder / 'events'))} (FORMAT parquet, PARTITION_BY (day, host))")
        counts = {"events": _count(conn, "events")}
        for name in PROJECTIONS:
            conn.con.execute(f"COPY (SELECT * FROM {name}) TO "
                             f"{_literal(str(folder / f'{name}.parquet'))} (FORMAT parquet)")
            counts[name] = _count(conn, name)
        return counts
    finally:
        conn.close()


def _count(conn: Connection, view: str) -> int:
    row = conn.con.execute(f"SELECT count(*) FROM {view}").fetchone()
    return int(row[0]) if row else 0
