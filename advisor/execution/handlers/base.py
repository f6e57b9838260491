"""What a handler is, and the verdicts its guard gives.

A handler holds everything one action kind needs: its guard (is the unit still what the plan
was made for, and would the step change anything?), its prepare (the file change, if any, so
the executor can record it before acting), its perform (in terms of the backend's
primitives, `advisor.execution.primitives`), the read-back of what it changed, and its
description.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Literal

from advisor.core.kinds import KINDS, ActionKind
from advisor.core.steps import ActionStep
from advisor.execution.primitives import FileChange, Outcome, Primitives
from advisor.execution.state import UnitSnapshot


@dataclass(frozen=True)
class Verdict:
    action: Literal["run", "skip", "stale"]
    why: str = ""


RUN = Verdict("run")


@dataclass(frozen=True)
class Context:
    """What the store knows that a step is judged against."""

    incident_open: bool = True
    previous_after: Mapping[str, object] | None = None  # the unit after the plan's last step
    previous_step: int | None = None
    ready_invocations: frozenset[str] = frozenset()  # the unit's current one, if it came up ready


def inv(value: object) -> str:
    """An invocation id, short."""
    return str(value)[:12] if value else "none"


def moved(now: UnitSnapshot, ctx: Context) -> Verdict | None:
    """Stale if someone started the unit since the plan's previous step."""
    before = ctx.previous_after
    if before is None:
        return None
    if now.invocation_id and now.invocation_id != before.get("invocation_id"):
        return Verdict(
            "stale",
            f"the unit was started again after step {ctx.previous_step} "
            f"(invocation {inv(before.get('invocation_id'))} → "
            f"{inv(now.invocation_id)}): the plan no longer fits",
        )
    return None


class Handler:
    """One action kind. The defaults: the step acts on a unit, runs unless the unit was
    started again since the plan's previous step, and changes no file."""

    kind: ClassVar[ActionKind]

    @property
    def touches_unit(self) -> bool:
        """Whether the kind acts on a unit (the registry's `on_unit`); when not, nothing on
        the host is read or changed, and `unit` below is the step's unit, or ""."""
        return KINDS[self.kind].on_unit

    def guard(self, step: ActionStep, now: UnitSnapshot, ctx: Context) -> Verdict:
        """Run, skip or stale, on the unit as it is now (the incident is still open)."""
        return moved(now, ctx) or RUN

    def prepare(
        self, m: Primitives, step: ActionStep, unit: str, before: UnitSnapshot | None
    ) -> FileChange | None:
        """The file the step will write; nothing is done here."""
        return None

    def perform(
        self, m: Primitives, step: ActionStep, unit: str, change: FileChange | None
    ) -> Outcome:
        raise NotImplementedError

    def describe(self, step: ActionStep) -> str:
        """What the step does, in a few words."""
        return f"{step.kind.replace('_', '-')} {step.unit or 'this host'}"
