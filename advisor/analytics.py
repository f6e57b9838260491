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


def sql_literal(text: str) -> str:
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
            con.execute(f"LOAD {sql_literal(_extension('duckdb_extension_sqlite_scanner'))}")
            con.execute(f"ATTACH {sql_literal(parsed.database)} AS store (TYPE sqlite, READ_ONLY)")
            path = "sqlite scanner"
        else:
            con.execute(f"LOAD {sql_literal(_extension('duckdb_extension_postgres_scanner'))}")
            options = str(parsed.query.get("options", ""))
            schema = re.search(r"search_path(?:=|%3D)([\w$]+)", options)
            dsn = parsed.set(drivername="postgresql", query={}).render_as_string(
                hide_password=False)
            with_schema = f", SCHEMA {sql_literal(schema.group(1))}" if schema else ""
            con.execute(f"ATTACH {sql_literal(dsn)} AS store (TYPE postgres{with_schema}, "
                        "READ_ONLY)")
            path = "postgres scanner"
        con.execute(f"CREATE VIEW events AS {events_select()}")
        for name in PROJECTIONS:
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM store.{name}")
        con.execute(f"CREATE VIEW log_lines AS {_LOG_LINES}")
    except duckdb.Error as e:
        con.close()
        raise StoreError(f"DuckDB cannot read the store: {str(e).splitlines()[0]}") from e
    return Connection(con, path)


def events_select(table: str = "events", extra: str = "") -> str:
    """The `events` view's SELECT over the attached store's `table` (a partition of it, for
    retention), with `extra` columns after the payload."""
    quoted = '"' + table.replace('"', '""') + '"'
    return _EVENTS_SELECT.format(table=quoted, extra=extra)


def connect_parquet(folder: Path) -> Connection:
    """The same views over an export written by `export_parquet`, or over the events that
    `advisor retention` wrote (those have no projection files: only the event views)."""
    if not (folder / "events").is_dir():
        raise InputError(f"{folder}: not a Parquet export (no events/ folder)")
    con = duckdb.connect()
    pattern = sql_literal(str(folder / "events" / "**" / "*.parquet"))
    con.execute("CREATE VIEW events AS SELECT seq, stream, host, type, version, time_us, time, "
                f"recorded_us, source, payload FROM read_parquet({pattern}, "
                "hive_partitioning = true, union_by_name = true)")
    for name in PROJECTIONS:
        if (folder / f"{name}.parquet").is_file():
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM "
                        f"read_parquet({sql_literal(str(folder / f'{name}.parquet'))})")
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
            f"{sql_literal(str(folder / 'events'))} (FORMAT parquet, PARTITION_BY (day, host))")
        counts = {"events": _count(conn, "events")}
        for name in PROJECTIONS:
            conn.con.execute(f"COPY (SELECT * FROM {name}) TO "
                             f"{sql_literal(str(folder / f'{name}.parquet'))} (FORMAT parquet)")
            counts[name] = _count(conn, name)
        return counts
    finally:
        conn.close()


def _count(conn: Connection, view: str) -> int:
    row = conn.con.execute(f"SELECT count(*) FROM {view}").fetchone()
    return int(row[0]) if row else 0


# ------------------------------------------------------------------ stats
_STATS_SQL: Final = {
    "crashes_by_label": """
        SELECT label, count(*) AS incidents, sum(runs) AS failed_runs FROM incidents {where}
        GROUP BY label ORDER BY incidents DESC, label""",
    "crashes_by_service": """
        SELECT host, unit, count(*) AS incidents, sum(runs) AS failed_runs FROM incidents {where}
        GROUP BY host, unit ORDER BY incidents DESC, host, unit""",
    "crashes_by_week": """
        SELECT strftime(make_timestamp(opened_us), '%G-W%V') AS week, count(*) AS incidents
        FROM incidents {where} GROUP BY week ORDER BY week""",
    "time_to_recovery": """
        SELECT count(*) AS resolved, round(avg(resolved_us - opened_us) / 1e6, 1) AS mean_s,
               round(quantile_cont((resolved_us - opened_us) / 1e6, 0.9), 1) AS p90_s
        FROM incidents {where_and} resolved_us IS NOT NULL""",
    "restart_loops": """
        SELECT count(*) AS loops, max(runs) AS longest, round(avg(runs), 1) AS mean_length
        FROM incidents {where_and} runs > 1""",
    "gpu_headroom_by_service": """
        SELECT host, unit, count(*) AS runs,
               round(quantile_cont(1 - peak_gpu_used_bytes::DOUBLE / peak_gpu_total_bytes, 0.1), 3)
                   AS p10,
               round(quantile_cont(1 - peak_gpu_used_bytes::DOUBLE / peak_gpu_total_bytes, 0.5), 3)
                   AS p50
        FROM runs {where_and} peak_gpu_total_bytes > 0 GROUP BY host, unit ORDER BY host, unit""",
    "gpu_release_after_kill": """
        WITH killed AS (
            SELECT run_id, host, started_us, ended_us FROM runs
            {where_and} exit_signal = 'KILL' AND ended_us IS NOT NULL),
        used AS (
            SELECT k.run_id, s.gpu FROM killed k JOIN gpu_samples s
              ON s.host = k.host AND s.time_us BETWEEN k.started_us AND k.ended_us
            GROUP BY k.run_id, s.gpu
            HAVING max(s.used_bytes::DOUBLE / nullif(s.total_bytes, 0)) > 0.10),
        freed AS (
            SELECT k.run_id, k.host, u.gpu, min(s.time_us) - k.ended_us AS dt
            FROM killed k JOIN used u ON u.run_id = k.run_id
            JOIN gpu_samples s ON s.host = k.host AND s.gpu = u.gpu
             AND s.time_us > k.ended_us AND s.time_us <= k.ended_us + 300000000
             AND s.used_bytes::DOUBLE / nullif(s.total_bytes, 0) < 0.05
            GROUP BY k.run_id, k.host, u.gpu, k.ended_us)
        SELECT host, count(*) AS kills, round(quantile_cont(dt / 1e6, 0.5), 1) AS p50_s,
               round(quantile_disc(dt / 1e6, 0.95), 1) AS p95_s
        FROM (SELECT run_id, host, max(dt) AS dt FROM freed GROUP BY run_id, host)
        GROUP BY host ORDER BY host""",
}


def stats(conn: Connection, *, unit: str | None = None, host: str | None = None,
          since_us: int | None = None) -> dict[str, list[dict[str, Any]]]:
    """The fleet's figures, each section a list of rows."""
    conditions = []
    if unit is not None:
        conditions.append(f"unit = {sql_literal(unit)}")
    if host is not None:
        conditions.append(f"host = {sql_literal(host)}")
    out: dict[str, list[dict[str, Any]]] = {}
    for name, sql in _STATS_SQL.items():
        time_column = "opened_us" if "incidents" in sql.split("FROM")[1] else "started_us"
        extra = conditions + ([f"{time_column} >= {int(since_us)}"] if since_us else [])
        where = ("WHERE " + " AND ".join(extra)) if extra else ""
        where_and = ("WHERE " + " AND ".join(extra) + " AND") if extra else "WHERE"
        columns, rows = conn.query(sql.format(where=where, where_and=where_and))
        out[name] = [dict(zip(columns, row, strict=True)) for row in rows]
    return out
