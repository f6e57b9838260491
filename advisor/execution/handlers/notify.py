"""`notify`: tell a person; nothing on the host is read or changed, so it always runs."""

from __future__ import annotations

from advisor.core.kinds import NOTIFY
from advisor.core.steps import ActionStep
from advisor.execution.handlers.base import RUN, Context, Handler, Verdict
from advisor.execution.primitives import FileChange, Outcome, Primitives
from advisor.execution.state import UnitSnapshot


class Notify(Handler):
    kind = NOTIFY

    def guard(self, step: ActionStep, now: UnitSnapshot, ctx: Context) -> Verdict:
        return RUN

    def perform(
        self, m: Primitives, step: ActionStep, unit: str, change: FileChange | None
    ) -> Outcome:
        return m.notify(step.why)

    def describe(self, step: ActionStep) -> str:
        return f"notify: {step.why}"
