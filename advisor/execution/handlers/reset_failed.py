"""`reset_failed`: clear the unit's failed state and start limit, so a restart may start."""

from __future__ import annotations

from advisor.core.kinds import RESET_FAILED
from advisor.core.steps import ActionStep
from advisor.execution.handlers.base import Handler
from advisor.execution.primitives import FileChange, Outcome, Primitives


class ResetFailed(Handler):
    kind = RESET_FAILED

    def perform(
        self, m: Primitives, step: ActionStep, unit: str, change: FileChange | None
    ) -> Outcome:
        return m.reset_failed(unit)
