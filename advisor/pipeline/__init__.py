"""The wiring after ingestion: fold, diagnose, plan (and, where allowed, execute) as events
arrive; the watch daemon and auto-remediation loop, what it tells people and the metrics it
serves; file inputs for `classify`.
"""

__all__ = [
    "auto",
    "backend_setup",
    "daemon",
    "heartbeat",
    "inputs",
    "metrics",
    "processing",
    "remediate",
    "sdnotify",
    "signals",
    "telling",
    "verify",
]
