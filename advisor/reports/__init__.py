"""What people read: the post-mortem (`explain`), its HTML page, the `classify --json`
contract, and DuckDB analytics over the store.
"""

__all__ = ["analytics", "contract", "html", "postmortem", "sandbox", "stats_sql", "writeup"]
