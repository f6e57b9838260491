"""What people read: the post-mortem (`explain`), its HTML page, the `classify --json`
contract, and DuckDB analytics over the store.
"""

__all__ = [
    "analytics",
    "apart",
    "chart_base",
    "charts",
    "contract",
    "html",
    "incident_charts",
    "postmortem",
    "sandbox",
    "stats_charts",
    "stats_columns",
    "stats_sql",
    "timeline",
    "writeup",
]
