"""No action on stale evidence: before a step touches a unit, is the unit still in the state
the plan was made for, and would the step change anything?

`judge` looks at the unit as systemd shows it now and answers `run`, `skip` (nothing to do —
the plan goes on) or `stale` (the unit moved on — the plan stops, a person or `advisor replan`
takes it from there). What "made for" means depends on the step:

* `kill`: the invocation the plan saw wedged. Once systemd has ended it (or the unit runs a
  newer invocation, a freshly fixed one say) there is nothing to kill: skipped, never run.
* `wait_gpu_free`: a stopped unit. If the unit runs again there is nothing to wait for.
* `hold_restarts`: the failing unit. Stale when the unit's current invocation came up ready
  since (someone fixed it); skipped when the hold is in place and the unit stopped.
* `set_flag`: the command the log showed. Skipped when the flag already has the value; stale
  when it has another value than the plan was made for (someone changed it).
* `set_unit_option`: only a change that changes something (a shorter TimeoutStopSec= than
  the unit's real one, another KillMode=…); otherwise skipped.
* every step after the plan's first: the unit as the previous step left it — a start by
  someone else in between (a new invocation) makes the rest stale.
* and no step of a plan whose incident is resolved.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from advisor.core.events import ActionStep
from advisor.execution.dropins import flag_value
from advisor.execution.state import INFINITY_US, UnitSnapshot
from advisor.planning.bounds import timeout_seconds


@dataclass(frozen=True)
class Verdict:
    action: Literal["run", "skip", "stale"]
    why: str = ""


RUN = Verdict("run")


@dataclass(frozen=True)
class Context:
    """What the store knows that a step is judged against."""

    incident_open: bool = True
    previous_after: Mapping[str, object] | None = None   # the unit after the plan's last step
    previous_step: int | None = None
    ready_invocations: frozenset[str] = frozenset()      # this unit's runs that came up ready


def _inv(value: object) -> str:
    return str(value)[:12] if value else "none"


def judge(step: ActionStep, now: UnitSnapshot | None, ctx: Context) -> Verdict:
    if step.kind == "notify" or now is None:
        return RUN
    if not ctx.incident_open:
        return Verdict("stale", "the incident is resolved: a later run came up ready")
    moved = _moved(now, ctx)
    kind = step.kind
    if kind == "kill":
        return _kill(step, now)
    if kind == "wait_gpu_free":
        if now.running:
            return Verdict("skip", f"the unit runs again ({now.describe()}): no memory to "
                                   "wait for")
        return moved or RUN
    if kind == "hold_restarts":
        if now.invocation_id and now.invocation_id in ctx.ready_invocations:
            return Verdict("stale", f"invocation {_inv(now.invocation_id)} came up ready "
                                    "after the plan was made")
        if now.held and now.stopped:
            return Verdict("skip", f"already held and stopped ({now.describe()})")
        return moved or RUN
    if kind == "set_flag":
        return moved or _set_flag(step, now)
    if kind == "set_unit_option":
        return _option(step, now)
    if kind in ("restart", "reset_failed"):
        return moved or RUN
    if kind == "stop":
        if not now.running:
            return Verdict("skip", f"already stopped ({now.describe()})")
        return RUN
    return RUN


def _moved(now: UnitSnapshot, ctx: Context) -> Verdict | None:
    """Stale if someone started the unit since the plan's previous step."""
    before = ctx.previous_after
    if before is None:
        return None
    if now.invocation_id and now.invocation_id != before.get("invocation_id"):
        return Verdict("stale", f"the unit was started again after step {ctx.previous_step} "
                                f"(invocation {_inv(before.get('invocation_id'))} → "
                                f"{_inv(now.invocation_id)}): the plan no longer fits")
    return None


def _kill(step: ActionStep, now: UnitSnapshot) -> Verdict:
    if step.pid is not None:
        return RUN   # a leftover process: the backend checks it is still the unit's
    made_for = step.invocation_id
    if made_for and now.invocation_id != made_for:
        if now.invocation_id:
            return Verdict("skip", f"invocation {_inv(made_for)} is over; the unit now runs "
                                   f"{_inv(now.invocation_id)}, which is not to be killed")
        return Verdict("skip", f"invocation {_inv(made_for)} is over: systemd ended it "
                               f"(Result={now.result})")
    if not now.running:
        return Verdict("skip", f"no process of the unit is left ({now.describe()})")
    return RUN


def _set_flag(step: ActionStep, now: UnitSnapshot) -> Verdict:
    if len(now.exec_start) != 1 or step.flag is None:
        return RUN   # the backend refuses these with the reason
    current = flag_value(now.exec_start[0].argv, step.flag)
    if current == str(step.value):
        return Verdict("skip", f"{step.flag} is already {step.value}")
    if step.from_value is not None and current is not None and current != str(step.from_value):
        return Verdict("stale", f"{step.flag} is now {current}; the plan was made for "
                                f"{step.from_value}")
    return RUN


def _option(step: ActionStep, now: UnitSnapshot) -> Verdict:
    value = str(step.value)
    if step.option == "TimeoutStopSec":
        wanted = timeout_seconds(value)
        real = now.timeout_stop_s
        if wanted is not None and real is not None and real <= wanted:
            return Verdict("skip", f"TimeoutStopSec is already {real:g} s, no longer than "
                                   f"{value}")
        if wanted is None and now.timeout_stop_us >= INFINITY_US:
            return Verdict("skip", "TimeoutStopSec is already infinity")
    elif step.option == "KillMode" and now.kill_mode == value:
        return Verdict("skip", f"KillMode is already {value}")
    elif step.option == "Restart" and now.restart == value:
        return Verdict("skip", f"Restart is already {value}")
    return RUN
