"""The fleet page's figures: `advisor stats` (advisor.reports.analytics, DuckDB over the store,
SQLite or the central PostgreSQL alike), each section titled and its columns named and shown
as `advisor stats` shows them (advisor.reports.stats_columns); and the hosts page's rows
(`advisor hosts`, advisor.views.read.hosts)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from advisor.core.timefmt import format_us
from advisor.reports.stats_columns import cell, header, heading, shown_rows

if TYPE_CHECKING:
    from advisor.views.read.hosts import HostHealth

# The sections in the page's order: the trend first, the breakdowns last.
ORDER: Final = (
    "crashes_by_week",
    "time_to_recovery",
    "restart_loops",
    "gpu_headroom_by_service",
    "gpu_release_after_kill",
    "crashes_by_label",
    "crashes_by_service",
)


def stats_report(url: str) -> dict[str, list[dict[str, Any]]]:
    """`advisor stats` over the store at `url`, a section of nothing without rows. DuckDB
    reads a SQLite store in a process of its own, never in the console's, which holds the
    store through sqlite3 (advisor.reports.apart: its locks would be dropped)."""
    from advisor.front import Advisor

    return {name: shown_rows(rows) for name, rows in Advisor(None).stats(url=url).items()}


def figures(report: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The sections in the page's order: title, column names and the rows as shown."""
    out = []
    for name in ORDER:
        rows = report.get(name, [])
        columns = list(rows[0]) if rows else []
        out.append(
            {
                "name": name,
                "title": heading(name),
                "headings": [header(name, c) for c in columns],
                "rows": [[cell(name, c, row[c]) for c in columns] for row in rows],
            }
        )
    return out


def host_rows(hosts: Sequence[HostHealth]) -> list[dict[str, Any]]:
    """Each host as the page shows it: its fields, times and sizes in words."""
    rows = []
    for h in hosts:
        row = h.as_dict()
        row["heartbeat"] = format_us(h.last_heartbeat_us) if h.last_heartbeat_us else "none"
        row["event"] = format_us(h.last_event_us) if h.last_event_us else "none"
        row["lag"] = f"{h.ship_lag_s:.0f} s" if h.ship_lag_s is not None else "-"
        for g in row["gpus"]:
            total = g["memory_total_bytes"]
            g["memory"] = f"{total / 2**30:.1f} GiB" if total is not None else "-"
        rows.append(row)
    return rows
