"""`restart`: the plan's hold on restarts ends here, then the unit is restarted and counts
as done when the new invocation says it is ready, within the step's bound — and its engine
received the values the plan set (the executor hands them to the backend's restart)."""

from __future__ import annotations

from advisor.core.kinds import RESTART
from advisor.core.steps import ActionStep
from advisor.execution.handlers.base import Handler
from advisor.execution.primitives import FileChange, Outcome, Primitives


class Restart(Handler):
    kind = RESTART

    def perform(
        self, m: Primitives, step: ActionStep, unit: str, change: FileChange | None
    ) -> Outcome:
        lifted = m.lift_hold(unit)
        done = m.restart_unit(unit, step.seconds)
        if lifted is None:
            return done
        return Outcome(f"{lifted}; {done.detail}", done.after)
