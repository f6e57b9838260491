"""Carry out an approved plan, one step at a time, every step recorded as events.

* **One executor per plan.** The executor takes the plan's lease in the store and renews it
  while it works; a second executor finds the plan busy and leaves it alone. A step runs only
  if this executor's `action.started` is the one the store kept.
* **Look before acting.** Before a step the unit is read from the backend and judged
  (`advisor.execution.guards`): still the state the plan was made for? would the step change
  anything? A step that would change nothing is `action.skipped` and the plan goes on; a step
  on a unit that moved on is skipped as stale and the plan stops.
* **Crash-safe.** `action.started` carries the drop-in a step is about to write and the text
  it replaces, so a step interrupted after writing can be rolled back. A step found started
  with no outcome, under a lease that expired (its executor died), is not run again: it is
  marked failed as interrupted and the plan stops.
* **Never silently down.** When a plan stops before its restart and advisor's hold on
  restarts is in place, the hold is lifted (the unit's own Restart= applies again) and the
  failure says the unit is stopped; `advisor replan` proposes from the unit's current state.

Approving and rejecting are in `advisor.execution.decisions`, rolling back in
`advisor.execution.rollback`; their names are importable from here too.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Final

from advisor.core.actions import (
    ActionFailed,
    ActionPayload,
    ActionSkipped,
    ActionStarted,
    ActionSucceeded,
)
from advisor.core.errors import AdvisorError, InputError
from advisor.core.kinds import KINDS, RESTART, SET_FLAG
from advisor.core.statuses import ActionStatus, IncidentStatus
from advisor.core.steps import ActionStep
from advisor.core.units import not_a_server
from advisor.execution.asfound import hand_back, rollback_hint, undo_flags
from advisor.execution.attest import attested_step
from advisor.execution.backends import Backend
from advisor.execution.decisions import (
    EXECUTOR_SOURCE,
    action_event,
    plan_rows,
)
from advisor.execution.guards import judge
from advisor.execution.handlers.base import Context, Verdict
from advisor.execution.lease import executor_identity, holding
from advisor.execution.locate import Refusal
from advisor.execution.primitives import Expected, FileChange
from advisor.execution.received import NotReceived
from advisor.execution.state import UnitSnapshot
from advisor.execution.subject import incident_of, subject_of
from advisor.store import EventStore, leases
from advisor.views.fold.projector import Projector
from advisor.views.read.rows import ActionRow
from advisor.views.read.runs import came_up_ready

__all__ = [
    "LEASE_TTL_S",
    "ExecReport",
    "Executor",
    "Hook",
    "execute",
]

LEASE_TTL_S: Final = 30.0
Hook = Callable[[str, str], None]  # (phase, action_id): "started" / "performed", for tests


# ------------------------------------------------------------------ execution
@dataclass
class ExecReport:
    plan_id: str
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    # done | paused | waiting (approval) | stopped (failed, rejected) | stale | interrupted |
    # busy (another executor holds the plan)
    state: str = "done"
    why: str = ""


class Executor:
    """Runs plans with one backend. `identity` names it in the lease and in its events."""

    def __init__(
        self,
        store: EventStore,
        backend: Backend,
        *,
        identity: str | None = None,
        lease_ttl_s: float = LEASE_TTL_S,
        hook: Hook | None = None,
    ) -> None:
        self.store = store
        self.backend = backend
        self.identity = identity or executor_identity()
        self.lease_ttl_s = lease_ttl_s
        self.hook = hook

    # -- the lease ------------------------------------------------------------------------
    def leased(self, plan_id: str) -> AbstractContextManager[bool]:
        """Hold the plan's lease for the block (True), or find it held by another (False)."""
        return holding(self.store, f"plan:{plan_id}", self.identity, self.lease_ttl_s)

    # -- a plan ---------------------------------------------------------------------------
    def run(self, plan_id: str, max_steps: int | None = None) -> ExecReport:
        """Run the plan's approved steps in order, as far as they may go (at most
        `max_steps` of them; the report's state is then `paused` if more remain)."""
        report = ExecReport(plan_id)
        if not plan_rows(self.store, plan_id):
            raise InputError(f"no plan {plan_id!r} (see `advisor actions`)")
        with self.leased(plan_id) as mine:
            if not mine:
                holder = leases.holder_of(self.store, f"plan:{plan_id}")
                report.state = "busy"
                report.why = f"another executor runs this plan ({holder.holder if holder else '?'})"
                return report
            self._run(plan_id, max_steps, report)
        return report

    def _run(self, plan_id: str, max_steps: int | None, report: ExecReport) -> None:
        rows = plan_rows(self.store, plan_id)
        ended = next(
            (r for r in rows if r.status in (ActionStatus.FAILED, ActionStatus.STALE)), None
        )
        if ended is not None:  # a plan stops at its first failed step, whatever came before
            report.state = "stopped" if ended.status == ActionStatus.FAILED else "stale"
            report.why = f"step {ended.step} {ended.status}: {ended.detail}"
            return
        if not self._preflight(rows, report):
            return
        for i, row in enumerate(rows):
            status, alternative = row.status, row.alternative
            if status in (ActionStatus.SUCCEEDED, ActionStatus.ROLLED_BACK, ActionStatus.SKIPPED):
                continue
            if alternative and status in (ActionStatus.PROPOSED, ActionStatus.REJECTED):
                continue  # not chosen
            if status == ActionStatus.REJECTED:
                nxt = rows[i + 1] if i + 1 < len(rows) else None
                if nxt is not None and nxt.alternative and nxt.status == ActionStatus.APPROVED:
                    continue  # its alternative was chosen instead
                self._stop(report, row, "stopped", f"step {row.step} was rejected")
                return
            if status == ActionStatus.PROPOSED:
                report.state, report.why = "waiting", f"step {row.step} awaits approval"
                return
            if status in (ActionStatus.FAILED, ActionStatus.STALE):
                report.state = "stopped" if status == ActionStatus.FAILED else "stale"
                report.why = f"step {row.step} {status}: {row.detail}"
                return
            if status == ActionStatus.STARTED:
                self.mark_interrupted(row, report)
                return
            if max_steps is not None and len(report.ran) + len(report.skipped) >= max_steps:
                report.state = "paused"
                return
            if not self._step(row, report):
                return

    def _context(self, row: ActionRow, now: UnitSnapshot | None = None) -> Context:
        done = [r for r in plan_rows(self.store, row.plan_id) if r.step < row.step]
        previous = [
            r
            for r in done
            if r.unit == row.unit
            and r.state_after
            and r.status in (ActionStatus.SUCCEEDED, ActionStatus.SKIPPED)
        ]
        incident = incident_of(self.store, row)
        incident_open = incident is None or incident["status"] == IncidentStatus.OPEN
        current = now.invocation_id if now is not None else None
        ready = (
            frozenset({current})
            if current and row.unit and came_up_ready(self.store, row.unit, row.host, current)
            else frozenset()
        )
        return Context(
            incident_open=incident_open,
            previous_after=previous[-1].state_after if previous else None,
            previous_step=previous[-1].step if previous else None,
            ready_invocations=ready,
        )

    def _observe(self, step: ActionStep) -> UnitSnapshot | None:
        if not KINDS[step.kind].on_unit or step.unit is None:
            return None
        return self.backend.observe(step.unit)

    def _step(self, row: ActionRow, report: ExecReport) -> bool:
        """Judge, record, perform, record one step; False when the plan stops here."""
        action_id = row.action_id
        host = self.backend.host
        if host is not None and host != row.host:
            self._fail(
                row,
                f"this executor acts on host {host}; the plan is for {row.host}",
                None,
                report,
            )
            return False
        refusal = not_a_server(row.unit) if row.unit else None
        if refusal is not None:  # no step is taken for a scope, a socket, a user's manager
            self._fail(row, refusal, None, report)
            return False
        try:
            step = attested_step(self.store, row)  # as the chain says, not the table alone
            before = self._observe(step)
            verdict = judge(step, before, self._context(row, before))
            if verdict.action != "run":
                return self._skip(row, verdict, before, report)
            change = self.backend.prepare(step, before)
        except AdvisorError as e:
            self._fail(row, str(e), None, report)
            return False
        started = self._append(
            row, self._started_payload(action_id, before, change), f"started:{action_id}"
        )
        if not started:
            report.state, report.why = "busy", f"step {row.step} was started by another executor"
            return False
        if self.hook is not None:
            self.hook("started", action_id)
        try:
            subject = subject_of(self.store, row)
            outcome = self.backend.perform(step, before, change, self._expected(row), subject)
        except NotReceived as e:
            undone = undo_flags(self.store, self.backend, row.plan_id, row.unit)
            self._fail(row, f"{e}{undone}", self._safe_observe(step), report, hint=False)
            return False
        except AdvisorError as e:
            self._fail(row, str(e), self._safe_observe(step), report)
            return False
        if self.hook is not None:
            self.hook("performed", action_id)
        self._append(
            row,
            ActionSucceeded(
                action_id=action_id,
                detail=outcome.detail,
                dropin=str(change.path) if change is not None else None,
                after=outcome.after.as_event() if outcome.after else None,
            ),
            f"succeeded:{action_id}",
        )
        report.ran.append(action_id)
        return True

    def _skip(
        self, row: ActionRow, verdict: Verdict, before: UnitSnapshot | None, report: ExecReport
    ) -> bool:
        """Record a step judged not to run; False when it is stale (the plan stops)."""
        action_id = row.action_id
        stale = verdict.action == "stale"
        self._append(
            row,
            ActionSkipped(
                action_id=action_id,
                why=verdict.why,
                stale=stale,
                after=before.as_event() if before else None,
            ),
            f"skipped:{action_id}",
        )
        if stale:
            self._stop(report, row, "stale", f"step {row.step} is stale: {verdict.why}")
            return False
        report.skipped.append(action_id)
        return True

    def _started_payload(
        self, action_id: str, before: UnitSnapshot | None, change: FileChange | None
    ) -> ActionStarted:
        return ActionStarted(
            action_id=action_id,
            backend=self.backend.name,
            executor=self.identity,
            before=before.as_event() if before else None,
            dropin=str(change.path) if change is not None else None,
            written_text=change.text if change is not None else None,
            previous_text=change.previous if change is not None else None,
            had_previous=change.had_previous if change is not None else None,
        )

    def _safe_observe(self, step: ActionStep) -> UnitSnapshot | None:
        try:
            return self._observe(step)
        except AdvisorError:
            return None

    def _append(self, row: ActionRow, payload: ActionPayload, key: str) -> bool:
        """Append one executor event; True if this call stored it (not a duplicate)."""
        result = self.store.append([action_event(row, payload, EXECUTOR_SOURCE, key)])
        Projector(self.store).catch_up()
        return result.appended == 1

    def _fail(
        self,
        row: ActionRow,
        error: str,
        after: UnitSnapshot | None,
        report: ExecReport,
        *,
        hint: bool = True,
    ) -> None:
        error += hand_back(self.store, self.backend, row)
        if hint:
            error += rollback_hint(self.store, row)
        self._append(
            row,
            ActionFailed(
                action_id=row.action_id,
                error=error[:2000],
                after=after.as_event() if after else None,
            ),
            f"failed:{row.action_id}",
        )
        report.state, report.why = "stopped", f"step {row.step} failed: {error}"

    def _stop(self, report: ExecReport, row: ActionRow, state: str, why: str) -> None:
        report.state, report.why = state, why + hand_back(self.store, self.backend, row)

    def _expected(self, row: ActionRow) -> tuple[Expected, ...]:
        """For a restart: the values the plan's changes set, which its engine must get."""
        if row.kind != RESTART:
            return ()
        return tuple(
            Expected(str(r.spec["flag"]), str(r.spec["value"]), r.action_id)
            for r in plan_rows(self.store, row.plan_id)
            if r.kind == SET_FLAG and r.status == ActionStatus.SUCCEEDED and r.unit == row.unit
        )

    def _preflight(self, rows: list[ActionRow], report: ExecReport) -> bool:
        """Before anything runs: every approved `set_flag` of the plan can be made where its
        value lives; a refusal fails that step and the plan, with nothing touched."""
        for row in rows:
            if row.kind != SET_FLAG or row.status != ActionStatus.APPROVED:
                continue
            try:
                step = attested_step(self.store, row)
                self.backend.prepare(step, self._observe(step))
            except Refusal as e:
                self._fail(row, str(e), None, report, hint=False)
                return False
            except AdvisorError:
                continue  # the step itself says why, when it runs
        return True

    def mark_interrupted(self, row: ActionRow, report: ExecReport) -> None:
        """A step started under a lease that is gone: its executor died mid-step."""
        error = (
            f"interrupted: executor {row.executor or '?'} stopped while this step ran; "
            "not run again"
        )
        if row.dropin and row.written_text is not None:
            error += (
                f" (it was to write {row.dropin}: `advisor rollback "
                f"{row.action_id}` puts back what was there)"
            )
        self._fail(row, error, None, report)
        report.state = "interrupted"


def execute(
    store: EventStore,
    backend: Backend,
    plan_id: str,
    max_steps: int | None = None,
    *,
    hook: Hook | None = None,
) -> ExecReport:
    """Run a plan with a one-off executor (see `Executor.run`)."""
    return Executor(store, backend, hook=hook).run(plan_id, max_steps)
