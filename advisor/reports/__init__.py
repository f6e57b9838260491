"""What people read: the post-mortem (`explain`), its HTML page, the `classify --json`
contract, DuckDB analytics over the store, and events and text made safe for a terminal or a
script (`render`).
"""

__all__ = [
    "analytics",
    "chart_base",
    "charts",
    "contract",
    "html",
    "incident_charts",
    "keptlines",
    "postmortem",
    "render",
    "sandbox",
    "stats",
    "stats_charts",
    "stats_columns",
    "writeup",
]
