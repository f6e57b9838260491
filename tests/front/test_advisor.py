"""The front door itself (`advisor.front.Advisor`): each operation on a real SQLite store
holding the seed scenario (tests/fixtures), answering what the library function it delegates
to answers. The command line's tests (tests/cli) drive the same methods through the
commands; these call them as a program embedding advisor would."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

import advisor.execution.recovery
import advisor.execution.rollback
import advisor.execution.run
import advisor.pipeline.daemon
from advisor.core.errors import InputError
from advisor.core.ids import short_id
from advisor.core.settings import Settings, load_settings
from advisor.execution.backends import DryRunBackend
from advisor.execution.recovery import Replanned
from advisor.front import Advisor, Watch, human
from advisor.reports.postmortem import report_json
from advisor.store import EventStore
from tests.conftest import ROOT

HOST, UNIT = "gpu-node-07", "vllm-minimax-m25.service"
SAMPLER_PLAN = f"{HOST}/{UNIT}@2026-02-21T00:32:55.000000Z"
WEDGE_PLAN = f"{HOST}/{UNIT}@2026-02-21T00:33:27.400000Z"
GOLDEN_LOG = ROOT / "tests/golden/sampler_warmup_oom/llama31-8b-v085-rtx4090-journalctl.log"


@pytest.fixture
def conf(sqlite_url: str) -> Settings:
    return load_settings(db=sqlite_url, host=HOST)


@pytest.fixture
def adv(
    sqlite_url: str, conf: Settings, opener: Callable[[str], EventStore], seed_journal: Path
) -> Advisor:
    """The front door on a store holding the seed scenario, ingested through it and
    diagnosed: two incidents of the seed unit, a plan proposed for each."""
    front = Advisor(opener(sqlite_url), conf)
    report = front.ingest_journal_file(seed_journal)
    assert report.appended == 86
    assert front.diagnose_after().diagnosed == 2
    return front


def test_the_store_is_opened_when_first_needed(conf: Settings, sqlite_url: str) -> None:
    opened: list[str] = []

    def open_() -> EventStore:
        from advisor.front import open_store

        opened.append(sqlite_url)
        return open_store(sqlite_url)

    front = Advisor(open_, conf)
    with pytest.raises(InputError):
        front.explain("not a unit!")  # refused before the store is opened
    assert opened == []
    assert front.upgrade() and opened == [sqlite_url]
    assert front.store is front.store and opened == [sqlite_url]
    front.store.close()
    with pytest.raises(RuntimeError, match="needs a store"):
        _ = Advisor(None).store
    with pytest.raises(RuntimeError, match="needs the settings"):
        _ = Advisor(None).settings


def test_reading(adv: Advisor) -> None:
    status, skipped = adv.status()
    assert status.events == 102 and skipped == adv.skipped() == {"fold": 0, "diagnosis": 0}
    assert [e.seq for e in adv.events(limit=3)] == [100, 101, 102]
    assert all(e.type == "log.recorded" for e in adv.events(type_="log.recorded", limit=5))
    assert len(adv.runs(unit=UNIT)) == 2 and adv.runs(unit="other.service") == []
    incidents = adv.incidents(unit=UNIT, host=HOST)
    assert len(incidents) == 2 and adv.incidents(only_open=True) == incidents
    assert adv.log_hosts() == {HOST}
    assert adv.fold() == 0  # already folded
    assert adv.diagnose().diagnosed == 0  # already diagnosed
    assert adv.rebuild() == 102


def test_explain_in_each_format(adv: Advisor) -> None:
    text = adv.explain("vllm-minimax-m25")
    assert text.startswith(f"{HOST}/{UNIT}: wedged_stop")
    assert adv.explain(f"{HOST}/vllm-minimax-m25", fmt="markdown").startswith("#")
    report = orjson.loads(adv.explain("vllm-minimax-m25", fmt="json"))
    assert report == report_json(adv.postmortem("vllm-minimax-m25"))
    assert adv.explain("vllm-minimax-m25", fmt="html").startswith("<!doctype html>")
    first = short_id(str(adv.incidents()[0]["incident_id"]))
    assert "sampler_warmup_oom" in adv.explain("vllm-minimax-m25", first)
    with pytest.raises(ValueError, match="no format"):
        adv.explain("vllm-minimax-m25", fmt="pdf")


def test_plan_decide_and_run(adv: Advisor, tmp_path: Path) -> None:
    plan = adv.plan("vllm-minimax-m25")
    assert plan.plan_id == WEDGE_PLAN
    assert [r.step for r in adv.plan_steps(WEDGE_PLAN)] == [0, 1, 2, 3]
    assert adv.plan_of(f"{short_id(WEDGE_PLAN)}#2") == WEDGE_PLAN
    preview = adv.preview(WEDGE_PLAN, tmp_path / "units", None, None)
    assert preview[0].startswith("step 0 (kill")
    pending = adv.actions(pending=True)
    assert {r.plan_id for r in pending} == {SAMPLER_PLAN, WEDGE_PLAN}
    assert adv.reject(f"{SAMPLER_PLAN}#1", "not now") == f"{SAMPLER_PLAN}#1"
    assert adv.resolve_action(f"{short_id(SAMPLER_PLAN)}#2") == f"{SAMPLER_PLAN}#2"
    said = adv.decide("approve", f"{SAMPLER_PLAN}#0", by="console:test")
    assert said == f"approved 1 action(s): {SAMPLER_PLAN}#0"
    assert adv.decide("reject", f"{SAMPLER_PLAN}#2", by="console:test") == (
        f"rejected {SAMPLER_PLAN}#2"
    )
    dry = adv.decide("rollback", f"{SAMPLER_PLAN}#0", by="x", backend=lambda: None)
    assert "dry-run" in dry
    approved = adv.approve(WEDGE_PLAN)
    assert approved == [f"{WEDGE_PLAN}#{n}" for n in range(4)]
    rows = {r.action_id: r for r in adv.actions()}
    assert rows[approved[0]].status == "approved" and human().startswith("human:")
    outcome = adv.run(DryRunBackend(), WEDGE_PLAN)
    assert outcome.settled and outcome.report.ran == approved
    assert adv.still_failing(DryRunBackend(), UNIT) is None


def test_rollback_and_replan_delegate(
    adv: Advisor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[Any] = []

    def restored(store: object, backend: object, action_id: str, **kw: object) -> str:
        seen.append((action_id, kw))
        return "restored"

    def replanned(store: object, backend: object, host: str | None, unit: str) -> Replanned:
        seen.append((host, unit))
        return Replanned("incident", "old", "new", [])

    monkeypatch.setattr(advisor.execution.rollback, "rollback", restored)
    monkeypatch.setattr(advisor.execution.recovery, "replan", replanned)
    backend = DryRunBackend()
    assert adv.rollback(f"{SAMPLER_PLAN}#1", backend, tmp_path) == "restored"
    assert adv.decide(
        "rollback", f"{SAMPLER_PLAN}#1", by="x", backend=lambda: backend, systemd_root=tmp_path
    ) == ("restored")
    assert adv.replan(backend, f"{HOST}/vllm-minimax-m25").new_plan == "new"
    assert seen == [
        (f"{SAMPLER_PLAN}#1", {"root": tmp_path}),
        (f"{SAMPLER_PLAN}#1", {"root": tmp_path}),
        (HOST, UNIT),
    ]
    assert adv.backend("dry-run", tmp_path) is None


def test_classify_rules_and_a_rule_tried() -> None:
    front = Advisor(None)
    done = front.classify(str(GOLDEN_LOG))
    assert done.result["label"] == "sampler_warmup_oom" and done.read > 0
    assert done.malformed == []
    rules = front.rules()
    assert rules and any(r.spec.label == "sampler_warmup_oom" for r in rules)
    rule = next(r.id for r in rules if r.spec.label == "sampler_warmup_oom")
    assert any(r["fired"] for r in front.try_rule(rule, str(GOLDEN_LOG)))
    step = {"kind": "restart", "unit": UNIT}
    assert Advisor.step_title(step)


def test_stats_query_and_export(adv: Advisor, tmp_path: Path) -> None:
    report = adv.stats(unit=UNIT)
    assert report and adv.stats(url=adv.settings.db_url) == report
    assert adv.stats_text(report).endswith("\n")
    assert adv.stats_text(report, "html").startswith("<!doctype html>")
    answer = adv.query("SELECT count(*) AS n FROM incidents")
    assert answer.columns == ["n"] and answer.rows == [(2,)]
    counts = adv.export_parquet(tmp_path / "export")
    assert counts["events"] == 102
    assert adv.stats(unit=UNIT, parquet_dir=tmp_path / "export") == report
    assert adv.query("SELECT count(*) FROM events", parquet_dir=tmp_path / "export").rows == [
        (102,)
    ]


def test_heads_verify_and_ship(adv: Advisor, tmp_path: Path, sqlite_url: str) -> None:
    lines: list[str] = []
    close = adv.sign_heads(lines.append)
    assert close is not None
    close()
    collected = adv.collect_heads(None, None, ())
    assert collected is not None and collected.store_exists
    result = adv.verify(collected)
    assert result.ok and result.report.last_seq == adv.last_seq() == 102
    assert lines == []
    central_url = f"sqlite:///{tmp_path / 'central.db'}"
    report, shown = adv.ship(central_url, give_up_after_s=0)
    assert report.shipped == 102 and report.last_seq == 102
    assert shown.endswith("central.db")
    assert adv.ship(central_url, give_up_after_s=0)[0].shipped == 0


def test_watch_builds_the_daemon_from_the_settings(
    adv: Advisor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[Any] = []
    monkeypatch.setattr(advisor.pipeline.daemon, "watch", lambda *a: seen.append(a))
    opener = lambda: adv.store  # noqa: E731
    adv.watch(Watch(units=("vllm*",), no_gpu=True), opener, print)
    ((config, given, said),) = seen
    assert config.units == ("vllm*",) and config.no_gpu and config.host == HOST
    assert config.auto is None and given is opener and said is print


def test_browsing_what_the_console_reads(adv: Advisor) -> None:
    from advisor.views.read.console import IncidentFilter

    assert adv.position() == adv.last_seq() == adv.status()[0].events
    lines, total = adv.incident_list(IncidentFilter(unit=UNIT))
    assert total == len(lines) == 2
    assert adv.incident_list(IncidentFilter(unit="other.service")) == ([], 0)
    assert adv.incident_choices()["unit"] == [UNIT]
    incident_id = str(adv.incidents()[0]["incident_id"])
    assert adv.resolve_incident(short_id(incident_id)[:8]) == incident_id
    with pytest.raises(InputError):
        adv.resolve_incident("no-such-incident")
    view = adv.incident(incident_id)
    assert view is not None and view.unit == UNIT and adv.incident("nothing") is None
    plan = adv.incident_plan(incident_id)
    assert plan and all(r.incident_id == incident_id for r in plan)
    first = adv.event(1)
    assert first is not None and first.seq == 1
    assert adv.event(adv.position() + 1) is None
