"""`kill`: SIGKILL every process of the unit — the invocation the plan saw wedged, or a
leftover PID of an earlier run.

Made for the wedged invocation: once systemd has ended it (or the unit runs a newer one, a
freshly fixed one say) there is nothing to kill, so the step is skipped, never run. A step for
a leftover PID always runs; the backend kills only while the PID is still the unit's.
"""

from __future__ import annotations

from advisor.core.kinds import KILL
from advisor.core.steps import ActionStep
from advisor.execution.handlers.base import RUN, Context, Handler, Verdict, inv
from advisor.execution.primitives import FileChange, Outcome, Primitives
from advisor.execution.state import UnitSnapshot


class Kill(Handler):
    kind = KILL

    def guard(self, step: ActionStep, now: UnitSnapshot, ctx: Context) -> Verdict:
        if step.pid is not None:
            return RUN  # a leftover process: the backend checks it is still the unit's
        made_for = step.invocation_id
        if made_for and now.invocation_id != made_for:
            if now.invocation_id:
                return Verdict(
                    "skip",
                    f"invocation {inv(made_for)} is over; the unit now runs "
                    f"{inv(now.invocation_id)}, which is not to be killed",
                )
            return Verdict(
                "skip",
                f"invocation {inv(made_for)} is over: systemd ended it (Result={now.result})",
            )
        if not now.running:
            return Verdict("skip", f"no process of the unit is left ({now.describe()})")
        return RUN

    def perform(
        self, m: Primitives, step: ActionStep, unit: str, change: FileChange | None
    ) -> Outcome:
        return m.kill_unit(unit, step.pid)
