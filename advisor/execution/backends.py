"""Where actions take effect, behind one small interface: `observe` a unit, `prepare` the file a
step will write (nothing done yet, so the executor can record it first), `perform` the step,
`restore` a file a step changed. The systemd backend (`advisor.execution.systemd`) talks to
systemd's D-Bus API; the sim backend (`advisor.sim.backend`) drives the simulated node;
`DryRunBackend` does nothing and says what it would do.

A backend carries out a step through the step's handler (`advisor.execution.handlers`), which
composes the backend's primitives (`advisor.execution.primitives`). Every backend checks the
values again before it acts (`dropins.check_flag` / `check_option`, `advisor.planning.bounds`),
because a backend is the last place before the operating system.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from advisor.core.steps import ActionStep
from advisor.execution.handlers import handler_for
from advisor.execution.primitives import (
    Expected,
    FileChange,
    Outcome,
    Subject,
    unit_of,
)
from advisor.execution.state import UnitSnapshot
from advisor.planning.bounds import check_step

__all__ = [
    "Backend",
    "DryRunBackend",
]


class Backend(Protocol):
    name: str

    @property
    def host(self) -> str | None:
        """The host whose plans this backend may carry out (None: any, it changes nothing)."""

    def observe(self, unit: str) -> UnitSnapshot | None: ...
    def prepare(self, step: ActionStep, before: UnitSnapshot | None) -> FileChange | None: ...
    def perform(
        self,
        step: ActionStep,
        before: UnitSnapshot | None,
        change: FileChange | None,
        expect: Sequence[Expected] = (),
        subject: Subject | None = None,
    ) -> Outcome: ...
    def restore(self, change: FileChange) -> Outcome: ...
    def release_hold(self, unit: str) -> str | None: ...


@dataclass
class DryRunBackend:
    """Does nothing, records what it would have done: tests, and previews."""

    done: list[str] = field(default_factory=list)
    name: str = "dry-run"
    host: str | None = None

    def observe(self, unit: str) -> UnitSnapshot | None:
        return None

    def release_hold(self, unit: str) -> str | None:
        return None

    def prepare(self, step: ActionStep, before: UnitSnapshot | None) -> FileChange | None:
        check_step(step)
        return None

    def perform(
        self,
        step: ActionStep,
        before: UnitSnapshot | None,
        change: FileChange | None,
        expect: Sequence[Expected] = (),
        subject: Subject | None = None,
    ) -> Outcome:
        handler = handler_for(step.kind)
        if handler.touches_unit:
            unit_of(step)
        what = handler.describe(step)
        self.done.append(what)
        return Outcome(f"dry run: would {what}")

    def restore(self, change: FileChange) -> Outcome:
        self.done.append(f"restore {change.path}")
        return Outcome(f"dry run: would restore {change.path}")
