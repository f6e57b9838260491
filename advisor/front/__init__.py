"""The front door: `Advisor(store, settings)`, one method per operation people use —
classify, explain, plan and replan, decide, run, ship, watch, and the rest the command line
and the console need. The command line (advisor.cli) and the console (advisor.console) go
through it; it delegates to the stages below it (docs/api.md). Importing it imports nothing
heavy: each method imports what it delegates to when it is called."""

from advisor.front.advisor import Advisor
from advisor.front.base import backend_for, human, open_store, store_failure
from advisor.front.fleet import Watch, metrics_registry

__all__ = [
    "Advisor",
    "Watch",
    "backend_for",
    "human",
    "ingesting",
    "metrics_registry",
    "open_store",
    "store_failure",
]
