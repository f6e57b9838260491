"""Telling people: a `Notice` (an incident opened, a plan waiting for approval, a step failed,
a plan done, or a `notify` action) sent to every target of the settings' `[notify]` section —
the Apprise URLs (Slack, PagerDuty, Teams, e-mail, plain JSON webhooks and the rest Apprise
speaks) and the Alertmanager servers (`advisor.execution.alertmanager`).

Sending never raises: a target that fails is reported in words, and the others are still told.
Target URLs hold secrets (tokens, passwords): they are only ever shown with Apprise's
privacy mode, or by scheme. What people read (titles, bodies) names incidents, plans and steps
by their short ids; an alert's labels keep the whole incident id. A notice about an incident
says its plan's headline fix (`fix: …`) and, with `[notify] console_url`, links to the
incident's page in the console (`console: BASE/incident/ID`).
"""

from __future__ import annotations

import time
import urllib.parse
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import apprise

from advisor.core.errors import InputError
from advisor.core.ids import shorten_ids
from advisor.execution.alertmanager import AlertmanagerError, alert_for, post_alerts
from advisor.execution.primitives import BackendError, Outcome, Subject

if TYPE_CHECKING:
    from advisor.core.settings import NotifySettings

_TYPES = {
    "incident_opened": apprise.NotifyType.FAILURE,
    "plan_pending": apprise.NotifyType.WARNING,
    "step_failed": apprise.NotifyType.FAILURE,
    "plan_done": apprise.NotifyType.SUCCESS,
}


@dataclass(frozen=True)
class Notice:
    """One message: `kind` is a `NoticeKind` or `action` (a `notify` step)."""

    kind: str
    title: str
    body: str
    incident_id: str | None = None
    host: str | None = None
    unit: str | None = None
    label: str | None = None
    started_us: int | None = None  # when the incident began (the alert's start)
    resolved: bool = False  # the incident is over (a plan done)
    fix: str | None = None  # the incident's plan's headline fix


def _scheme(url: str) -> str:
    return url.split("://", 1)[0][:20] + "://…" if "://" in url else "(no scheme)"


class Notices:
    """The targets of a `[notify]` section; InputError for a URL Apprise does not know."""

    def __init__(self, settings: NotifySettings) -> None:
        self.kinds = frozenset(settings.on)
        self.timeout_s = settings.timeout_s
        self.alertmanagers = tuple(settings.alertmanager)
        self._targets: list[tuple[str, apprise.Apprise]] = []
        for url in settings.urls:
            plugin: Any = apprise.Apprise.instantiate(url)
            if plugin is None:
                raise InputError(f"[notify] urls: {_scheme(url)}: not a URL Apprise knows")
            one = apprise.Apprise()
            one.add(plugin)
            self._targets.append((str(plugin.url(privacy=True)).split("?")[0], one))
        for base in self.alertmanagers:
            if not base.startswith(("http://", "https://")):
                raise InputError(f"[notify] alertmanager: {_scheme(base)}: not an http(s) URL")
        self.console_url = (settings.console_url or "").rstrip("/") or None
        if self.console_url and not self.console_url.startswith(("http://", "https://")):
            raise InputError(
                f"[notify] console_url: {_scheme(self.console_url)}: not an http(s) URL"
            )

    @property
    def targets(self) -> int:
        return len(self._targets) + len(self.alertmanagers)

    def wants(self, kind: str) -> bool:
        """Whether notices of `kind` are sent (a `notify` action's always are)."""
        return kind == "action" or kind in self.kinds

    def worded(self, notice: Notice) -> Notice:
        """The notice as people read it: short ids; below the body, the headline fix (unless
        the body is just that: a `notify` step's own advice) and the link to the incident's
        page in the console."""
        lines = [shorten_ids(notice.body)]
        if notice.fix and notice.fix != notice.body:
            lines.append(f"fix: {shorten_ids(notice.fix)}")
        if self.console_url and notice.incident_id:
            lines.append(
                f"console: {self.console_url}/incident/{urllib.parse.quote(notice.incident_id)}"
            )
        return replace(notice, title=shorten_ids(notice.title), body="\n".join(lines))

    def send(self, notice: Notice) -> list[str]:
        """Tell every target; what failed, one line per target (empty: all told)."""
        problems: list[str] = []
        notice = self.worded(notice)
        notify_type = _TYPES.get(notice.kind, apprise.NotifyType.INFO)
        for shown, target in self._targets:
            if not target.notify(body=notice.body, title=notice.title, notify_type=notify_type):
                problems.append(f"{shown}: not delivered")
        now_us = time.time_ns() // 1000
        for base in self.alertmanagers:
            try:
                post_alerts(base, [alert_for(notice, now_us)], self.timeout_s)
            except AlertmanagerError as e:
                problems.append(str(e))
        return problems


def step_notice(message: str, subject: Subject | None) -> Notice:
    """The notice of a `notify` step: its message, about its incident (the alert's labels)."""
    if subject is None:
        return Notice("action", "advisor: a person should look", message)
    service = f"{subject.host}/{subject.unit}" if subject.unit else subject.host
    return Notice(
        "action",
        f"advisor: a person should look at {service}",
        message,
        incident_id=subject.incident_id,
        host=subject.host,
        unit=subject.unit,
        label=subject.label,
        started_us=subject.started_us,
        fix=subject.fix,
    )


def notify_outcome(
    notices: Notices | None, message: str, subject: Subject | None = None
) -> Outcome:
    """What a `notify` step does on any backend: tell every target about `subject`;
    BackendError when there are targets and none could be told."""
    if notices is None or notices.targets == 0:
        return Outcome(f"notified: {message} (no [notify] targets: recorded only)")
    problems = notices.send(step_notice(message, subject))
    if len(problems) == notices.targets:
        raise BackendError(f"could not notify anyone: {'; '.join(problems)}")
    told = notices.targets - len(problems)
    failed = f"; failed: {'; '.join(problems)}" if problems else ""
    return Outcome(f"notified: {message} ({told} target(s) told{failed})")
