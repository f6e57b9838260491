"""Executor: approval, steps as events, one executor per plan (the lease), idempotent resume,
a dry run that consumes nothing, per-step decisions, rollback confined to advisor's files.
(The systemd backend itself is tested against real systemd in test_systemd_backend.py.)"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

from advisor.cli.main import cli
from advisor.core.errors import InputError
from advisor.core.events import NewEvent
from advisor.core.steps import ActionStep
from advisor.execution.backends import DryRunBackend
from advisor.execution.decisions import approve, plan_rows, reject
from advisor.execution.dropins import (
    AdvisorDropin,
    exec_start_line,
    parse_dropin,
    quote,
    with_flag,
)
from advisor.execution.preview import preview
from advisor.execution.primitives import Expected, FileChange, Outcome, Subject
from advisor.execution.rollback import rollback
from advisor.execution.run import Executor, execute
from advisor.execution.state import ExecCommand, UnitSnapshot
from advisor.planning.bounds import check_step
from advisor.store import EventFilter, EventStore, leases
from advisor.views.fold.projector import Projector
from advisor.views.read.reading import read_rows
from advisor.views.read.runs import came_up_ready
from ingest.journal_sources import ingest_json_file
from tests.journal_fixtures import entry, json_line

UNIT = "vllm-minimax-m25.service"
SAMPLER_PLAN = f"gpu-node-07/{UNIT}@2026-02-21T00:32:55.000000Z"
WEDGE_PLAN = f"gpu-node-07/{UNIT}@2026-02-21T00:33:27.400000Z"


def _types(store: EventStore, action_id: str) -> list[str]:
    return [
        e.type
        for e in store.read(EventFilter())
        if e.type.startswith("action.") and getattr(e.payload, "action_id", None) == action_id
    ]


def test_nothing_runs_without_approval_and_a_rejected_step_never_runs(
    diagnosed: EventStore,
) -> None:
    backend = DryRunBackend()
    report = execute(diagnosed, backend, WEDGE_PLAN)
    assert (report.state, backend.done) == ("waiting", [])
    reject(diagnosed, f"{WEDGE_PLAN}#0", "human:test", "not during the demo")
    approve(diagnosed, WEDGE_PLAN, "human:test")
    report = execute(diagnosed, backend, WEDGE_PLAN)
    assert report.state == "stopped" and "rejected" in report.why and backend.done == []
    with pytest.raises(InputError, match="is rejected, not proposed"):
        approve(diagnosed, f"{WEDGE_PLAN}#0", "human:test")


def test_an_approved_plan_runs_in_order_and_every_step_is_events(diagnosed: EventStore) -> None:
    assert approve(diagnosed, SAMPLER_PLAN, "human:test") == [
        f"{SAMPLER_PLAN}#0",
        f"{SAMPLER_PLAN}#1",
        f"{SAMPLER_PLAN}#3",
        f"{SAMPLER_PLAN}#4",
        f"{SAMPLER_PLAN}#5",
    ]  # not the alternative (#2)
    backend = DryRunBackend()
    report = execute(diagnosed, backend, SAMPLER_PLAN)
    assert report.state == "done"
    assert backend.done == [
        f"hold restarts of {UNIT}",
        f"set --max-num-seqs 256 on {UNIT}",
        f"wait up to 30 s for {UNIT}'s GPU memory",
        f"reset-failed {UNIT}",
        f"restart {UNIT}",
    ]
    assert _types(diagnosed, f"{SAMPLER_PLAN}#1") == [
        "action.proposed",
        "action.approved",
        "action.started",
        "action.succeeded",
    ]
    assert [r.status for r in plan_rows(diagnosed, SAMPLER_PLAN)] == [
        "succeeded",
        "succeeded",
        "proposed",
        "succeeded",
        "succeeded",
        "succeeded",
    ]
    started = [e.payload for e in diagnosed.read(EventFilter(type="action.started"))]
    assert {getattr(p, "executor", None) for p in started} == {started[0].executor}
    again = DryRunBackend()
    assert execute(diagnosed, again, SAMPLER_PLAN).ran == [] and again.done == []


def test_choosing_an_alternative_rejects_the_step_it_stands_in_for(diagnosed: EventStore) -> None:
    approve(diagnosed, f"{SAMPLER_PLAN}#2", "human:test")  # --gpu-memory-utilization 0.87
    rows = {r.step: r for r in plan_rows(diagnosed, SAMPLER_PLAN)}
    assert rows[1].status == "rejected" and "alternative" in (rows[1].decided_why or "")
    approve(diagnosed, SAMPLER_PLAN, "human:test")
    backend = DryRunBackend()
    assert execute(diagnosed, backend, SAMPLER_PLAN).state == "done"
    assert f"set --gpu-memory-utilization 0.87 on {UNIT}" in backend.done
    assert f"set --max-num-seqs 256 on {UNIT}" not in backend.done


class Dies(DryRunBackend):
    """The executor's process dies while a step runs (after its action.started)."""

    def perform(
        self,
        step: ActionStep,
        before: UnitSnapshot | None,
        change: FileChange | None,
        expect: Sequence[Expected] = (),
        subject: Subject | None = None,
    ) -> Outcome:
        if step.kind == "wait_gpu_free":
            raise KeyboardInterrupt
        return super().perform(step, before, change)


def test_killed_mid_step_the_next_executor_neither_repeats_nor_skips(diagnosed: EventStore) -> None:
    approve(diagnosed, WEDGE_PLAN, "human:test")
    dying = Dies()
    with pytest.raises(KeyboardInterrupt):
        # A lease that lapses at once: as if the process had been killed long ago.
        Executor(diagnosed, dying, lease_ttl_s=0.001).run(WEDGE_PLAN)
    assert dying.done == [f"kill {UNIT}"]
    resumed = DryRunBackend()
    report = execute(diagnosed, resumed, WEDGE_PLAN)
    assert report.state == "interrupted" and "interrupted" in report.why
    assert resumed.done == []  # the interrupted wait is not run twice, later steps do not run
    assert _types(diagnosed, f"{WEDGE_PLAN}#1")[-2:] == ["action.started", "action.failed"]


def test_a_second_executor_leaves_a_live_executors_plan_alone(diagnosed: EventStore) -> None:
    approve(diagnosed, WEDGE_PLAN, "human:test")
    inside = threading.Event()
    release = threading.Event()

    class Slow(DryRunBackend):
        def perform(
            self,
            step: ActionStep,
            before: UnitSnapshot | None,
            change: FileChange | None,
            expect: Sequence[Expected] = (),
            subject: Subject | None = None,
        ) -> Outcome:
            if step.kind == "wait_gpu_free":
                inside.set()
                release.wait(10)
            return super().perform(step, before, change)

    first = Slow()
    result: list[object] = []
    worker = threading.Thread(
        target=lambda: result.append(Executor(diagnosed, first, lease_ttl_s=0.3).run(WEDGE_PLAN))
    )
    worker.start()
    assert inside.wait(10)
    second = DryRunBackend()
    # Longer than the lease: the first executor renews it while its step runs.
    threading.Event().wait(0.6)
    report = execute(diagnosed, second, WEDGE_PLAN)
    assert report.state == "busy" and second.done == []
    assert "started" in [r.status for r in plan_rows(diagnosed, WEDGE_PLAN)]
    release.set()
    worker.join(10)
    assert getattr(result[0], "state", None) == "done"
    assert first.done.count(f"kill {UNIT}") == 1 and second.done == []
    assert all(r.status == "succeeded" for r in plan_rows(diagnosed, WEDGE_PLAN))


def test_a_lease_is_exclusive_until_it_expires_or_is_given_back(
    store_url: str, opener: Callable[[str], EventStore]
) -> None:
    diagnosed = opener(store_url)
    assert leases.take(diagnosed, "plan:x", "a", 30) is not None
    assert leases.take(diagnosed, "plan:x", "b", 30) is None
    assert leases.take(diagnosed, "plan:x", "a", 30) is not None  # renewal
    leases.give_back(diagnosed, "plan:x", "a")
    assert leases.take(diagnosed, "plan:x", "b", 0.001) is not None
    threading.Event().wait(0.01)
    assert leases.take(diagnosed, "plan:x", "c", 30) is not None  # b's lapsed
    # Two processes' worth of contenders at once: exactly one wins.
    won: list[object] = []
    contenders = [
        threading.Thread(
            target=lambda i=i: won.append(leases.take(opener(store_url), "plan:y", f"t{i}", 30))
        )
        for i in range(4)
    ]
    for t in contenders:
        t.start()
    for t in contenders:
        t.join(30)
    assert sum(w is not None for w in won) == 1


def test_a_dry_run_consumes_nothing(diagnosed: EventStore) -> None:
    before = list(diagnosed.read(EventFilter()))
    lines = preview(diagnosed, SAMPLER_PLAN)
    assert lines[0].startswith("step 0 (hold restarts of") and "would run once approved" in lines[0]
    assert "an alternative, not chosen" in lines[2]
    assert list(diagnosed.read(EventFilter())) == before
    approve(diagnosed, SAMPLER_PLAN, "human:test")
    assert execute(diagnosed, DryRunBackend(), SAMPLER_PLAN).state == "done"


def test_bounds_hold_whatever_the_plan_or_policy_says() -> None:
    for flag, value in (
        ("--max-num-seqs", 0),
        ("--max-num-seqs", -5),
        ("--max-batch-prefill-tokens", 0),
        ("--gpu-memory-utilization", 1.5),
        ("--max-model-len", 512),
        ("--max-num-seqs", 2.5),
    ):
        with pytest.raises(InputError):
            check_step(ActionStep(kind="set_flag", unit=UNIT, flag=flag, value=value, why="t"))
    check_step(ActionStep(kind="set_flag", unit=UNIT, flag="--max-num-seqs", value=256, why="t"))
    with pytest.raises(InputError, match="safe range"):
        check_step(
            ActionStep(
                kind="set_unit_option", unit=UNIT, option="TimeoutStopSec", value="1s", why="t"
            )
        )


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--max-num-seqs", "$(reboot)"),
        ("--max-num-seqs", "1;rm -rf /"),
        ("--max-num-seqs", "../../etc/passwd x"),
        ("--max-num-seqs", "1\nExecStartPre=/bin/sh"),
        ("--x;y", "1"),
        ("-q", "1"),
    ],
)
def test_hostile_flag_values_are_refused(flag: str, value: str) -> None:
    with pytest.raises(InputError):
        check_step(ActionStep(kind="set_flag", unit=UNIT, flag=flag, value=value, why="t"))


@pytest.mark.parametrize(
    "unit", ["$(reboot).service", "a;b.service", "../../x.service", "x\n.service", "*.service"]
)
def test_hostile_unit_names_are_refused(unit: str) -> None:
    backend = DryRunBackend()
    with pytest.raises(InputError):
        backend.perform(ActionStep(kind="stop", unit=unit, why="t"), None, None)
    assert backend.done == []


def test_quoting_flag_rewriting_and_the_one_dropin() -> None:
    assert quote("a b") == '"a b"' and quote("$HOME") == "$HOME" and quote("50%") == "50%%"
    assert quote(";") == '";"' and quote('say "hi"') == '"say \\"hi\\""'
    assert quote("it's") == '"it\'s"' and quote("") == '""' and quote("a\tb") == '"a\\tb"'
    assert with_flag(["x", "--max-num-seqs=1024"], "--max-num-seqs", "8") == (
        "x",
        "--max-num-seqs=8",
    )
    assert with_flag(["x"], "--max-num-seqs", "8") == ("x", "--max-num-seqs", "8")
    command = ExecCommand("/usr/bin/vllm", ("vllm", "serve", "${MODEL}"), ("ignore-failure",))
    assert exec_start_line(command) == '-@/usr/bin/vllm vllm serve "${MODEL}"'
    both = AdvisorDropin().with_option("KillMode", "mixed").with_exec_start(command)
    text = both.render()
    assert parse_dropin(Path("x.conf"), text) == both
    assert text.endswith(
        'KillMode=mixed\nExecStart=\nExecStart=-@/usr/bin/vllm vllm serve "${MODEL}"\n'
    )
    with pytest.raises(InputError, match="edited by hand"):
        parse_dropin(
            Path("x.conf"),
            text.replace("mixed", "process", 1) if "KillMode=mixed\n" in text else text + "#",
        )
    with pytest.raises(InputError, match="not written by advisor"):
        parse_dropin(Path("x.conf"), "[Service]\nRestart=always\n")


def test_rollback_touches_only_advisors_dropins(diagnosed: EventStore, tmp_path: Path) -> None:
    approve(diagnosed, WEDGE_PLAN, "human:test")
    execute(diagnosed, DryRunBackend(), WEDGE_PLAN)
    with pytest.raises(InputError, match="changed no unit file"):
        rollback(diagnosed, DryRunBackend(), f"{WEDGE_PLAN}#0", root=tmp_path)
    from advisor.execution.confine import confined_dropin

    outside = tmp_path / f"{UNIT}.d" / ".." / ".." / "etc" / "passwd"
    for hostile in (
        outside,
        tmp_path / "x.service.d" / "override.conf",
        tmp_path / "$(x).service.d" / "50-advisor.conf",
    ):
        with pytest.raises(InputError, match="not one of advisor's drop-ins"):
            confined_dropin(hostile, tmp_path)
    link_dir = tmp_path / f"{UNIT}.d"
    link_dir.mkdir()
    (link_dir / "50-advisor.conf").symlink_to("/etc/hostname")
    with pytest.raises(InputError):
        confined_dropin(link_dir / "50-advisor.conf", tmp_path)
    assert (
        confined_dropin(tmp_path / "v.service.d" / "50-advisor.conf", tmp_path)
        == (tmp_path / "v.service.d" / "50-advisor.conf").resolve()
    )


def test_the_cli_lists_decides_step_by_step_and_previews(
    sqlite_url: str, seed_journal: Path, tmp_path: Path
) -> None:
    runner = CliRunner()
    root = ["--systemd-root", str(tmp_path / "units")]
    assert (
        runner.invoke(
            cli, ["ingest", "journal", "--file", str(seed_journal), "--db", sqlite_url]
        ).exit_code
        == 0
    )
    pending = json.loads(
        runner.invoke(cli, ["actions", "--pending", "--json", "--db", sqlite_url]).output
    )
    assert len(pending) == 10 and pending[1]["spec"]["value"] == 256
    # A dry run, twice: the plan is still all proposed afterwards.
    for _ in range(2):
        result = runner.invoke(
            cli, ["remediate", "vllm-minimax-m25", "--dry-run", *root, "--db", sqlite_url]
        )
        assert result.exit_code == 0, result.output
        assert (
            "dry run: step 0 (kill vllm-minimax-m25.service): would run once approved"
            in result.output
        )
    assert (
        len(
            json.loads(
                runner.invoke(cli, ["actions", "--pending", "--json", "--db", sqlite_url]).output
            )
        )
        == 10
    )
    # At the prompt, "n" on the first step is recorded as a rejection; nothing runs.
    result = runner.invoke(
        cli, ["remediate", "gpu-node-07/vllm-minimax-m25", *root, "--db", sqlite_url], input="n\n"
    )
    # (the newest open incident: the wedged stop, whose plan starts with a kill)
    assert result.exit_code == 1 and "Run step 0 (kill)?" in result.output
    rows = json.loads(runner.invoke(cli, ["actions", "--json", "--db", sqlite_url]).output)
    kill = next(r for r in rows if r["kind"] == "kill")
    assert kill["status"] == "rejected" and kill["decided_why"] == "declined at the prompt"
    result = runner.invoke(cli, ["remediate", "nope", "--db", sqlite_url])
    assert result.exit_code == 4 and "nope.service: no open incident" in result.output
    result = runner.invoke(cli, ["rollback", f"{SAMPLER_PLAN}#1", *root, "--db", sqlite_url])
    assert result.exit_code == 4 and "changed no unit file" in result.output


def test_a_unit_started_by_someone_else_mid_plan_makes_the_rest_stale(
    diagnosed: EventStore,
) -> None:
    """After the hold stopped the unit, someone starts it: the plan stops before set_flag."""
    approve(diagnosed, SAMPLER_PLAN, "human:test")

    class Observed(DryRunBackend):
        def __init__(self) -> None:
            super().__init__()
            self.now = UnitSnapshot(
                UNIT,
                active_state="activating",
                sub_state="auto-restart",
                invocation_id="a" * 32,
                result="exit-code",
            )

        def observe(self, unit: str) -> UnitSnapshot | None:
            return self.now

        def perform(
            self,
            step: ActionStep,
            before: UnitSnapshot | None,
            change: FileChange | None,
            expect: Sequence[Expected] = (),
            subject: Subject | None = None,
        ) -> Outcome:
            done = super().perform(step, before, change, expect, subject)
            if step.kind == "hold_restarts":  # stopped; then an operator starts it again
                stopped = UnitSnapshot(UNIT, held=True)
                self.now = UnitSnapshot(
                    UNIT,
                    active_state="active",
                    sub_state="running",
                    invocation_id="b" * 32,
                    main_pid=4242,
                )
                return Outcome(done.detail, stopped)
            return done

    backend = Observed()
    report = execute(diagnosed, backend, SAMPLER_PLAN)
    assert report.state == "stale" and "started again after step 0" in report.why
    assert backend.done == [f"hold restarts of {UNIT}"]
    rows = {r.step: r for r in plan_rows(diagnosed, SAMPLER_PLAN)}
    assert rows[1].status == "stale" and rows[3].status == "approved"


def test_a_hold_is_stale_when_the_unit_runs_an_invocation_that_came_up_ready(
    diagnosed: EventStore, tmp_path: Path
) -> None:
    """The unit now runs an invocation the store saw come up ready (here one from before
    the crash, so the incident stays open and only this guard can tell): holding its
    restarts would stop a working server."""
    invocation = "c" * 32  # an earlier run of the unit, which came up ready
    lines = [
        entry(
            i,
            text,
            unit=UNIT,
            host="gpu-node-07",
            t0=1_771_600_000_000_000,
            extra=[("_SYSTEMD_INVOCATION_ID", invocation)],
        )
        for i, text in enumerate(
            ["INFO:     Started server process [4242]", "INFO:     Application startup complete."]
        )
    ]
    journal = tmp_path / "later.jsonl"
    journal.write_bytes(b"".join(json_line(fields) for fields in lines))
    ingest_json_file(diagnosed, journal)
    Projector(diagnosed).catch_up()
    assert any(r["ready_us"] for r in read_rows(diagnosed, "runs", unit=UNIT))
    approve(diagnosed, SAMPLER_PLAN, "human:test")

    class Serving(DryRunBackend):
        def observe(self, unit: str) -> UnitSnapshot | None:
            return UnitSnapshot(
                UNIT, active_state="active", sub_state="running", invocation_id=invocation
            )

    backend = Serving()
    report = execute(diagnosed, backend, SAMPLER_PLAN)
    assert report.state == "stale" and "came up ready after the plan was made" in report.why
    assert backend.done == []
    assert came_up_ready(diagnosed, UNIT, None, invocation)
    assert not came_up_ready(diagnosed, UNIT, "another-host", invocation)
    assert not came_up_ready(diagnosed, UNIT, None, "f" * 32)


def _forge(store: EventStore, sql: str) -> None:
    """What someone holding the store file can do to the actions projection."""
    from sqlalchemy import text

    with store.begin() as conn:
        conn.execute(text(sql))


def test_an_altered_actions_row_never_reaches_the_unit(diagnosed: EventStore) -> None:
    """The executor runs a step as its action.proposed event says, once an action.approved
    event names it: a row edited in the projection (another flag value, a status set to
    approved) is refused and recorded as failed, naming the seq."""
    plan_rows(diagnosed, SAMPLER_PLAN)
    _forge(
        diagnosed,
        f"UPDATE actions SET status = 'approved' WHERE plan_id = '{SAMPLER_PLAN}' AND step = 0",
    )
    backend = DryRunBackend()
    report = execute(diagnosed, backend, SAMPLER_PLAN)
    assert backend.done == []
    assert report.state == "stopped" and "no action.approved event" in report.why
    row = plan_rows(diagnosed, SAMPLER_PLAN)[0]
    assert row.status == "failed" and f"seq {row.proposed_seq}" in (row.detail or "")


def test_a_forged_flag_value_in_an_approved_row_is_refused(diagnosed: EventStore) -> None:
    approve(diagnosed, SAMPLER_PLAN, "human:test")
    rows = plan_rows(diagnosed, SAMPLER_PLAN)
    spec = dict(rows[1].spec)
    assert spec["kind"] == "set_flag" and spec["value"] == 256
    forged = json.dumps({**spec, "value": 1}, sort_keys=True).replace("'", "''")
    _forge(
        diagnosed,
        f"UPDATE actions SET spec = '{forged}' WHERE action_id = '{rows[1].action_id}'",
    )
    backend = DryRunBackend()
    report = execute(diagnosed, backend, SAMPLER_PLAN)
    assert backend.done[0] == f"hold restarts of {UNIT}"  # step 0 ran; the forged one did not
    assert not any("max-num-seqs" in done for done in backend.done)
    assert report.state == "stopped" and "another step than the action.proposed" in report.why


def test_no_step_is_taken_for_a_unit_that_is_no_servers(diagnosed: EventStore) -> None:
    """A plan aimed at a login session's scope (its action.proposed events as the planner
    would write them, the unit a scope) is refused step by step; nothing reaches the unit."""
    scope = "session-3.scope"
    forged = [
        NewEvent.model_validate(
            json.loads(
                json.dumps(
                    {
                        "stream": e.stream,
                        "time_us": e.time_us,
                        "source": "test",
                        "key": e.seq,
                        "payload": e.payload.model_dump(mode="json"),
                    }
                ).replace(UNIT, scope)
            )
        )
        for e in diagnosed.read(EventFilter(type="action.proposed"))
        if getattr(e.payload, "plan_id", None) == SAMPLER_PLAN
    ]
    diagnosed.append(forged)
    plan = SAMPLER_PLAN.replace(UNIT, scope)
    approve(diagnosed, plan, "human:test")
    backend = DryRunBackend()
    report = execute(diagnosed, backend, plan)
    assert backend.done == []
    assert report.state == "stopped" and "is a scope unit, not a server's service" in report.why
    with pytest.raises(InputError, match="is a socket unit"):
        backend.perform(ActionStep(kind="restart", unit="vllm.socket", why="test"), None, None)
