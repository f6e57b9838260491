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
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson
from sqlalchemy import select

from advisor.core.errors import AdvisorError, InputError
from advisor.core.events import ActionStep, NewEvent
from advisor.core.records import stable_key
from advisor.core.settings import this_host
from advisor.execution.attest import attested_step, step_from_spec
from advisor.execution.backends import Backend, FileChange
from advisor.execution.guards import Context, judge
from advisor.execution.state import UnitSnapshot
from advisor.store import EventStore, leases
from advisor.store.schema import actions
from advisor.views.projections import Projector, read_rows

EXECUTOR_SOURCE: Final = "executor"
HUMAN_SOURCE: Final = "approval"
LEASE_TTL_S: Final = 30.0
Hook = Callable[[str, str], None]   # (phase, action_id): "started" / "performed", for tests


def _event(row: dict[str, Any], payload: dict[str, Any], source: str, key: str,
           time_us: int | None = None) -> NewEvent:
    stream = f"{row['host']}/{row['unit'] or 'advisor'}"
    return NewEvent.model_validate({
        "stream": stream, "time_us": time_us if time_us is not None else _now_us(),
        "source": source, "key": stable_key(key.encode()),
        "payload": {k: v for k, v in payload.items() if v is not None}})


def _now_us() -> int:
    return time.time_ns() // 1000


def plan_rows(store: EventStore, plan_id: str) -> list[dict[str, Any]]:
    Projector(store).catch_up()
    with store.connect() as conn:
        rows = conn.execute(select(actions).where(actions.c.plan_id == plan_id)
                            .order_by(actions.c.step)).all()
    return [{str(k): v for k, v in r._mapping.items()} for r in rows]


def action_row(store: EventStore, action_id: str) -> dict[str, Any]:
    Projector(store).catch_up()
    with store.connect() as conn:
        row = conn.execute(select(actions).where(actions.c.action_id == action_id)).first()
    if row is None:
        raise InputError(f"no action {action_id!r} (see `advisor actions`)")
    return {str(k): v for k, v in row._mapping.items()}


def step_of(row: dict[str, Any]) -> ActionStep:
    return step_from_spec(orjson.loads(row["spec"]))


# ------------------------------------------------------------------ decisions
def approve(store: EventStore, ident: str, by: str) -> list[str]:
    """Approve one proposed action, or every non-alternative proposed step of a plan.
    Approving an alternative chooses it: the step it stands in for, if still proposed, is
    rejected in the same batch."""
    rows = plan_rows(store, ident)
    events: list[NewEvent] = []
    if rows:
        chosen = [r for r in rows if r["status"] == "proposed" and not r["alternative"]]
    else:
        row = action_row(store, ident)
        if row["status"] != "proposed":
            raise InputError(f"action {ident} is {row['status']}, not proposed")
        chosen = [row]
        if row["alternative"]:
            main = _replaced_by(plan_rows(store, row["plan_id"]), row)
            if main is not None and main["status"] == "proposed":
                events.append(_event(main, {"type": "action.rejected",
                                            "action_id": main["action_id"], "by": by,
                                            "why": f"alternative {ident} chosen instead"},
                                     HUMAN_SOURCE, f"rejected:{main['action_id']}"))
    events += [_event(r, {"type": "action.approved", "action_id": r["action_id"], "by": by},
                      HUMAN_SOURCE, f"approved:{r['action_id']}") for r in chosen]
    store.append(events)
    Projector(store).catch_up()
    return [r["action_id"] for r in chosen]


def _replaced_by(rows: list[dict[str, Any]], alternative: dict[str, Any]) -> dict[str, Any] | None:
    """The main step an alternative stands in for: the nearest non-alternative before it."""
    before = [r for r in rows if r["step"] < alternative["step"] and not r["alternative"]]
    return before[-1] if before else None


def reject(store: EventStore, action_id: str, by: str, why: str) -> None:
    row = action_row(store, action_id)
    if row["status"] not in ("proposed", "approved"):
        raise InputError(f"action {action_id} is {row['status']}: too late to reject")
    store.append([_event(row, {"type": "action.rejected", "action_id": action_id, "by": by,
                               "why": why}, HUMAN_SOURCE, f"rejected:{action_id}")])
    Projector(store).catch_up()


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


def executor_identity() -> str:
    return f"{this_host()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Executor:
    """Runs plans with one backend. `identity` names it in the lease and in its events."""

    def __init__(self, store: EventStore, backend: Backend, *, identity: str | None = None,
                 lease_ttl_s: float = LEASE_TTL_S, hook: Hook | None = None) -> None:
        self.store = store
        self.backend = backend
        self.identity = identity or executor_identity()
        self.lease_ttl_s = lease_ttl_s
        self.hook = hook

    # -- the lease ------------------------------------------------------------------------
    @contextmanager
    def leased(self, plan_id: str) -> Iterator[bool]:
        """Hold the plan's lease for the block (True), or find it held by another (False)."""
        name = f"plan:{plan_id}"
        if leases.take(self.store, name, self.identity, self.lease_ttl_s) is None:
            yield False
            return
        stop = threading.Event()

        def renew() -> None:
            while not stop.wait(self.lease_ttl_s / 3):
                try:
                    leases.take(self.store, name, self.identity, self.lease_ttl_s)
                except AdvisorError:
                    continue  # the next renewal tries again; the lease outlives one miss

        keeper = threading.Thread(target=renew, name="lease", daemon=True)
        keeper.start()
        try:
            yield True
        finally:
            stop.set()
            keeper.join(timeout=5)
            leases.give_back(self.store, name, self.identity)

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
        for i, row in enumerate(rows):
            status, alternative = row["status"], row["alternative"]
            if status in ("succeeded", "rolled_back", "skipped"):
                continue
            if alternative and status in ("proposed", "rejected"):
                continue  # not chosen
            if status == "rejected":
                nxt = rows[i + 1] if i + 1 < len(rows) else None
                if nxt is not None and nxt["alternative"] and nxt["status"] == "approved":
                    continue  # its alternative was chosen instead
                self._stop(report, row, "stopped", f"step {row['step']} was rejected")
                return
            if status == "proposed":
                report.state, report.why = "waiting", f"step {row['step']} awaits approval"
                return
            if status in ("failed", "stale"):
                report.state = "stopped" if status == "failed" else "stale"
                report.why = f"step {row['step']} {status}: {row['detail']}"
                return
            if status == "started":
                self.mark_interrupted(row, report)
                return
            if max_steps is not None and len(report.ran) + len(report.skipped) >= max_steps:
                report.state = "paused"
                return
            if not self._step(row, report):
                return

    def _context(self, row: dict[str, Any]) -> Context:
        done = [r for r in plan_rows(self.store, row["plan_id"]) if r["step"] < row["step"]]
        previous = [r for r in done if r["unit"] == row["unit"] and r["state_after"]
                    and r["status"] in ("succeeded", "skipped")]
        incident_open = True
        if row["incident_id"]:
            found = [i for i in read_rows(self.store, "incidents", host=row["host"],
                                          unit=row["unit"])
                     if i["incident_id"] == row["incident_id"]]
            incident_open = not found or found[0]["status"] == "open"
        ready = frozenset(r["invocation_id"] for r in read_rows(
            self.store, "runs", unit=row["unit"], host=row["host"])
            if r["ready_us"] is not None and r["invocation_id"])
        return Context(incident_open=incident_open,
                       previous_after=orjson.loads(previous[-1]["state_after"]) if previous
                       else None,
                       previous_step=previous[-1]["step"] if previous else None,
                       ready_invocations=ready)

    def _observe(self, step: ActionStep) -> UnitSnapshot | None:
        if step.kind == "notify" or step.unit is None:
            return None
        return self.backend.observe(step.unit)

    def _step(self, row: dict[str, Any], report: ExecReport) -> bool:
        """Judge, record, perform, record one step; False when the plan stops here."""
        action_id = row["action_id"]
        host = self.backend.host
        if host is not None and host != row["host"]:
            self._fail(row, f"this executor acts on host {host}; the plan is for "
                            f"{row['host']}", None, report)
            return False
        try:
            step = attested_step(self.store, row)  # as the chain says, not the table alone
            before = self._observe(step)
            verdict = judge(step, before, self._context(row))
            if verdict.action != "run":
                stale = verdict.action == "stale"
                self._append(row, {"type": "action.skipped", "action_id": action_id,
                                   "why": verdict.why, "stale": stale,
                                   "after": before.as_event() if before else None},
                             f"skipped:{action_id}")
                if stale:
                    self._stop(report, row, "stale", f"step {row['step']} is stale: "
                                                     f"{verdict.why}")
                    return False
                report.skipped.append(action_id)
                return True
            change = self.backend.prepare(step, before)
        except AdvisorError as e:
            self._fail(row, str(e), None, report)
            return False
        started = self._append(row, self._started_payload(action_id, before, change),
                               f"started:{action_id}")
        if not started:
            report.state, report.why = "busy", f"step {row['step']} was started by another executor"
            return False
        if self.hook is not None:
            self.hook("started", action_id)
        try:
            outcome = self.backend.perform(step, before, change)
        except AdvisorError as e:
            self._fail(row, str(e), self._safe_observe(step), report)
            return False
        if self.hook is not None:
            self.hook("performed", action_id)
        self._append(row, {"type": "action.succeeded", "action_id": action_id,
                           "detail": outcome.detail,
                           "dropin": str(change.path) if change is not None else None,
                           "after": outcome.after.as_event() if outcome.after else None},
                     f"succeeded:{action_id}")
        report.ran.append(action_id)
        return True

    def _started_payload(self, action_id: str, before: UnitSnapshot | None,
                         change: FileChange | None) -> dict[str, Any]:
        payload: dict[str, Any] = {"type": "action.started", "action_id": action_id,
                                   "backend": self.backend.name, "executor": self.identity,
                                   "before": before.as_event() if before else None}
        if change is not None:
            payload.update(dropin=str(change.path), written_text=change.text,
                           previous_text=change.previous, had_previous=change.had_previous)
        return payload

    def _safe_observe(self, step: ActionStep) -> UnitSnapshot | None:
        try:
            return self._observe(step)
        except AdvisorError:
            return None

    def _append(self, row: dict[str, Any], payload: dict[str, Any], key: str) -> bool:
        """Append one executor event; True if this call stored it (not a duplicate)."""
        result = self.store.append([_event(row, payload, EXECUTOR_SOURCE, key)])
        Projector(self.store).catch_up()
        return result.appended == 1

    def _fail(self, row: dict[str, Any], error: str, after: UnitSnapshot | None,
              report: ExecReport) -> None:
        error += self._release_hold(row) + self._rollback_hint(row)
        self._append(row, {"type": "action.failed", "action_id": row["action_id"],
                           "error": error[:2000],
                           "after": after.as_event() if after else None},
                     f"failed:{row['action_id']}")
        report.state, report.why = "stopped", f"step {row['step']} failed: {error}"

    def _stop(self, report: ExecReport, row: dict[str, Any], state: str, why: str) -> None:
        report.state, report.why = state, why + self._release_hold(row)

    def _rollback_hint(self, row: dict[str, Any]) -> str:
        """A restart that does not come up: the changes it was to start with can be undone."""
        if row["kind"] != "restart":
            return ""
        changed = [r["action_id"] for r in plan_rows(self.store, row["plan_id"])
                   if r["status"] == "succeeded" and r["kind"] in ("set_flag", "set_unit_option")
                   and r["written_text"]]
        if not changed:
            return ""
        return "; to undo the plan's changes: " + ", ".join(
            f"`advisor rollback {a}`" for a in reversed(changed))

    def _release_hold(self, row: dict[str, Any]) -> str:
        """Lift advisor's hold on a unit whose plan stops here (so it is not left with
        Restart=no); the words to add to the reason."""
        if not row["unit"]:
            return ""
        try:
            done = self.backend.release_hold(row["unit"])
        except AdvisorError as e:
            return f"; advisor's hold on restarts could not be lifted: {e}"
        return f"; {done}" if done else ""

    def mark_interrupted(self, row: dict[str, Any], report: ExecReport) -> None:
        """A step started under a lease that is gone: its executor died mid-step."""
        error = (f"interrupted: executor {row['executor'] or '?'} stopped while this step ran; "
                 "not run again")
        if row["dropin"] and row["written_text"] is not None:
            error += (f" (it was to write {row['dropin']}: `advisor rollback "
                      f"{row['action_id']}` puts back what was there)")
        self._fail(row, error, None, report)
        report.state = "interrupted"


def execute(store: EventStore, backend: Backend, plan_id: str, max_steps: int | None = None,
            *, hook: Hook | None = None) -> ExecReport:
    """Run a plan with a one-off executor (see `Executor.run`)."""
    return Executor(store, backend, hook=hook).run(plan_id, max_steps)


# ------------------------------------------------------------------ rollback
def rollback(store: EventStore, backend: Backend, action_id: str, root: Path | None = None,
             by: str = "human") -> str:
    """Put back the drop-in a set_flag / set_unit_option step wrote, as it was before."""
    row = action_row(store, action_id)
    if row["status"] not in ("succeeded", "failed", "started") or row["dropin"] is None:
        raise InputError(f"action {action_id} changed no unit file (status {row['status']})")
    if row["status"] == "started":   # written, maybe, by an executor that died before saying so
        holder = leases.holder_of(store, f"plan:{row['plan_id']}")
        if holder is not None and holder.expires_us > _now_us():
            raise InputError(f"action {action_id} is being run by {holder.holder}: roll it "
                             "back when that executor is done")
    change = _recorded_change(store, row, root)
    outcome = backend.restore(change)
    store.append([_event(row, {"type": "action.rolled_back", "action_id": action_id,
                               "detail": outcome.detail}, EXECUTOR_SOURCE,
                         f"rolled_back:{action_id}")])
    Projector(store).catch_up()
    return outcome.detail


def _recorded_change(store: EventStore, row: dict[str, Any], root: Path | None) -> FileChange:
    from advisor.execution.confine import confined_dropin

    path = confined_dropin(Path(row["dropin"]), root)
    written = row["written_text"]
    if written is None:   # recorded by an advisor that kept the old text in a side file
        kept = f" (its previous content was kept at {row['previous']})" if row["previous"] else ""
        raise InputError(f"{row['action_id']} was recorded before advisor kept what it wrote; "
                         f"put {path} back by hand{kept}")
    try:
        current = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        current = None
    if current != written:
        later = [r for r in read_rows(store, "actions") if r["dropin"] == row["dropin"]
                 and r["proposed_seq"] > row["proposed_seq"] and r["status"] == "succeeded"]
        if later:
            raise InputError(f"{path} was changed again by {later[-1]['action_id']}: roll that "
                             "back first")
        if current == row["previous_text"] or (current is None and not row["had_previous"]):
            raise InputError(f"{path} is already as it was before {row['action_id']}")
        raise InputError(f"{path} was edited since {row['action_id']} wrote it; "
                         "not overwriting")
    return FileChange(path, written, row["previous_text"], bool(row["had_previous"]))
