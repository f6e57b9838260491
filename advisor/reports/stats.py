"""`advisor stats`: its sections (advisor.reports.stats_sql) run over DuckDB attached to a
store (or a Parquet export). Each projection the sections read is read from the store once,
into DuckDB; the GPU samples only around each host's killed runs, one filter a host, which
DuckDB hands the store and its index answers (not every sample of the fleet)."""

from __future__ import annotations

from typing import Any

from advisor.core.release import HORIZON_US
from advisor.reports.analytics import Connection, connect_store
from advisor.reports.apart import apart
from advisor.reports.sandbox import sql_literal
from advisor.reports.stats_sql import KILL_WINDOWS, RELEASE, STATS_COLUMNS, STATS_SQL


def store_stats(
    url: str,
    *,
    unit: str | None = None,
    host: str | None = None,
    since_us: int | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """`stats` over the store at `url`; for SQLite, in a process of its own (`apart`)."""
    return apart(url, _store_stats, url, unit, host, since_us)


def _store_stats(
    url: str, unit: str | None, host: str | None, since_us: int | None
) -> dict[str, list[dict[str, Any]]]:
    conn = connect_store(url, sandbox=True)
    try:
        return stats(conn, unit=unit, host=host, since_us=since_us)
    finally:
        conn.close()


def stats(
    conn: Connection,
    *,
    unit: str | None = None,
    host: str | None = None,
    since_us: int | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """The fleet's figures, each section a list of rows."""
    conditions = []
    if unit is not None:
        conditions.append(f"unit = {sql_literal(unit)}")
    if host is not None:
        conditions.append(f"host = {sql_literal(host)}")
    out: dict[str, list[dict[str, Any]]] = {}
    # each projection read once (a temporary table of the same name hides the view)
    (database,) = conn.con.execute("SELECT current_database()").fetchone() or ("memory",)
    for table, columns in STATS_COLUMNS.items():
        conn.con.execute(
            f"CREATE OR REPLACE TEMP TABLE {table} AS SELECT {columns} "
            f'FROM "{database}".main.{table}'
        )

    def rows(sql: str, samples: str = "gpu_samples") -> list[dict[str, Any]]:
        time_column = "opened_us" if "incidents" in sql.split("FROM")[1] else "started_us"
        extra = conditions + ([f"{time_column} >= {int(since_us)}"] if since_us else [])
        if time_column == "opened_us":  # an id named on partial data is no incident
            extra.append("status <> 'superseded'")
        where = ("WHERE " + " AND ".join(extra)) if extra else ""
        where_and = ("WHERE " + " AND ".join(extra) + " AND") if extra else "WHERE"
        columns, found = conn.query(sql.format(where=where, where_and=where_and, samples=samples))
        return [dict(zip(columns, row, strict=True)) for row in found]

    for name, sql in STATS_SQL.items():
        if name != RELEASE:
            out[name] = rows(sql)
            continue
        # the samples around each host's kills only (the module's text)
        windows = rows(KILL_WINDOWS)
        samples = " UNION ALL ".join(
            f"SELECT * FROM gpu_samples WHERE host = {sql_literal(str(w['host']))} "
            f"AND time_us BETWEEN {int(w['lo'])} AND {int(w['hi']) + HORIZON_US}"
            for w in windows
        )
        out[name] = rows(sql, f"({samples})") if windows else []
    return out
