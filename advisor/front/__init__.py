"""The front door: `Advisor(store, settings)`, one method per operation people use —
classify, explain, plan and replan, decide, run, ship, watch, and the rest the command line
and the console need. The command line (advisor.cli) and the console (advisor.console) go
through it; it delegates to the stages below it (docs/api.md). Importing it imports nothing
heavy: each method imports what it delegates to when it is called."""

from advisor.front.advisor import Advisor
from advisor.front.base import open_store
from advisor.front.fleet import Watch

__all__ = [
    "Advisor",
    "Watch",
    "acting",
    "advisor",
    "base",
    "diagnosing",
    "fleet",
    "ingesting",
    "integrity",
    "open_store",
    "reading",
]
