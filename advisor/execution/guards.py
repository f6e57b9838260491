"""No action on stale evidence: before a step touches a unit, is the unit still in the state
the plan was made for, and would the step change anything?

`judge` looks at the unit as systemd shows it now and answers `run`, `skip` (nothing to do —
the plan goes on) or `stale` (the unit moved on — the plan stops, a person or `advisor replan`
takes it from there). What "made for" means depends on the step, and each kind's handler
says it (`advisor.execution.handlers`: `kill`, `wait_gpu_free`, `hold_restarts`, `set_flag`,
`set_unit_option`, `stop`…). Common to all:

* every step after the plan's first: the unit as the previous step left it — a start by
  someone else in between (a new invocation) makes the rest stale (`moved`);
* and no step of a plan whose incident is resolved.
"""

from __future__ import annotations

from advisor.core.steps import ActionStep
from advisor.execution.handlers import handler_for
from advisor.execution.handlers.base import RUN, Context, Verdict
from advisor.execution.state import UnitSnapshot

__all__ = [
    "judge",
]


def judge(step: ActionStep, now: UnitSnapshot | None, ctx: Context) -> Verdict:
    handler = handler_for(step.kind)
    if not handler.touches_unit or now is None:
        return RUN
    if not ctx.incident_open:
        return Verdict("stale", "the incident is resolved: a later run came up ready")
    return handler.guard(step, now, ctx)
