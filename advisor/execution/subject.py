"""What a step of a plan is about, as the store has it: its incident's row, and the `Subject`
a `notify` step's notice (and so its Alertmanager alert) is labelled with — with the plan's
headline fix: the step chosen as the console's incident page chooses it (`headline_step`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from advisor.core.kinds import NOTIFY, SETTING_KINDS
from advisor.execution.handlers import describe
from advisor.execution.primitives import Subject
from advisor.store import EventStore
from advisor.views.read.actions import plan_actions
from advisor.views.read.reading import read_rows
from advisor.views.read.rows import ActionRow

T = TypeVar("T")


def headline_step(
    steps: Sequence[T], kind: Callable[[T], str], alternative: Callable[[T], bool]
) -> T | None:
    """A plan's headline step, whatever shape its steps have (rows, a report's dicts): its
    first main step that changes a setting, else its first main step; None: no main step."""
    main = [s for s in steps if not alternative(s)]
    chosen = [s for s in main if kind(s) in SETTING_KINDS] or main
    return chosen[0] if chosen else None


def headline_fix(rows: Sequence[ActionRow]) -> str | None:
    """A plan's fix in a few words, from the step the console's incident page heads it with
    (`headline_step`), described (`set --max-num-seqs 256 on U`); a `notify` step's advice as
    it says it. None: no main step."""
    step = headline_step(rows, lambda r: r.kind, lambda r: r.alternative)
    if step is None:
        return None
    return step.action.why if step.kind == NOTIFY else describe(step.action)


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
