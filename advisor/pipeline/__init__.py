"""The wiring after ingestion: fold, diagnose, plan (and, where allowed, execute) as events
arrive; the watch daemon and auto-remediation loop; file inputs for `classify`.
"""

__all__ = [
    "auto",
    "backends",
    "daemon",
    "inputs",
    "processing",
    "remediate",
    "sdnotify",
    "signals",
    "verify",
]
