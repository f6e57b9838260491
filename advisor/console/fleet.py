"""The fleet page's figures: `advisor stats` (advisor.reports.analytics, DuckDB over the store,
SQLite or the central PostgreSQL alike), each section titled and its columns named and shown
as `advisor stats` shows them (advisor.reports.stats_columns)."""

from __future__ import annotations

from typing import Any, Final

from advisor.reports.stats_columns import cell, header, heading, shown_rows

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
