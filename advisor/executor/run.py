"""Carry out an approved plan, one step at a time, every step recorded as events.

The executor reads the `actions` projection and appends `action.started` before a step and
`action.succeeded` / `action.failed` after it. It is idempotent across crashes: a step that
succeeded is not run again; a step found `started` without an outcome (the executor was
killed while it ran) is not run again either — it is marked failed as interrupted and the plan
stops, so a person looks — and nothing after an unfinished or refused step runs, so no step is
skipped. An alternative step runs only when it was approved in its own right.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import orjson
from sqlalchemy import select

from advisor.errors import AdvisorError, InputError
from advisor.events import NewEvent
from advisor.executor.backends import Backend, Outcome
from advisor.projections import Projector
from advisor.store import EventStore
from advisor.store.schema import actions
from ingest.records import stable_key

EXECUTOR_SOURCE: Final = "executor"
HUMAN_SOURCE: Final = "approval"


def _event(row: dict[str, Any], payload: dict[str, Any], source: str, key: str,
           time_us: int) -> NewEvent:
    stream = f"{row['host']}/{row['unit'] or 'advisor'}"
    return NewEvent.model_validate({"stream": stream, "time_us": time_us, "source": source,
                                    "key": stable_key(key.encode()), "payload": payload})


def _now_us() -> int:
    import time

    return time.time_ns() // 1000


def plan_rows(store: EventStore, plan_id: str) -> list[dict[str, Any]]:
    Projector(store).catch_up()
    with store.engine.connect() as conn:
        rows = conn.execute(select(actions).where(actions.c.plan_id == plan_id)
                            .order_by(actions.c.step)).all()
    return [{str(k): v for k, v in r._mapping.items()} for r in rows]


def action_row(store: EventStore, action_id: str) -> dict[str, Any]:
    Projector(store).catch_up()
    with store.engine.connect() as conn:
        row = conn.execute(select(actions).where(actions.c.action_id == action_id)).first()
    if row is None:
        raise InputError(f"no action {action_id!r} (see `advisor actions`)")
    return {str(k): v for k, v in row._mapping.items()}


# ------------------------------------------------------------------ decisions
def approve(store: EventStore, ident: str, by: str) -> list[str]:
    """Approve one proposed action, or every non-alternative proposed step of a plan."""
    rows = plan_rows(store, ident)
    if rows:
        chosen = [r for r in rows if r["status"] == "proposed" and not r["alternative"]]
    else:
        row = action_row(store, ident)
        if row["status"] != "proposed":
            raise InputError(f"action {ident} is {row['status']}, not proposed")
        chosen = [row]
    events = [_event(r, {"type": "action.approved", "action_id": r["action_id"], "by": by},
                     HUMAN_SOURCE, f"approved:{r['action_id']}", _now_us()) for r in chosen]
    store.append(events)
    Projector(store).catch_up()
    return [r["action_id"] for r in chosen]


def reject(store: EventStore, action_id: str, by: str, why: str) -> None:
    row = action_row(store, action_id)
    if row["status"] not in ("proposed", "approved"):
        raise InputError(f"action {action_id} is {row['status']}: too late to reject")
    store.append([_event(row, {"type": "action.rejected", "action_id": action_id, "by": by,
                               "why": why}, HUMAN_SOURCE, f"rejected:{action_id}", _now_us())])
    Projector(store).catch_up()


# ------------------------------------------------------------------ execution
@dataclass
class ExecReport:
    plan_id: str
    ran: list[str] = field(default_factory=list)
    state: str = "done"     # done | paused | waiting (approval) | stopped (failed, rejected)
    why: str = ""


def _perform(backend: Backend, spec: dict[str, Any], tag: str) -> Outcome:
    kind, unit = spec["kind"], spec.get("unit")
    if kind == "notify":
        return Outcome(f"notified: {spec['why']}")
    if unit is None:
        raise InputError(f"{kind} needs a unit and this action has none")
    value = str(spec.get("value")) if spec.get("value") is not None else ""
    operations: dict[str, Callable[[], Outcome]] = {
        "stop": lambda: backend.stop(unit), "kill": lambda: backend.kill(unit),
        "restart": lambda: backend.restart(unit),
        "reset_failed": lambda: backend.reset_failed(unit),
        "hold_restarts": lambda: backend.hold_restarts(unit),
        "set_flag": lambda: backend.set_flag(unit, spec["flag"], value, tag),
        "set_unit_option": lambda: backend.set_unit_option(unit, spec["option"], value, tag),
        "wait_gpu_free": lambda: backend.wait_gpu_free(unit, float(spec.get("seconds") or 30)),
    }
    return operations[kind]()


def execute(store: EventStore, backend: Backend, plan_id: str,
            max_steps: int | None = None) -> ExecReport:
    """Run the plan's approved steps in order, as far as they may go (at most `max_steps`
    of them; the report's state is then `paused` if more remain)."""
    report = ExecReport(plan_id)
    rows = plan_rows(store, plan_id)
    if not rows:
        raise InputError(f"no plan {plan_id!r} (see `advisor actions`)")
    for i, row in enumerate(rows):
        status, alternative = row["status"], row["alternative"]
        if status in ("succeeded", "rolled_back"):
            continue
        if alternative and status in ("proposed", "rejected"):
            continue  # not chosen
        if status == "rejected":
            nxt = rows[i + 1] if i + 1 < len(rows) else None
            if nxt is not None and nxt["alternative"] and nxt["status"] == "approved":
                continue  # its alternative was chosen instead
            report.state, report.why = "stopped", f"step {row['step']} was rejected"
            return report
        if status == "proposed":
            report.state, report.why = "waiting", f"step {row['step']} awaits approval"
            return report
        if status == "failed":
            report.state, report.why = "stopped", f"step {row['step']} failed: {row['detail']}"
            return report
        if status == "started":  # killed mid-step: its effect is unknown, never run it twice
            store.append([_event(row, {"type": "action.failed", "action_id": row["action_id"],
                                       "error": "interrupted while it ran; not run again, "
                                                "check the unit"},
                                 EXECUTOR_SOURCE, f"failed:{row['action_id']}", _now_us())])
            Projector(store).catch_up()
            report.state, report.why = "stopped", f"step {row['step']} was interrupted"
            return report
        if max_steps is not None and len(report.ran) >= max_steps:
            report.state = "paused"
            return report
        _run_step(store, backend, row, report)
        if report.state != "done":
            return report
    return report


def _run_step(store: EventStore, backend: Backend, row: dict[str, Any],
              report: ExecReport) -> None:
    action_id = row["action_id"]
    store.append([_event(row, {"type": "action.started", "action_id": action_id,
                               "backend": backend.name},
                         EXECUTOR_SOURCE, f"started:{action_id}", _now_us())])
    spec = orjson.loads(row["spec"])
    try:
        outcome = _perform(backend, spec, action_id)
    except AdvisorError as e:
        store.append([_event(row, {"type": "action.failed", "action_id": action_id,
                                   "error": str(e)[:2000]},
                             EXECUTOR_SOURCE, f"failed:{action_id}", _now_us())])
        Projector(store).catch_up()
        report.state, report.why = "stopped", f"step {row['step']} failed: {e}"
        return
    payload = {"type": "action.succeeded", "action_id": action_id, "detail": outcome.detail,
               "dropin": outcome.dropin, "previous": outcome.previous}
    store.append([_event(row, {k: v for k, v in payload.items() if v is not None},
                         EXECUTOR_SOURCE, f"succeeded:{action_id}", _now_us())])
    Projector(store).catch_up()
    report.ran.append(action_id)


def rollback(store: EventStore, backend: Backend, action_id: str) -> str:
    """Put back what a set_flag / set_unit_option step changed."""
    row = action_row(store, action_id)
    if row["status"] != "succeeded" or row["dropin"] is None:
        raise InputError(f"action {action_id} changed no unit file (status {row['status']})")
    outcome = backend.rollback(row["dropin"], row["previous"])
    store.append([_event(row, {"type": "action.rolled_back", "action_id": action_id,
                               "detail": outcome.detail},
                         EXECUTOR_SOURCE, f"rolled_back:{action_id}", _now_us())])
    Projector(store).catch_up()
    return outcome.detail
