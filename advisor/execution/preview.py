"""A plan's dry run: what the executor would do now, step by step — without doing it and
without recording anything, so the plan is still there to approve and run afterwards.

With a backend that can read the unit (systemd), each step is judged on the unit's real state
the way the executor would judge it (run / skip / stale); without one, the steps are listed.
"""

from __future__ import annotations

from advisor.core.errors import AdvisorError
from advisor.core.statuses import ActionStatus
from advisor.execution.backends import Backend
from advisor.execution.decisions import plan_rows, step_of
from advisor.execution.guards import judge
from advisor.execution.handlers import handler_for
from advisor.execution.handlers.base import Context
from advisor.store import EventStore

_DONE = (ActionStatus.SUCCEEDED, ActionStatus.ROLLED_BACK, ActionStatus.SKIPPED)


def preview(store: EventStore, plan_id: str, observer: Backend | None = None) -> list[str]:
    """One line per step of the plan, saying what would happen to it now."""
    lines = []
    stopped = False
    for row in plan_rows(store, plan_id):
        step = step_of(row)
        handler = handler_for(step.kind)
        label = f"step {row.step} ({handler.describe(step)})"
        status = row.status
        if status in _DONE:
            lines.append(f"{label}: already {status}")
            continue
        if row.alternative and status != ActionStatus.APPROVED:
            lines.append(f"{label}: an alternative, not chosen")
            continue
        if stopped or status in (
            ActionStatus.REJECTED,
            ActionStatus.FAILED,
            ActionStatus.STALE,
            ActionStatus.STARTED,
        ):
            why = "the plan stops before it" if stopped else status
            lines.append(f"{label}: would not run ({why})")
            stopped = True
            continue
        verdict = "would run"
        if observer is not None and step.unit is not None and handler.touches_unit:
            try:
                judged = judge(step, observer.observe(step.unit), Context())
            except AdvisorError as e:
                judged = None
                verdict = f"cannot read the unit: {e}"
            if judged is not None and judged.action != "run":
                verdict = (
                    f"would be skipped{' as stale' if judged.action == 'stale' else ''}: "
                    f"{judged.why}"
                )
                stopped = judged.action == "stale"
        if status == ActionStatus.PROPOSED:
            verdict += " once approved"
        lines.append(f"{label}: {verdict}")
    return lines
