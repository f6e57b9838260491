"""The fleet figures' sections and columns as people read them (`crashes_by_label` →
"Crashes by failure", `p90_s` → "90th percentile", a share as a percentage, seconds with
their unit), for the HTML page and the text of `advisor stats` alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from advisor.reports.render import safe_text


def _seconds(v: Any) -> str:
    return "—" if v is None else f"{v:g} s"


def _share(v: Any) -> str:
    return "—" if v is None else f"{100 * v:.1f} %"


def plain(v: Any) -> str:
    return "—" if v is None else str(v)


# Section → its heading and, per column, the name people read and how to show a value.
Column = tuple[str, Callable[[Any], str]]
SECTIONS: Final[dict[str, tuple[str, dict[str, Column]]]] = {
    "crashes_by_label": (
        "Crashes by failure",
        {
            "label": ("failure", plain),
            "incidents": ("incidents", plain),
            "failed_runs": ("failed runs", plain),
        },
    ),
    "crashes_by_service": (
        "Crashes by service",
        {
            "host": ("host", plain),
            "unit": ("unit", plain),
            "incidents": ("incidents", plain),
            "failed_runs": ("failed runs", plain),
        },
    ),
    "crashes_by_week": (
        "Crashes per week",
        {"week": ("ISO week", plain), "incidents": ("incidents", plain)},
    ),
    "time_to_recovery": (
        "Time to recovery (incident opened → the service healthy again)",
        {
            "resolved": ("incidents resolved", plain),
            "mean_s": ("mean", _seconds),
            "p90_s": ("90th percentile", _seconds),
        },
    ),
    "restart_loops": (
        "Restart loops (incidents of more than one failed run)",
        {
            "loops": ("loops", plain),
            "longest": ("longest (failed runs)", plain),
            "mean_length": ("mean length (failed runs)", plain),
        },
    ),
    "gpu_headroom_by_service": (
        "GPU memory headroom at each run's peak (share of the GPU left free)",
        {
            "host": ("host", plain),
            "unit": ("unit", plain),
            "runs": ("runs", plain),
            "p10": ("tightest 10 % of runs", _share),
            "p50": ("median run", _share),
        },
    ),
    "gpu_release_after_kill": (
        "GPU memory release after a kill (run killed → its GPUs under 5 % again)",
        {
            "host": ("host", plain),
            "kills": ("kills", plain),
            "measured": ("measured (the run held GPU memory)", plain),
            "p50_s": ("median", _seconds),
            "p95_s": ("95th percentile (what wait_gpu_free waits)", _seconds),
        },
    ),
}


def shown_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A section's rows, none when its one row is all empty (the aggregates of nothing)."""
    return [] if rows and all(v in (None, 0) for v in rows[0].values()) else rows


def heading(section: str) -> str:
    """A section's heading (its name with spaces when it has none)."""
    return SECTIONS.get(section, (section.replace("_", " "), {}))[0]


def header(section: str, key: str) -> str:
    """A column's name as people read it."""
    return SECTIONS.get(section, ("", {}))[1].get(key, (key.replace("_", " "), plain))[0]


def cell(section: str, key: str, value: Any) -> str:
    """A value as shown in its column (seconds, shares, — for none)."""
    return SECTIONS.get(section, ("", {}))[1].get(key, (key, plain))[1](value)


def text_table(section: str, rows: list[dict[str, Any]]) -> list[str]:
    """One section as aligned text: its heading, the column names, a line per row (numbers
    right-aligned); "(none)" without rows. Text from the store is made safe to print."""
    lines = [heading(section)]
    if not rows:
        return [*lines, "  (none)"]
    keys = list(rows[0])
    table = [[header(section, k) for k in keys]]
    table += [[safe_text(cell(section, k, r[k])) for k in keys] for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(keys))]
    numeric = [all(isinstance(r[k], int | float) or r[k] is None for r in rows) for k in keys]
    for row in table:
        cells = (
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(row, widths, numeric, strict=True)
        )
        lines.append("  " + "  ".join(cells).rstrip())
    return lines
