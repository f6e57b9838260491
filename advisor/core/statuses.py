"""The statuses of the `actions` and `incidents` rows, as string enums: the views fold them,
every stage compares with them. A member equals its string (and hashes as it), so the tables,
the JSON and the pages hold the same text as before. No import beyond the standard library:
the command line's help and other light paths may use them.
"""

from __future__ import annotations

from enum import StrEnum


class ActionStatus(StrEnum):
    """What became of a proposed step: the `actions` row's status, moved on by the `action.*`
    events (`advisor.core.actions`)."""

    PROPOSED = "proposed"
    APPROVED = "approved"  # action.approved
    REJECTED = "rejected"  # action.rejected
    STARTED = "started"  # action.started, no outcome yet
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"  # action.skipped: it would change nothing
    STALE = "stale"  # action.skipped with `stale`: the unit moved on, the plan stops
    ROLLED_BACK = "rolled_back"


class IncidentStatus(StrEnum):
    """An `incidents` row's status (stored, shown and compared as its value)."""

    OPEN = "open"  # incident.opened, recurred
    RESOLVED = "resolved"  # incident.resolved: a later run came up ready
    SUPERSEDED = "superseded"  # its run is cut differently now (docs/fold.md)
