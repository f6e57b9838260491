"""The rows the views hand out: typed and frozen, their JSON columns decoded once when read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import orjson

from advisor.core.actions import step_from_spec
from advisor.core.statuses import ActionStatus, IncidentStatus
from advisor.core.steps import ActionStep
from advisor.store import EventStore


def fresh(store: EventStore) -> int:
    """Fold what is new into the projections before they are read; the events folded."""
    # Imported here: the projector's fold is built from the views' own modules.
    from advisor.views.fold.projector import Projector

    return Projector(store).catch_up()


@dataclass(frozen=True, slots=True)
class ActionRow:
    """One `actions` row: a proposed step and what became of it. `spec` is the proposal as
    its event states it, `action` the step it describes, `state_after` the unit as the step
    left it (None: not recorded)."""

    action_id: str
    plan_id: str
    step: int
    incident_id: str | None
    host: str
    unit: str | None
    kind: str
    alternative: bool
    spec: Mapping[str, Any]
    action: ActionStep
    status: ActionStatus
    proposed_seq: int
    proposed_us: int
    updated_us: int
    decided_by: str | None
    decided_why: str | None
    detail: str | None
    dropin: str | None
    previous: str | None
    executor: str | None
    state_after: Mapping[str, Any] | None
    written_text: str | None
    previous_text: str | None
    had_previous: bool | None

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> ActionRow:
        """The row as the table holds it (`{column: value}`, JSON columns as text)."""
        spec = orjson.loads(row["spec"])
        state_after = orjson.loads(row["state_after"]) if row["state_after"] else None
        return cls(
            action_id=row["action_id"],
            plan_id=row["plan_id"],
            step=int(row["step"]),
            incident_id=row["incident_id"],
            host=row["host"],
            unit=row["unit"],
            kind=row["kind"],
            alternative=bool(row["alternative"]),
            spec=spec,
            action=step_from_spec(spec),
            status=ActionStatus(row["status"]),
            proposed_seq=int(row["proposed_seq"]),
            proposed_us=int(row["proposed_us"]),
            updated_us=int(row["updated_us"]),
            decided_by=row["decided_by"],
            decided_why=row["decided_why"],
            detail=row["detail"],
            dropin=row["dropin"],
            previous=row["previous"],
            executor=row["executor"],
            state_after=state_after,
            written_text=row["written_text"],
            previous_text=row["previous_text"],
            had_previous=None if row["had_previous"] is None else bool(row["had_previous"]),
        )

    def columns(self) -> dict[str, Any]:
        """The row's columns by name, JSON columns decoded (what `advisor actions --json`
        shows)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "action"}


def _json(text: str | None) -> Any:
    return None if text is None or text == "" else orjson.loads(text)


@dataclass(frozen=True, slots=True)
class RunView:
    """One `runs` row as the later stages read it: `phases`, `config` and `lifecycle` (the
    lifecycle events seen; None: not kept) decoded from their JSON."""

    run_id: str
    stream: str
    host: str
    unit: str
    invocation_id: str | None
    first_seq: int
    last_seq: int
    started_us: int
    ended_us: int | None
    lines: int
    engine: str | None
    phases: Any
    last_phase: str | None
    ready_us: int | None
    stop_us: int | None
    config: Mapping[str, Any]
    exit_code: int | None
    exit_signal: str | None
    unit_result: str | None
    restart_count: int | None
    stop_timed_out: bool
    ended: bool
    died: bool
    outcome: str
    peak_gpu_used_bytes: int | None
    peak_gpu_total_bytes: int | None
    label: str | None
    confidence: float | None
    incident_id: str | None
    peak_gpu_from_unit: bool | None
    first_key: str | None
    last_key: str | None
    last_us: int | None
    content: str | None
    lifecycle: tuple[str, ...] | None
    label_stale: bool | None
    label_seq: int | None

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> RunView:
        """The row as the table holds it (`{column: value}`, JSON columns as text)."""
        values = {f.name: row[f.name] for f in fields(cls)}
        values["phases"] = _json(row["phases"])
        values["config"] = _json(row["config"]) or {}
        lifecycle = _json(row["lifecycle"])
        values["lifecycle"] = None if lifecycle is None else tuple(lifecycle)
        for name in ("stop_timed_out", "ended", "died"):
            values[name] = bool(row[name])
        return cls(**values)


@dataclass(frozen=True, slots=True)
class IncidentView:
    """One `incidents` row: `facts`, `evidence` and `candidates` (what the diagnoser said;
    None: nothing yet) decoded from their JSON."""

    incident_id: str
    stream: str
    host: str
    unit: str
    opened_seq: int
    opened_us: int
    config_key: str
    first_run_id: str
    last_run_id: str
    runs: int
    status: IncidentStatus
    label: str | None
    confidence: float | None
    phase: str | None
    facts: Mapping[str, Any] | None
    evidence: list[dict[str, Any]] | None
    candidates: list[dict[str, Any]] | None
    classified_seq: int | None
    resolved_us: int | None
    resolved_run_id: str | None
    started_us: int | None
    superseded_by: str | None

    def downtime_us(self, until_us: int) -> int:
        """From the first failed run's start to recovery (not recovered: to `until_us`)."""
        end = self.resolved_us or until_us
        return max(0, end - (self.started_us or self.opened_us))

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> IncidentView:
        """The row as the table holds it (`{column: value}`, JSON columns as text)."""
        values = {f.name: row[f.name] for f in fields(cls)}
        for name in ("facts", "evidence", "candidates"):
            values[name] = _json(row[name])
        values["status"] = IncidentStatus(row["status"])
        return cls(**values)
