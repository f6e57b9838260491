"""Telling people what the daemon sees: an incident opened, a plan waiting for approval, a
step that failed, a plan done (with the downtime) — a line for the operator (`say`) and a
notice to the `[notify]` targets (`advisor.execution.notices`), naming incidents and plans by
their short ids (the alerts' labels keep the whole ids).

Each is told once per incident, not per restart of the unit: the teller keeps what it told,
keyed by incident and occasion, and what already held when it started (`baseline`) is not
told again after a restart of the daemon. A pass reads the incidents and actions only when an
event that can change what is told (a classification, an incident's or an action's event)
was stored since the last (`mark`): GPU samples and log lines alone cost a few index reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from advisor.core.events import ACTION_EVENT_TYPES
from advisor.core.ids import short_id
from advisor.core.statuses import ActionStatus, IncidentStatus
from advisor.execution.handlers import describe
from advisor.execution.notices import Notice, Notices
from advisor.execution.subject import headline_fix
from advisor.reports.render import safe_text
from advisor.store.integrity.retained import last_seq
from advisor.views.read.actions import all_actions
from advisor.views.read.incidents import incident_rows

if TYPE_CHECKING:
    from advisor.store import EventStore
    from advisor.views.read.rows import ActionRow, IncidentView

Say = Callable[[str], None]
_DONE = frozenset({ActionStatus.SUCCEEDED, ActionStatus.SKIPPED})
# The events after which what is told may differ.
TOLD_FROM = ("run.classified", "incident.classified", *ACTION_EVENT_TYPES)


@dataclass(frozen=True)
class Told:
    """One thing to tell: its key (incident, occasion), the operator's line, the notice."""

    key: tuple[str, str]
    line: str
    notice: Notice


def _service(i: IncidentView) -> str:
    return f"{i.host}/{i.unit}"


def _notice(
    i: IncidentView, kind: str, title: str, body: str, fix: str | None, resolved: bool = False
) -> Notice:
    return Notice(
        kind,
        title,
        body,
        incident_id=i.incident_id,
        host=i.host,
        unit=i.unit,
        label=i.label,
        started_us=i.started_us or i.opened_us,
        resolved=resolved,
        fix=fix,
    )


def _opened(i: IncidentView, fix: str | None) -> Told:
    confidence = f" ({i.confidence:.2f})" if i.confidence is not None else ""
    what = f"{_service(i)}: {i.label}{confidence}"
    body = f"{what}, {i.runs} failed run(s); incident {short_id(i.incident_id)}."
    return Told(
        (i.incident_id, "incident_opened"),
        f"incident opened: {what} — incident {short_id(i.incident_id)}",
        _notice(i, "incident_opened", f"advisor: {i.label} on {_service(i)}", body, fix),
    )


def _plan_told(i: IncidentView, plan_id: str, rows: list[ActionRow]) -> Told | None:
    """What a plan's state calls for: waiting for approval, a failed step, or done."""
    main = [r for r in rows if not r.alternative]
    fix = headline_fix(rows)
    failed = [r for r in main if r.status == ActionStatus.FAILED]
    if failed:
        r = failed[0]
        what = (
            f"plan {short_id(plan_id)} step {r.step} ({r.kind}) failed: {r.detail or 'no detail'}"
        )
        title = f"advisor: a step failed on {_service(i)}"
        notice = _notice(i, "step_failed", title, what, fix)
        return Told((i.incident_id, "step_failed"), what, notice)
    if main and all(r.status == ActionStatus.PROPOSED for r in main):
        steps = "; ".join(f"{r.step}. {describe(r.action)}" for r in main)
        what = (
            f"plan proposed for {_service(i)} ({i.label}): {steps}"
            f" — waiting for approval: advisor approve {short_id(plan_id)}"
        )
        title = f"advisor: a plan for {_service(i)} waits for approval"
        notice = _notice(i, "plan_pending", title, what, fix)
        return Told((i.incident_id, "plan_pending"), what, notice)
    if (
        main
        and all(r.status in _DONE for r in main)
        and any(r.status == ActionStatus.SUCCEEDED for r in main)
    ):
        downtime = f"{i.downtime_us(max(r.updated_us for r in main)) / 1e6:.0f} s"
        what = f"plan done: {short_id(plan_id)} ({_service(i)}, {i.label}); downtime {downtime}"
        title = f"advisor: {_service(i)} recovered"
        notice = _notice(i, "plan_done", title, what, fix, resolved=True)
        return Told((i.incident_id, "plan_done"), what, notice)
    return None


def occasions(store: EventStore) -> Iterator[Told]:
    """Everything the store's state calls for telling now (told or not yet)."""
    plans: dict[str, list[ActionRow]] = {}
    for row in all_actions(store):  # folds what is new first, for the incidents too
        plans.setdefault(row.plan_id, []).append(row)
    incidents = {
        i.incident_id: i for i in incident_rows(store) if i.status != IncidentStatus.SUPERSEDED
    }
    fixes = {rows[0].incident_id: headline_fix(rows) for rows in plans.values()}  # the latest
    for i in incidents.values():
        if i.label is not None:
            yield _opened(i, fixes.get(i.incident_id))
    for plan_id, rows in plans.items():
        incident = incidents.get(rows[0].incident_id or "")
        if incident is not None:
            told = _plan_told(incident, plan_id, rows)
            if told is not None:
                yield told


@dataclass
class Teller:
    """Says and sends what is new since the last pass, each (incident, occasion) once."""

    store: EventStore
    notices: Notices | None
    say: Say
    told: set[tuple[str, str]] = field(default_factory=set)
    seen: tuple[int, ...] | None = None  # the mark of the last pass

    def mark(self) -> tuple[int, ...]:
        """The newest event of the kinds in TOLD_FROM (one read of the type index): it
        moves whenever there may be something new to tell."""
        return (last_seq(self.store, TOLD_FROM),)

    def baseline(self) -> None:
        """Count what holds now as told: a restarted daemon does not tell it again."""
        self.seen = self.mark()
        self.told.update(t.key for t in occasions(self.store))

    def tell(self) -> list[Told]:
        """One pass: each new occasion said, and sent where `[notify]` wants it."""
        mark = self.mark()
        if mark == self.seen:
            return []
        self.seen = mark
        new: list[Told] = []
        for t in occasions(self.store):
            if t.key in self.told:
                continue
            self.told.add(t.key)
            new.append(t)
            self.say(safe_text(t.line))
            if self.notices is not None and self.notices.wants(t.notice.kind):
                for problem in self.notices.send(t.notice):
                    self.say(f"notify: {safe_text(problem)}")
        return new
