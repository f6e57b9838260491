"""`advisor replan SERVICE`: after a plan stopped (a step failed, went stale, or its executor
died mid-step), leave the unit consistent and propose again from what it is now.

1. The open incident's current plan is closed under its lease (a live executor keeps it): a
   step found started without an outcome is marked interrupted, and the steps not run are
   skipped as superseded by the new plan.
2. advisor's hold on restarts, if still in place, is lifted: the unit is never left with
   `Restart=no` by a plan that no longer runs.
3. A new plan (`<incident>~N`) is proposed for the incident, made for the unit's current
   invocation; the executor's guards then skip what is already done (a flag that already has
   its value, a unit already stopped).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from advisor.core.actions import ActionSkipped
from advisor.core.errors import AdvisorError, InputError
from advisor.core.statuses import ActionStatus, IncidentStatus
from advisor.core.taxonomy import GPU_MEMORY_HELD, HEALTHY, UNKNOWN
from advisor.execution.backends import Backend
from advisor.execution.decisions import EXECUTOR_SOURCE, action_event, plan_rows
from advisor.execution.run import ExecReport, Executor
from advisor.store import EventStore
from advisor.views.fold.projector import Projector
from advisor.views.read.actions import all_actions
from advisor.views.read.incidents import incident_rows
from advisor.views.read.reading import read_rows
from advisor.views.read.rows import IncidentView
from advisor.views.read.runs import run_row


@dataclass
class Replanned:
    incident_id: str
    old_plan: str | None
    new_plan: str
    notes: list[str] = field(default_factory=list)


def current_plan(store: EventStore, incident_id: str) -> str | None:
    """The incident's latest plan (its first, or the newest replan)."""
    rows = [r for r in all_actions(store) if r.incident_id == incident_id]
    return max(rows, key=lambda r: r.proposed_seq).plan_id if rows else None


# A start refused because GPU memory is still held follows from the failure before it (a
# restart quicker than the driver's release): when a unit has other incidents open, one of
# those is the cause to fix.
CONSEQUENCE = GPU_MEMORY_HELD


def _cause(open_: list[Any], label: Callable[[Any], str | None]) -> Any:
    causes = [i for i in open_ if label(i) != CONSEQUENCE]
    return (causes or open_)[-1]


def open_incident(store: EventStore, host: str | None, unit: str) -> dict[str, Any]:
    """The unit's open incident as the table holds it (JSON columns as text): the latest
    whose failure is a cause, not a consequence, should there be more."""
    open_ = [
        i
        for i in read_rows(store, "incidents", unit=unit, host=host)
        if i["status"] == IncidentStatus.OPEN
    ]
    if not open_:
        raise InputError(f"{unit}: no open incident")
    return dict(_cause(open_, lambda i: i["label"]))


def open_incident_view(store: EventStore, host: str | None, unit: str) -> IncidentView:
    """The unit's open incident (as `open_incident` chooses it)."""
    open_ = [
        i for i in incident_rows(store, unit=unit, host=host) if i.status == IncidentStatus.OPEN
    ]
    if not open_:
        raise InputError(f"{unit}: no open incident")
    chosen: IncidentView = _cause(open_, lambda i: i.label)
    return chosen


def replan(store: EventStore, backend: Backend, host: str | None, unit: str) -> Replanned:
    from advisor.planning.planner import propose

    Projector(store).catch_up()
    incident = open_incident_view(store, host, unit)
    incident_id = incident.incident_id
    old = current_plan(store, incident_id)
    plans = {r.plan_id for r in all_actions(store) if r.incident_id == incident_id}
    new_plan = f"{incident_id}~{len(plans)}"
    result = Replanned(incident_id, old, new_plan)
    executor = Executor(store, backend)
    if old is not None:
        _close(executor, old, new_plan, result)
    lifted = backend.release_hold(unit)
    if lifted:
        result.notes.append(lifted)
    now = backend.observe(unit)
    run = run_row(store, incident.last_run_id)
    if run is None or run.unit != unit or run.host != incident.host:
        raise InputError(f"{unit}: the incident's last run is not in the store")
    events = propose(
        store,
        run,
        new_plan,
        incident_id,
        incident.label or UNKNOWN,
        incident.confidence or 0.0,
        dict(incident.facts or {}),
        set(),
        now.invocation_id if now is not None else run.invocation_id,
        corroborated=incident.label in (HEALTHY, UNKNOWN, None)
        or any(
            c.get("source") == "rules" and c.get("label") == incident.label
            for c in incident.candidates or []
        ),
    )
    store.append(events)
    Projector(store).catch_up()
    if now is not None:
        result.notes.append(f"the unit now: {now.describe()}")
    return result


def _close(executor: Executor, plan_id: str, new_plan: str, result: Replanned) -> None:
    store = executor.store
    with executor.leased(plan_id) as mine:
        if not mine:
            raise InputError(
                f"plan {plan_id} is being run by another executor; replan when it stops"
            )
        report = ExecReport(plan_id)
        for row in plan_rows(store, plan_id):
            if row.status == ActionStatus.STARTED:
                executor.mark_interrupted(row, report)
                result.notes.append(f"step {row.step} was interrupted: marked failed")
            elif row.status in (ActionStatus.PROPOSED, ActionStatus.APPROVED):
                store.append(
                    [
                        action_event(
                            row,
                            ActionSkipped(
                                action_id=row.action_id,
                                why=f"superseded by plan {new_plan}",
                                stale=True,
                            ),
                            EXECUTOR_SOURCE,
                            f"skipped:{row.action_id}",
                        )
                    ]
                )
        Projector(store).catch_up()


def recover(store: EventStore, backend: Backend, report: ExecReport) -> Replanned | None:
    """After an executor found a plan interrupted: propose again (None if it cannot)."""
    if report.state != "interrupted":
        return None
    rows = plan_rows(store, report.plan_id)
    if not rows or not rows[0].unit:
        return None
    try:
        return replan(store, backend, rows[0].host, rows[0].unit)
    except AdvisorError:
        return None
