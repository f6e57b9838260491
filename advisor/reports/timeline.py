"""The post-mortem's timeline entries, typed: what `postmortem` puts in a report's `timeline`
and `incident_charts` draws, by kind (a run's phase, a lifecycle step of a run, a decided step
of the plan), never by the words the text prints for it.

The words (`TimelineEntry.what`) and the JSON form (`TimelineEntry.as_json`) are what the
post-mortem printed as plain strings before: the text, Markdown, JSON and HTML are unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from advisor.core.statuses import ActionStatus
from advisor.core.timefmt import format_us

# The lifecycle steps (`facts.event` of a parsed line) a timeline shows, with their words.
LIFECYCLE_WORDS: Final = {
    "start": "start requested",
    "started": "started",
    "stop_requested": "stop requested",
    "stop_timeout": "stop timed out: SIGKILL",
    "exit": "main process exited",
    "failed": "failed",
    "restart_scheduled": "restart scheduled",
    "deactivated": "stopped cleanly",
    "still_around": "processes survived SIGKILL",
}
# The lifecycle steps that end the phase a run was in, that are failures, that are healthy.
PHASE_ENDS: Final = frozenset({"exit", "failed", "stop_timeout", "deactivated", "started"})
FAILURE_STEPS: Final = frozenset({"failed", "stop_timeout"})
HEALTHY_STEPS: Final = frozenset({"started", "deactivated"})


class TimelineKind(StrEnum):
    PHASE = "phase"  # a run entered a phase: `name` is the phase
    LIFECYCLE = "lifecycle"  # a lifecycle step of a run: `name` is a key of `LIFECYCLE_WORDS`
    ACTION = "action"  # a step of the plan was decided or carried out: `name` is its kind
    GPU_FAULT = "gpu_fault"  # a GPU fault linked to the incident: `name` says which and where


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    """One entry of the timeline: when, of which run (None for an action), what kind, and
    its name; `status` is an action's."""

    kind: TimelineKind
    time_us: int
    run: str | None
    name: str
    status: ActionStatus | None = None

    @property
    def what(self) -> str:
        """The words the post-mortem prints for it."""
        if self.kind is TimelineKind.PHASE:
            return f"phase {self.name}"
        if self.kind is TimelineKind.LIFECYCLE:
            return LIFECYCLE_WORDS[self.name]
        if self.kind is TimelineKind.GPU_FAULT:
            return f"GPU fault: {self.name}"
        return f"action {self.name} {self.status}"

    @property
    def time(self) -> str:
        """Its time as printed: ISO 8601 UTC to the millisecond."""
        return format_us(self.time_us)

    @property
    def failure(self) -> bool:
        """A lifecycle step that is a failure (a failed run, a stop that timed out), or a GPU
        fault."""
        if self.kind is TimelineKind.GPU_FAULT:
            return True
        return self.kind is TimelineKind.LIFECYCLE and self.name in FAILURE_STEPS

    def as_json(self) -> dict[str, Any]:
        """The entry in the report's JSON: {time, what, run}."""
        return {"time": self.time, "what": self.what, "run": self.run}


def phase(time_us: int, run: str | None, name: str) -> TimelineEntry:
    return TimelineEntry(TimelineKind.PHASE, time_us, run, name)


def lifecycle(time_us: int, run: str | None, step: str) -> TimelineEntry:
    return TimelineEntry(TimelineKind.LIFECYCLE, time_us, run, step)


def action(time_us: int, kind: str, status: ActionStatus) -> TimelineEntry:
    return TimelineEntry(TimelineKind.ACTION, time_us, None, kind, status)


def gpu_fault(time_us: int, name: str) -> TimelineEntry:
    return TimelineEntry(TimelineKind.GPU_FAULT, time_us, None, name)
