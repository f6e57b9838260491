"""Executor: approval, steps as events, idempotent resume, the systemd backend on a real
folder of drop-ins (systemctl itself replaced by a recorder of the argv it is given)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

from advisor.cli import cli
from advisor.errors import InputError
from advisor.executor.backends import DryRunBackend, SystemdBackend
from advisor.executor.dropins import quote, with_flag
from advisor.executor.run import approve, execute, plan_rows, reject, rollback
from advisor.store import EventFilter, EventStore

UNIT = "vllm-minimax-m25.service"
SAMPLER_PLAN = f"gpu-node-07/{UNIT}@2026-02-21T00:32:55.000000Z"
WEDGE_PLAN = f"gpu-node-07/{UNIT}@2026-02-21T00:33:27.400000Z"
ARGV = ["/opt/vllm/bin/vllm", "serve", "MiniMaxAI/MiniMax-M2.5", "--max-num-seqs", "1024",
        "--max-model-len", "131072", "--chat-template", "/etc/vllm/my template.jinja"]


class Systemctl:
    """Records argv; answers `show` like systemctl would for a unit in a restart loop."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str]) -> str:
        self.calls.append(list(argv))
        if argv[1:3] == ["show", "--property=MainPID"]:
            return "0\n"
        if argv[1:3] == ["show", "--property=ExecStart"]:
            return ("{ path=/opt/vllm/bin/vllm ; argv[]=" + " ".join(
                f"'{a}'" if " " in a else a for a in ARGV) + " ; ignore_errors=no }\n")
        return ""


def _types(store: EventStore, action_id: str) -> list[str]:
    return [e.type for e in store.read(EventFilter()) if e.type.startswith("action.")
            and getattr(e.payload, "action_id", None) == action_id]


def test_nothing_runs_without_approval_and_a_rejected_step_never_runs(
        diagnosed: EventStore) -> None:
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
        f"{SAMPLER_PLAN}#0", f"{SAMPLER_PLAN}#1", f"{SAMPLER_PLAN}#3",
        f"{SAMPLER_PLAN}#4"]  # not the alternative
    backend = DryRunBackend()
    report = execute(diagnosed, backend, SAMPLER_PLAN)
    assert report.state == "done"
    assert backend.done == [f"hold restarts of {UNIT}", f"set --max-num-seqs 256 on {UNIT}",
                            f"wait up to 30 s for {UNIT}'s GPU memory", f"restart {UNIT}"]
    assert _types(diagnosed, f"{SAMPLER_PLAN}#1") == [
        "action.proposed", "action.approved", "action.started", "action.succeeded"]
    assert [r["status"] for r in plan_rows(diagnosed, SAMPLER_PLAN)] == [
        "succeeded", "succeeded", "proposed", "succeeded", "succeeded"]
    again = DryRunBackend()
    assert execute(diagnosed, again, SAMPLER_PLAN).ran == [] and again.done == []


def test_killed_mid_step_the_executor_neither_repeats_nor_skips(diagnosed: EventStore) -> None:
    approve(diagnosed, WEDGE_PLAN, "human:test")
    first = DryRunBackend()

    class Dies(DryRunBackend):
        def wait_gpu_free(self, unit: str, seconds: float) -> object:  # type: ignore[override]
            raise KeyboardInterrupt  # the executor process killed while the step runs

    with pytest.raises(KeyboardInterrupt):
        execute(diagnosed, Dies(done=first.done), WEDGE_PLAN)
    assert first.done == [f"kill {UNIT}"]
    resumed = DryRunBackend()
    report = execute(diagnosed, resumed, WEDGE_PLAN)
    assert report.state == "stopped" and "interrupted" in report.why
    assert resumed.done == []  # the interrupted wait is not run twice, later steps do not run
    assert _types(diagnosed, f"{WEDGE_PLAN}#1")[-2:] == ["action.started", "action.failed"]


def test_systemd_backend_writes_dropins_atomically_and_rolls_back(
        diagnosed: EventStore, tmp_path: Path) -> None:
    root = tmp_path / "etc-systemd-system"
    systemctl = Systemctl()
    backend = SystemdBackend(root=root, runner=systemctl, systemctl="/bin/systemctl",
                             gpu_used=lambda unit: 0, poll_s=0.01)
    approve(diagnosed, SAMPLER_PLAN, "human:test")
    report = execute(diagnosed, backend, SAMPLER_PLAN)
    assert report.state == "done", report.why
    dropin = root / f"{UNIT}.d" / "50-advisor-max-num-seqs.conf"
    text = dropin.read_text()
    assert "[Service]\nExecStart=\nExecStart=/opt/vllm/bin/vllm serve" in text
    assert "--max-num-seqs 256 --max-model-len 131072" in text
    assert '"/etc/vllm/my template.jinja"' in text
    hold = root / f"{UNIT}.d" / "40-advisor-hold-restarts.conf"
    assert not hold.exists()  # written by hold_restarts, lifted by the restart step
    assert systemctl.calls == [
        ["/bin/systemctl", "daemon-reload"], ["/bin/systemctl", "stop", UNIT],
        ["/bin/systemctl", "show", "--property=MainPID", "--value", UNIT],
        ["/bin/systemctl", "show", "--property=ExecStart", "--value", UNIT],
        ["/bin/systemctl", "daemon-reload"], ["/bin/systemctl", "daemon-reload"],
        ["/bin/systemctl", "restart", UNIT]]
    rows = {r["kind"]: r for r in plan_rows(diagnosed, SAMPLER_PLAN)}
    assert rows["hold_restarts"]["dropin"] == str(hold)
    assert rows["restart"]["detail"].startswith(f"removed {hold}; systemctl daemon-reload;")
    assert not list(dropin.parent.glob(".*.tmp"))
    detail = rollback(diagnosed, backend, f"{SAMPLER_PLAN}#1")
    assert detail.startswith(f"removed {dropin}") and not dropin.exists()
    with pytest.raises(InputError, match="changed no unit file"):
        rollback(diagnosed, backend, f"{SAMPLER_PLAN}#3")


def test_rollback_restores_the_previous_dropin(tmp_path: Path) -> None:
    root = tmp_path / "root"
    backend = SystemdBackend(root=root, runner=Systemctl())
    first = backend.set_unit_option(UNIT, "TimeoutStopSec", "90s", "a")
    second = backend.set_unit_option(UNIT, "TimeoutStopSec", "30s", "b")
    assert first.previous is None and second.previous is not None
    assert Path(second.dropin or "").read_text().endswith("TimeoutStopSec=30s\n")
    backend.rollback(second.dropin or "", second.previous)
    assert Path(second.dropin or "").read_text().endswith("TimeoutStopSec=90s\n")


@pytest.mark.parametrize(("flag", "value"), [
    ("--max-num-seqs", "$(reboot)"), ("--max-num-seqs", "1;rm -rf /"),
    ("--max-num-seqs", "../../etc/passwd x"), ("--max-num-seqs", "1\nExecStartPre=/bin/sh"),
    ("--x;y", "1"), ("-q", "1")])
def test_hostile_flag_values_are_refused(tmp_path: Path, flag: str, value: str) -> None:
    backend = SystemdBackend(root=tmp_path, runner=Systemctl())
    with pytest.raises(InputError):
        backend.set_flag(UNIT, flag, value, "t")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("unit", ["$(reboot).service", "a;b.service", "../../x.service",
                                  "x\n.service", "*.service"])
def test_hostile_unit_names_are_refused(tmp_path: Path, unit: str) -> None:
    systemctl = Systemctl()
    backend = SystemdBackend(root=tmp_path, runner=systemctl)
    for call in (lambda: backend.stop(unit), lambda: backend.kill(unit),
                 lambda: backend.set_unit_option(unit, "KillMode", "mixed", "t")):
        with pytest.raises(InputError):
            call()
    assert systemctl.calls == [] and list(tmp_path.iterdir()) == []


def test_quoting_and_flag_rewriting() -> None:
    assert quote("a b") == '"a b"' and quote("$HOME") == "$$HOME" and quote("50%") == "50%%"
    assert with_flag(["x", "--max-num-seqs=1024"], "--max-num-seqs", "8") == \
        ["x", "--max-num-seqs=8"]
    assert with_flag(["x"], "--max-num-seqs", "8") == ["x", "--max-num-seqs", "8"]


def test_the_cli_lists_approves_rejects_and_remediates(sqlite_url: str, seed_journal: Path,
                                                       tmp_path: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(cli, ["ingest", "journal", "--file", str(seed_journal),
                               "--db", sqlite_url]).exit_code == 0
    pending = json.loads(runner.invoke(cli, ["actions", "--pending", "--json",
                                             "--db", sqlite_url]).output)
    assert len(pending) == 9 and pending[1]["spec"]["value"] == 256
    result = runner.invoke(cli, ["reject", f"{SAMPLER_PLAN}#2", "--why", "keep the KV cache",
                                 "--db", sqlite_url])
    assert result.exit_code == 0
    result = runner.invoke(cli, ["approve", f"{SAMPLER_PLAN}#0", "--db", sqlite_url])
    assert result.output == f"approved 1 action(s): {SAMPLER_PLAN}#0\n"
    result = runner.invoke(cli, ["remediate", UNIT, "--backend", "dry-run", "--db", sqlite_url],
                           input="n\n")
    assert result.exit_code == 1 and "Approve and apply this plan?" in result.output
    result = runner.invoke(cli, ["remediate", UNIT, "--yes", "--backend", "dry-run",
                                 "--db", sqlite_url])
    assert result.exit_code == 0 and "ran 4 step(s); plan done" in result.output
    result = runner.invoke(cli, ["remediate", "nope.service", "--db", sqlite_url])
    assert result.exit_code == 4 and "nope.service: no open incident" in result.output
    result = runner.invoke(cli, ["rollback", f"{SAMPLER_PLAN}#1", "--backend", "dry-run",
                                 "--db", sqlite_url])
    assert result.exit_code == 4
