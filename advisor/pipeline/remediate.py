"""A person carrying out an incident's plan: the backend to act through, the plan of a
service's open incident, a dry run's preview, and running it (a new plan proposed when the
unit has moved on). Asking the person is the command line's part."""

from __future__ import annotations

import getpass
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.core.errors import AdvisorError, InputError
from advisor.core.statuses import ActionStatus
from advisor.core.units import parse_service

if TYPE_CHECKING:
    from advisor.execution.backends import Backend
    from advisor.execution.notices import Notices
    from advisor.execution.recovery import Replanned
    from advisor.execution.run import ExecReport
    from advisor.store import EventStore
    from advisor.views.read.rows import ActionRow

# The plan's states after which `remediate` counts as done (a script can tell the rest).
SETTLED = ("done", "waiting")


def human() -> str:
    """Who approves or rejects at this terminal, as the actions record it."""
    try:
        return f"human:{getpass.getuser()}"
    except (KeyError, OSError):
        return "human:unknown"


def backend_for(
    name: str,
    root: Path,
    gpu_twin: Path | None = None,
    host: str | None = None,
    *,
    notices: Notices | None = None,
) -> Backend | None:
    """The backend to act through (`systemd`, its `notify` steps telling `notices`); None
    for a dry run (`dry-run`)."""
    if name == "dry-run":
        return None
    from advisor.pipeline.backend_setup import systemd_backend

    return systemd_backend(root, gpu_twin=gpu_twin, host=host, notices=notices)


def observer(root: Path, gpu_twin: Path | None, host: str | None = None) -> Backend | None:
    """A systemd backend to *read* units with, for a dry run; None if systemd is not there."""
    from advisor.pipeline.backend_setup import systemd_backend

    try:
        backend = systemd_backend(root, gpu_twin=gpu_twin, host=host)
        backend.bus.probe()
    except AdvisorError:
        return None
    return backend


@dataclass
class OpenPlan:
    incident: dict[str, Any]
    plan_id: str
    rows: list[ActionRow]  # its actions, by step


def open_plan(store: EventStore, service: str) -> OpenPlan:
    """The current plan of SERVICE's open incident (UNIT or HOST/UNIT); InputError when the
    service has no open incident or the incident no plan."""
    from advisor.execution.decisions import plan_rows
    from advisor.execution.recovery import current_plan, open_incident

    host, unit = parse_service(service)
    incident = open_incident(store, host, unit)
    plan_id = current_plan(store, incident["incident_id"])
    if plan_id is None:
        raise InputError(f"{service}: the open incident has no plan")
    return OpenPlan(incident, plan_id, plan_rows(store, plan_id))


def preview(
    store: EventStore, plan_id: str, root: Path, gpu_twin: Path | None, host: str | None = None
) -> list[str]:
    """What each step would do now, the unit read from systemd where it is there."""
    from advisor.execution.preview import preview as preview_

    return list(preview_(store, plan_id, observer(root, gpu_twin, host)))


@dataclass
class Outcome:
    report: ExecReport
    again: Replanned | None  # a new plan proposed from the unit's current state

    @property
    def settled(self) -> bool:
        return self.report.state in SETTLED


def carry_out(store: EventStore, backend: Backend, plan_id: str) -> Outcome:
    """Run the plan's approved steps; propose a new plan when the unit moved on meanwhile."""
    from advisor.execution.recovery import recover
    from advisor.execution.run import execute

    report = execute(store, backend, plan_id)
    return Outcome(report, recover(store, backend, report))


def finished(rows: list[ActionRow]) -> bool:
    """The plan will run no further: every step has an outcome, or one failed or went
    stale (a plan stops there)."""
    if any(r.status in (ActionStatus.FAILED, ActionStatus.STALE) for r in rows):
        return True
    return bool(rows) and not any(
        r.status in (ActionStatus.PROPOSED, ActionStatus.APPROVED, ActionStatus.STARTED)
        for r in rows
    )


# How a unit that failed by itself ended (a stop that timed out is the operator's stop).
_CRASHED = frozenset(
    {"exit-code", "signal", "core-dump", "start-limit-hit", "oom-kill", "watchdog"}
)


def failing(backend: Backend, unit: str) -> str | None:
    """The unit's state in words when it is still failing — crashed, waiting to restart,
    or starting again after automatic restarts — else None."""
    now = backend.observe(unit)
    if now is None:
        return None
    if (
        (now.active_state == "failed" and now.result in _CRASHED)
        or now.sub_state == "auto-restart"
        or (now.active_state == "activating" and now.n_restarts > 0)
    ):
        return now.describe()
    return None


def anew(store: EventStore, backend: Backend, service: str) -> tuple[OpenPlan, str | None]:
    """The plan to carry out for SERVICE: its open incident's current plan, or — when that
    plan has finished and the unit is still failing — a new one proposed from the unit's
    current state (with the words saying so)."""
    from advisor.execution.recovery import replan

    plan = open_plan(store, service)
    if not finished(plan.rows):
        return plan, None
    unit = str(plan.incident["unit"])
    why = failing(backend, unit)
    if why is None:
        return plan, None
    host, _ = parse_service(service)
    done = replan(store, backend, host or str(plan.incident["host"]), unit)
    again = open_plan(store, service)
    return again, (
        f"plan {plan.plan_id} has run to its end and {why}: proposed {done.new_plan} from "
        "the unit's current state"
    )
