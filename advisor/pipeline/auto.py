"""Auto-remediation: approve (as the policy) and run the plans a policy allows.

One pass (`auto_once`) looks at every plan with steps to decide or run, of an incident still
open; if the policy allows every one of its main steps now — the rate limit counted per step,
this plan's steps included — it approves them (`by = "policy:<file>"`) and runs the plan;
otherwise the plan is left for a person and the reason is reported. A plan whose executor died
mid-step is proposed again (`advisor.execution.recovery`) for the next pass to judge. Without a
backend (a dry run) nothing is approved, run or recorded: the report says what would be.
`run_auto` repeats the pass (`advisor auto`); `auto_lines` says what a pass did.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from advisor.core.kinds import CHANGES_UNIT
from advisor.core.statuses import ActionStatus, IncidentStatus
from advisor.execution.backends import Backend
from advisor.execution.decisions import approve, plan_rows
from advisor.execution.recovery import recover
from advisor.execution.run import execute
from advisor.pipeline.signals import sigterm_as_interrupt
from advisor.planning.policy import History, Policy, decide
from advisor.reports.render import safe_text
from advisor.store import EventFilter, EventStore
from advisor.views.fold.projector import Projector
from advisor.views.read.actions import all_actions
from advisor.views.read.incidents import incident_rows
from advisor.views.read.rows import ActionRow, IncidentView


@dataclass
class AutoReport:
    applied: list[str] = field(default_factory=list)
    left: dict[str, str] = field(default_factory=dict)  # plan → why a person must decide
    would: list[str] = field(default_factory=list)  # dry run: plans it would apply
    replanned: list[str] = field(default_factory=list)  # new plans after an interruption


def _history(store: EventStore, unit: str | None, host: str, label: str, now_us: int) -> History:
    approvals = [
        e.time_us
        for e in store.read(EventFilter(type="action.approved", since_us=now_us - 3_600_000_000))
        if getattr(e.payload, "by", "").startswith("policy:")
    ]
    changes = [
        r.updated_us
        for r in all_actions(store, unit=unit, host=host)
        if r.status == ActionStatus.SUCCEEDED and r.kind in CHANGES_UNIT
    ]
    incidents = [
        i
        for i in incident_rows(store, unit=unit, host=host)
        if i.label == label and i.status != IncidentStatus.SUPERSEDED
    ]
    return History(now_us, approvals, max(changes) if changes else None, len(incidents))


def auto_once(
    store: EventStore, backend: Backend | None, policy: Policy, name: str, now_us: int | None = None
) -> AutoReport:
    report = AutoReport()
    Projector(store).catch_up()
    incidents = {i.incident_id: i for i in incident_rows(store)}
    rows_by_plan: dict[str, list[ActionRow]] = {}
    for row in all_actions(store):
        rows_by_plan.setdefault(row.plan_id, []).append(row)
    plans = sorted(
        p
        for p, rows in rows_by_plan.items()
        if any(
            r.status in (ActionStatus.PROPOSED, ActionStatus.APPROVED, ActionStatus.STARTED)
            for r in rows
        )
    )
    for plan_id in plans:
        rows = plan_rows(store, plan_id)
        incident = incidents.get(rows[0].incident_id or "")
        if incident is None or incident.status != IncidentStatus.OPEN:
            continue
        now = now_us if now_us is not None else time.time_ns() // 1000
        steps = [r for r in rows if r.status == ActionStatus.PROPOSED and not r.alternative]
        if not steps and not any(
            r.status in (ActionStatus.APPROVED, ActionStatus.STARTED) for r in rows
        ):
            continue  # nothing left to decide or run (an unchosen alternative stays proposed)
        refusal = _refusal(store, policy, steps, incident, now)
        if refusal is not None:
            report.left[plan_id] = refusal
            continue
        if policy.dry_run or backend is None:
            report.would.append(plan_id)
            continue
        if steps:
            approve(store, plan_id, f"policy:{name}")
        result = execute(store, backend, plan_id)
        report.applied.append(plan_id)
        if result.state in ("stopped", "stale", "interrupted", "busy"):
            report.left[plan_id] = result.why
        again = recover(store, backend, result)
        if again is not None:
            report.replanned.append(again.new_plan)
    return report


def _refusal(
    store: EventStore,
    policy: Policy,
    steps: list[ActionRow],
    incident: IncidentView,
    now: int,
) -> str | None:
    label = incident.label or ""  # an open incident has its first run's label
    history = _history(store, incident.unit, incident.host, label, now)
    hour_ago = now - 3_600_000_000
    recent = sum(1 for t in history.approved_by_policy_us if t >= hour_ago)
    if steps and recent + len(steps) > policy.max_actions_per_hour:
        return (
            f"{len(steps)} more action(s) after {recent} in the last hour: more than the "
            f"policy's max_actions_per_hour {policy.max_actions_per_hour}"
        )
    for row in steps:
        spec = dict(row.spec) | {"unit": row.unit}
        decision = decide(policy, spec, label, incident.confidence or 0.0, history)
        if not decision.allowed:
            return f"step {row.step} ({row.kind}): {decision.why}"
    return None


def auto_lines(report: AutoReport, reported: dict[str, str]) -> list[str]:
    """What one pass did, to print; a plan left or previewed is said once, not every pass
    (`reported` keeps what was said of each plan, from pass to pass)."""
    lines = [f"applied {safe_text(plan_id)}" for plan_id in report.applied]
    lines += [
        f"proposed again after an interruption: {safe_text(plan_id)}"
        for plan_id in report.replanned
    ]
    said = [(p, f"dry run: would apply {safe_text(p)}") for p in report.would] + [
        (p, f"left for a person: {safe_text(p)}: {safe_text(why)}")
        for p, why in report.left.items()
    ]
    for plan_id, line in said:
        if reported.get(plan_id) != line:
            lines.append(line)
            reported[plan_id] = line
    return lines


def run_auto(
    store: EventStore,
    backend: Backend | None,
    policy: Policy,
    name: str,
    *,
    interval_s: float,
    once: bool,
    say: Callable[[str], None],
) -> None:
    """Pass after pass, `interval_s` apart, saying what each did, until SIGINT or SIGTERM
    (or after one pass, `once`)."""
    reported: dict[str, str] = {}
    try:
        with sigterm_as_interrupt():
            while True:
                for line in auto_lines(auto_once(store, backend, policy, name), reported):
                    say(line)
                if once:
                    return
                time.sleep(interval_s)
    except KeyboardInterrupt:
        return
