"""`wait_gpu_free`: poll the GPUs until the stopped unit's memory is back (free and stable),
within the step's bound. Skipped when the unit runs again: no memory to wait for."""

from __future__ import annotations

from advisor.core.kinds import WAIT_GPU_FREE
from advisor.core.steps import ActionStep
from advisor.execution.handlers.base import RUN, Context, Handler, Verdict, moved
from advisor.execution.primitives import FileChange, Outcome, Primitives
from advisor.execution.state import UnitSnapshot

DEFAULT_WAIT_S = 30.0


class WaitGpuFree(Handler):
    kind = WAIT_GPU_FREE

    def guard(self, step: ActionStep, now: UnitSnapshot, ctx: Context) -> Verdict:
        if now.running:
            return Verdict("skip", f"the unit runs again ({now.describe()}): no memory to wait for")
        return moved(now, ctx) or RUN

    def perform(
        self, m: Primitives, step: ActionStep, unit: str, change: FileChange | None
    ) -> Outcome:
        return m.wait_gpu_free(unit, step.gpus, float(step.seconds or DEFAULT_WAIT_S))

    def describe(self, step: ActionStep) -> str:
        return (
            f"wait up to {step.seconds or DEFAULT_WAIT_S:.0f} s for "
            f"{step.unit or 'this host'}'s GPU memory"
        )
