"""What a step of a plan is about, as the store has it: its incident's row, and the `Subject`
a `notify` step's notice (and so its Alertmanager alert) is labelled with — with the plan's
headline fix, chosen as the console chooses it (`headline_fix`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from advisor.execution.handlers import describe
from advisor.execution.primitives import Subject
from advisor.store import EventStore
from advisor.views.actions import plan_actions
from advisor.views.reading import read_rows
from advisor.views.rows import ActionRow

_CHANGES = ("set_flag", "set_unit_option")


def headline_fix(rows: Sequence[ActionRow]) -> str | None:
    """A plan's fix in a few words, as the console's incident page heads it: its first main
    step that changes a setting (else its first main step), described (`set --max-num-seqs
    256 on U`); a `notify` step's advice as it says it. None: no main step."""
    main = [r for r in rows if not r.alternative]
    chosen = [r for r in main if r.kind in _CHANGES] or main
    if not chosen:
        return None
    step = chosen[0]
    return step.action.why if step.kind == "notify" else describe(step.action)


def incident_of(store: EventStore, row: ActionRow) -> dict[str, Any] | None:
    """The `incidents` row of the step's incident (None: none, or not folded yet)."""
    if not row.incident_id:
        return None
    found = [
        i
        for i in read_rows(store, "incidents", host=row.host, unit=row.unit)
        if i["incident_id"] == row.incident_id
    ]
    return found[0] if found else None


def subject_of(store: EventStore, row: ActionRow) -> Subject:
    """The incident a step's notice is about: its id, service, failure label and start."""
    incident = incident_of(store, row) or {}
    return Subject(
        incident_id=row.incident_id or row.plan_id,
        host=row.host,
        unit=row.unit,
        label=incident.get("label"),
        started_us=incident.get("started_us") or incident.get("opened_us"),
        fix=headline_fix(plan_actions(store, row.plan_id)),
    )
