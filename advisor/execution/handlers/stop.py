"""`stop`: stop the unit, watched until no process of it is left. Skipped when it is not
running."""

from __future__ import annotations

from advisor.core.kinds import STOP
from advisor.core.steps import ActionStep
from advisor.execution.handlers.base import RUN, Context, Handler, Verdict
from advisor.execution.primitives import FileChange, Outcome, Primitives
from advisor.execution.state import UnitSnapshot


class Stop(Handler):
    kind = STOP

    def guard(self, step: ActionStep, now: UnitSnapshot, ctx: Context) -> Verdict:
        if not now.running:
            return Verdict("skip", f"already stopped ({now.describe()})")
        return RUN

    def perform(
        self, m: Primitives, step: ActionStep, unit: str, change: FileChange | None
    ) -> Outcome:
        return m.stop_unit(unit)
