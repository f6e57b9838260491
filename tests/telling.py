"""A backend for tests that acts on no unit but tells: a dry run whose `notify` steps are
carried out as every real backend carries them out (`perform_step`, then `notify_outcome` to
the `[notify]` targets), so a test sees the alerts and notices a real run sends."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from advisor.core.steps import ActionStep
from advisor.execution.backends import DryRunBackend
from advisor.execution.handlers import Primitives, perform_step
from advisor.execution.notices import Notices, notify_outcome
from advisor.execution.primitives import Expected, FileChange, Outcome, Subject
from advisor.execution.state import UnitSnapshot


@dataclass
class Telling(DryRunBackend):
    """Acts on no unit; a `notify` step tells `notices` (module docstring)."""

    notices: Notices | None = None

    def notify(self, message: str, subject: Subject | None = None) -> Outcome:
        return notify_outcome(self.notices, message, subject)

    def perform(
        self,
        step: ActionStep,
        before: UnitSnapshot | None,
        change: FileChange | None,
        expect: Sequence[Expected] = (),
        subject: Subject | None = None,
    ) -> Outcome:
        if step.kind == "notify":
            return perform_step(cast(Primitives, self), step, change, expect, subject)
        return super().perform(step, before, change, expect, subject)
