"""What the daemon tells people, against a real HTTP sink (an Apprise JSON webhook and an
Alertmanager on 127.0.0.1): each incident opened and each plan waiting is told once however
many runs fail and however the lines arrive, a failed step and a plan done are told, and a
restarted teller does not repeat what was already so."""

from __future__ import annotations

import re
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from advisor.core.ids import short_id
from advisor.core.settings import NotifySettings
from advisor.core.steps import ActionStep
from advisor.execution.backends import DryRunBackend
from advisor.execution.decisions import approve
from advisor.execution.notices import Notices
from advisor.execution.primitives import BackendError, Expected, FileChange, Outcome, Subject
from advisor.execution.run import execute
from advisor.execution.state import UnitSnapshot
from advisor.pipeline.processing import Processor
from advisor.pipeline.telling import Teller
from advisor.store import EventStore
from ingest.journal_sources import ingest_json_file
from tests.http_sink import Sink, serve_sink

UNIT = "vllm-minimax-m25.service"
SAMPLER_PLAN = f"gpu-node-07/{UNIT}@2026-02-21T00:32:55.000000Z"
WEDGE_PLAN = f"gpu-node-07/{UNIT}@2026-02-21T00:33:27.400000Z"


@pytest.fixture
def sink() -> Iterator[Sink]:
    yield from serve_sink()


def _notices(sink: Sink) -> Notices:
    return Notices(
        NotifySettings(urls=(f"json://127.0.0.1:{sink.port}/hook",), alertmanager=(sink.url,))
    )


def _told(sink: Sink) -> Counter[tuple[str, str]]:
    """(incident, occasion) of every alert Alertmanager received."""
    return Counter(
        (a["labels"]["incident"], a["annotations"]["kind"])
        for alerts in sink.bodies("/api/v2/alerts")
        for a in alerts
    )


def test_each_incident_and_plan_is_told_once_as_lines_arrive(
    tmp_path: Path,
    sqlite_url: str,
    opener: Callable[[str], EventStore],
    seed_journal: Path,
    sink: Sink,
) -> None:
    store = opener(sqlite_url)
    processor = Processor(store)
    said: list[str] = []
    teller = Teller(store, _notices(sink), said.append)
    teller.baseline()
    lines = seed_journal.read_text().splitlines(keepends=True)
    for n, start in enumerate(range(0, len(lines), 7)):
        part = tmp_path / f"part{n}.jsonl"
        part.write_text("".join(lines[start : start + 7]))
        ingest_json_file(store, part)
        processor.run(final=False)
        teller.tell()
    processor.run(final=True)
    teller.tell()
    told = _told(sink)
    assert sorted(kind for _, kind in told) == [
        "incident_opened",
        "incident_opened",
        "plan_pending",
        "plan_pending",
    ]
    assert set(told.values()) == {1}  # once each, not once per failed run or batch
    assert len(sink.bodies("/hook")) == 4
    opened = [line for line in said if line.startswith("incident opened: ")]
    assert opened[0] == (
        f"incident opened: gpu-node-07/{UNIT}: sampler_warmup_oom (0.99)"
        f" — incident {short_id(SAMPLER_PLAN)}"
    )
    assert len(opened) == 2 and "wedged_stop" in opened[1]
    proposed = [line for line in said if line.startswith("plan proposed for ")]
    assert proposed[0].startswith(
        f"plan proposed for gpu-node-07/{UNIT} (sampler_warmup_oom): 0. hold restarts of {UNIT}; "
        f"1. set --max-num-seqs 256 on {UNIT}; "
    )
    assert proposed[0].endswith(f"waiting for approval: advisor approve {short_id(SAMPLER_PLAN)}")


class _Failing(DryRunBackend):
    """A backend whose steps fail, as a host without systemd's bus would."""

    def perform(
        self,
        step: ActionStep,
        before: UnitSnapshot | None,
        change: FileChange | None,
        expect: Sequence[Expected] = (),
        subject: Subject | None = None,
    ) -> Outcome:
        raise BackendError("the bus is not there")


def test_a_failed_step_and_a_plan_done_are_told_and_a_restart_is_quiet(
    diagnosed: EventStore, sink: Sink
) -> None:
    said: list[str] = []
    teller = Teller(diagnosed, _notices(sink), said.append)
    teller.baseline()
    assert teller.tell() == [] and sink.posts == []  # already so: not told again
    approve(diagnosed, SAMPLER_PLAN, "human:test")
    assert execute(diagnosed, DryRunBackend(), SAMPLER_PLAN).state == "done"
    approve(diagnosed, WEDGE_PLAN, "human:test")
    assert execute(diagnosed, _Failing(), WEDGE_PLAN).state == "stopped"
    [done, failed] = teller.tell()
    assert re.fullmatch(rf"plan done: {short_id(SAMPLER_PLAN)} \(.*\); downtime \d+ s", done.line)
    assert done.notice.resolved
    assert failed.line.startswith(f"plan {short_id(WEDGE_PLAN)} step 0 (") and failed.line.endswith(
        "failed: the bus is not there"
    )
    assert sorted(kind for _, kind in _told(sink)) == ["plan_done", "step_failed"]
    resolved = [a for alerts in sink.bodies("/api/v2/alerts") for a in alerts if "endsAt" in a]
    assert [a["annotations"]["kind"] for a in resolved] == ["plan_done"]
    assert teller.tell() == []
    again = Teller(diagnosed, _notices(sink), said.append)
    again.baseline()
    assert again.tell() == [] and len(sink.bodies("/hook")) == 2


def test_notices_name_incidents_and_plans_by_short_ids(diagnosed: EventStore, sink: Sink) -> None:
    said: list[str] = []
    Teller(diagnosed, _notices(sink), said.append).tell()
    hooks = sink.bodies("/hook")
    opened = [h for h in hooks if "failed run(s)" in h["message"]]
    pending = [h for h in hooks if "waiting for approval" in h["message"]]
    assert len(opened) == 2 and len(pending) == 2
    first = [h["message"].splitlines()[0] for h in (opened[0], pending[0])]
    assert first[0].endswith(f"incident {short_id(SAMPLER_PLAN)}.")
    assert first[1].endswith(f"advisor approve {short_id(SAMPLER_PLAN)}")
    for h in hooks:  # the whole ids stay in the alerts' labels, out of what people read
        assert SAMPLER_PLAN not in h["message"] + h["title"], h
        assert WEDGE_PLAN not in h["message"] + h["title"], h
    assert said[0].endswith(f"— incident {short_id(SAMPLER_PLAN)}")
    labels = {a["labels"]["incident"] for alerts in sink.bodies("/api/v2/alerts") for a in alerts}
    assert labels == {SAMPLER_PLAN, WEDGE_PLAN}


@pytest.mark.parametrize("console_url", ["http://127.0.0.1:8750", None])
def test_notices_carry_the_fix_and_a_link_to_the_console(
    diagnosed: EventStore, sink: Sink, console_url: str | None
) -> None:
    settings = NotifySettings(urls=(f"json://127.0.0.1:{sink.port}/hook",), console_url=console_url)
    Teller(diagnosed, Notices(settings), [].append).tell()
    sampler = [h["message"] for h in sink.bodies("/hook") if "sampler_warmup_oom" in h["message"]]
    assert len(sampler) == 2  # the incident opened, its plan waiting
    link = f"console: http://127.0.0.1:8750/incident/{urllib.parse.quote(SAMPLER_PLAN)}"
    for message in sampler:
        lines = message.splitlines()
        assert f"fix: set --max-num-seqs 256 on {UNIT}" in lines, lines
        assert (link in lines) == (console_url is not None), lines
        assert ("/incident/" in message) == (console_url is not None)
