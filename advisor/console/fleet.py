"""The fleet page's figures: `advisor stats` (advisor.reports.analytics, DuckDB over the store,
SQLite or the central PostgreSQL alike), with the weekly trend scaled for its bars and the
columns named as people read them."""

from __future__ import annotations

from typing import Any, Final

# Each section's columns as the page names them (a column not here is shown as it is).
HEADINGS: Final = {
    "host": "host",
    "unit": "unit",
    "label": "label",
    "week": "week",
    "incidents": "incidents",
    "failed_runs": "failed runs",
    "resolved": "incidents resolved",
    "mean_s": "mean (s)",
    "p90_s": "90th percentile (s)",
    "loops": "restart loops",
    "longest": "longest (runs)",
    "mean_length": "mean length (runs)",
    "runs": "runs measured",
    "p10": "free GPU memory at peak, 10th percentile",
    "p50": "free GPU memory at peak, median",
    "kills": "kills measured",
    "p50_s": "median (s)",
    "p95_s": "95th percentile (s)",
}
PERCENT: Final = ("p10", "p50")  # fractions of a GPU's memory, shown as percentages
TITLES: Final = {
    "crashes_by_week": "Crashes per week",
    "time_to_recovery": "Time to recovery",
    "restart_loops": "Restart loops",
    "gpu_headroom_by_service": "GPU headroom per host and service",
    "gpu_release_after_kill": "GPU memory release after a kill, per host",
    "crashes_by_label": "Crashes by label",
    "crashes_by_service": "Crashes by service",
}


def _shown(column: str, value: Any) -> Any:
    if column in PERCENT and isinstance(value, int | float):
        return f"{value * 100:.1f} %"
    return value


def stats_report(url: str) -> dict[str, list[dict[str, Any]]]:
    """`advisor stats` over the store at `url`; a section whose one row is all empty (the
    aggregates of nothing) has no rows."""
    from advisor.reports.analytics import connect_store, stats

    conn = connect_store(url, sandbox=True)
    try:
        report = stats(conn)
    finally:
        conn.close()
    return {
        name: [] if rows and all(v in (None, 0) for v in rows[0].values()) else rows
        for name, rows in report.items()
    }


def figures(report: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The sections in the page's order: title, column headings, rows, and for the weekly
    trend each week's share of the busiest."""
    out = []
    for name, title in TITLES.items():
        rows = report.get(name, [])
        columns = list(rows[0]) if rows else []
        section: dict[str, Any] = {
            "name": name,
            "title": title,
            "headings": [HEADINGS.get(c, c) for c in columns],
            "rows": [[_shown(c, row[c]) for c in columns] for row in rows],
        }
        if name == "crashes_by_week" and rows:
            top = max(int(r["incidents"]) for r in rows) or 1
            section["bars"] = [
                (r["week"], int(r["incidents"]), int(r["incidents"]) / top) for r in rows
            ]
        out.append(section)
    return out
