"""The `advisor` command line: one module per family of commands (`main` is the group)."""

__all__ = [
    "actions",
    "analytics",
    "central",
    "common",
    "demo",
    "diagnose",
    "group",
    "heads",
    "ingest",
    "ingest_report",
    "install",
    "main",
    "progress",
    "projections",
    "remediate",
    "serve",
    "verify",
    "watch",
]
