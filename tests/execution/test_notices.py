"""Notices reach people: an Apprise JSON webhook and an Alertmanager, both real HTTP servers
on 127.0.0.1; a failing target is reported and the others are still told; a `notify` step
tells the targets."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator

import pytest

from advisor.core.errors import InputError
from advisor.core.ids import short_id
from advisor.core.settings import NotifySettings
from advisor.core.steps import ActionStep
from advisor.execution.alertmanager import ALERT_NAME
from advisor.execution.decisions import approve
from advisor.execution.notices import Notice, Notices, notify_outcome
from advisor.execution.primitives import BackendError
from advisor.execution.run import execute
from advisor.planning import planner
from advisor.planning.planner import propose
from advisor.store import EventStore
from advisor.views.read.reading import read_rows
from advisor.views.read.runs import run_row
from tests.http_sink import Sink, serve_sink
from tests.telling import Telling


@pytest.fixture
def sink() -> Iterator[Sink]:
    yield from serve_sink()


def _notices(sink: Sink, **more: object) -> Notices:
    settings = NotifySettings(
        urls=(f"json://127.0.0.1:{sink.port}/hook",), alertmanager=(sink.url,), **more
    )
    return Notices(settings)


NOTICE = Notice(
    "incident_opened",
    "advisor: sampler_warmup_oom on h1/vllm.service",
    "h1/vllm.service: sampler_warmup_oom (0.97), 3 failed run(s).",
    incident_id="h1:vllm.service:42",
    host="h1",
    unit="vllm.service",
    label="sampler_warmup_oom",
    started_us=1_700_000_000_000_000,
)


def test_a_notice_reaches_the_webhook_and_alertmanager(sink: Sink) -> None:
    assert _notices(sink).send(NOTICE) == []
    [hook] = sink.bodies("/hook")
    assert hook["title"] == NOTICE.title and hook["message"] == NOTICE.body
    assert hook["type"] == "failure"
    [[alert]] = sink.bodies("/api/v2/alerts")
    assert alert["labels"] == {
        "alertname": ALERT_NAME,
        "severity": "critical",
        "incident": "h1:vllm.service:42",
        "short_id": short_id("h1:vllm.service:42"),
        "host": "h1",
        "unit": "vllm.service",
        "label": "sampler_warmup_oom",
    }
    assert alert["annotations"]["summary"] == NOTICE.title
    assert alert["startsAt"] == "2023-11-14T22:13:20Z" and "endsAt" not in alert


def test_a_plan_done_resolves_the_alert(sink: Sink) -> None:
    done = Notice("plan_done", "recovered", "downtime 42 s", incident_id="i", resolved=True)
    assert _notices(sink).send(done) == []
    [[alert]] = sink.bodies("/api/v2/alerts")
    assert alert["labels"]["severity"] == "info" and "endsAt" in alert
    assert sink.bodies("/hook")[0]["type"] == "success"


def test_a_failing_target_is_reported_in_words(sink: Sink) -> None:
    sink.status = 500
    problems = _notices(sink).send(NOTICE)
    assert len(problems) == 2
    assert problems[0] == f"json://127.0.0.1:{sink.port}/hook: not delivered"
    assert problems[1] == f"Alertmanager {sink.url}: HTTP 500"


def test_an_unreachable_alertmanager_does_not_stop_the_others(sink: Sink) -> None:
    notices = Notices(
        NotifySettings(
            urls=(f"json://127.0.0.1:{sink.port}/hook",), alertmanager=("http://127.0.0.1:9",)
        )
    )
    [problem] = notices.send(NOTICE)
    assert problem.startswith("Alertmanager http://127.0.0.1:9: ")
    assert len(sink.bodies("/hook")) == 1


def test_alertmanager_credentials_are_sent_as_basic_auth_and_never_shown(sink: Sink) -> None:
    with_auth = f"http://advisor:s%40cret@127.0.0.1:{sink.port}/"
    notices = Notices(NotifySettings(alertmanager=(with_auth,)))
    assert notices.send(NOTICE) == []
    assert sink.auth == ["Basic YWR2aXNvcjpzQGNyZXQ="]  # advisor:s@cret
    sink.status = 401
    assert notices.send(NOTICE) == [f"Alertmanager http://127.0.0.1:{sink.port}/: HTTP 401"]


def test_unknown_urls_are_refused_without_showing_them() -> None:
    with pytest.raises(InputError) as e:
        Notices(NotifySettings(urls=("slakc://T0/B0/secret-token",)))
    assert str(e.value) == "[notify] urls: slakc://…: not a URL Apprise knows"
    with pytest.raises(InputError, match=r"^\[notify\] alertmanager: ftp://…: not an http"):
        Notices(NotifySettings(alertmanager=("ftp://am",)))


def test_only_the_chosen_occasions_are_wanted(sink: Sink) -> None:
    notices = _notices(sink, on=("plan_pending",))
    assert notices.wants("plan_pending") and notices.wants("action")
    assert not notices.wants("incident_opened")


def test_a_notify_step_tells_every_target(sink: Sink) -> None:
    outcome = notify_outcome(_notices(sink), "a person should look at h1/vllm.service")
    assert outcome.detail == (
        "notified: a person should look at h1/vllm.service (2 target(s) told)"
    )
    assert sink.bodies("/hook")[0]["message"] == "a person should look at h1/vllm.service"
    assert len(sink.bodies("/api/v2/alerts")) == 1


def test_a_notify_step_without_targets_says_so_and_fails_when_none_is_told(sink: Sink) -> None:
    assert notify_outcome(None, "look").detail == (
        "notified: look (no [notify] targets: recorded only)"
    )
    sink.status = 503
    with pytest.raises(BackendError, match=r"^could not notify anyone: "):
        notify_outcome(_notices(sink), "look")


def test_a_notify_steps_alert_carries_its_incident(diagnosed: EventStore, sink: Sink) -> None:
    """Two incidents' `notify` steps, run by the executor, post two alerts Alertmanager tells
    apart: each labelled with its incident (id and short id), host, unit and failure label,
    as the incident's own notices are."""
    plans = []
    for incident in read_rows(diagnosed, "incidents"):
        run = run_row(diagnosed, incident["first_run_id"])
        assert run is not None
        plan_id = f"{incident['incident_id']}~1"
        events = propose(
            diagnosed, run, plan_id, incident["incident_id"], "unknown", 0.3, {}, set(), None
        )
        diagnosed.append(events)
        approve(diagnosed, plan_id, "human:test")
        plans.append((plan_id, incident))
    assert len(plans) == 2
    for plan_id, _ in plans:
        assert execute(diagnosed, Telling(notices=_notices(sink)), plan_id).state == "done"
    alerts = [alert for [alert] in sink.bodies("/api/v2/alerts")]
    assert [a["labels"] for a in alerts] == [
        {
            "alertname": ALERT_NAME,
            "severity": "critical",
            "incident": incident["incident_id"],
            "short_id": short_id(incident["incident_id"]),
            "host": incident["host"],
            "unit": incident["unit"],
            "label": incident["label"],
        }
        for _, incident in plans
    ]
    assert alerts[0]["labels"] != alerts[1]["labels"]
    assert alerts[0]["annotations"]["kind"] == "action"


CONSOLE = "https://advisor.example:8443/console"


def _plan_with_a_notify_step(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, dict[str, object]]:
    """A second plan for the store's first incident: a `notify` step, then a change of a flag
    (the plan's headline fix), proposed the way the planner proposes any plan."""
    incident = read_rows(store, "incidents")[0]
    unit = str(incident["unit"])
    steps = [
        ActionStep(kind="notify", unit=unit, why="a person should look"),
        ActionStep(kind="set_flag", unit=unit, flag="--max-num-seqs", value=256, why="fewer"),
    ]
    monkeypatch.setattr(planner, "plan", lambda *args, **kwargs: steps)
    run = run_row(store, incident["first_run_id"])
    assert run is not None
    plan_id = f"{incident['incident_id']}~1"
    store.append(propose(store, run, plan_id, incident["incident_id"], "x", 0.9, {}, set(), None))
    approve(store, f"{plan_id}#0", "human:test")
    return plan_id, incident


@pytest.mark.parametrize("console_url", [CONSOLE, CONSOLE + "/", None])
def test_a_notify_steps_message_carries_the_fix_and_a_console_link(
    diagnosed: EventStore, sink: Sink, monkeypatch: pytest.MonkeyPatch, console_url: str | None
) -> None:
    plan_id, incident = _plan_with_a_notify_step(diagnosed, monkeypatch)
    told = _notices(sink, console_url=console_url)
    execute(diagnosed, Telling(notices=told), plan_id)
    [hook] = sink.bodies("/hook")
    lines = hook["message"].splitlines()
    assert lines[0] == "a person should look"
    assert f"fix: set --max-num-seqs 256 on {incident['unit']}" in lines
    link = f"{CONSOLE}/incident/{urllib.parse.quote(str(incident['incident_id']))}"
    assert (f"console: {link}" in lines) == (console_url is not None), lines
    assert ("/incident/" in hook["message"]) == (console_url is not None)
    [[alert]] = sink.bodies("/api/v2/alerts")
    assert alert["annotations"]["description"] == hook["message"]


def test_a_console_url_is_an_http_url() -> None:
    with pytest.raises(InputError, match=r"console_url: ftp://…: not an http\(s\) URL"):
        Notices(NotifySettings(console_url="ftp://example/x"))
