"""The systemd backend against real systemd 252 (a box: `advisor.sim.box`), step by step:
ExecStart written back exactly (variables, quotes, JSON, `%`, `;`, an apostrophe), every flag
change in one drop-in, read-back after daemon-reload, stale and no-op steps, stops bounded by
the unit's own timeout, the start limit, readiness of the new invocation, GPU polling."""

from __future__ import annotations

import json
import time
from functools import partial

import pytest

from advisor.core.steps import ActionStep
from advisor.execution.dropins import ADVISOR_DROPIN, HOLD_DROPIN
from advisor.execution.guards import judge
from advisor.execution.handlers.base import Context
from advisor.execution.primitives import BackendError
from advisor.execution.systemd import SystemdBackend
from advisor.sim.gpuhost import GpuHost
from tests.waiting import wait

UNIT = "vllm-minimax-m25.service"
SEED = {
    "ADVISOR_SIM_VOCAB_SIZE": "200064",
    "ADVISOR_SIM_WEIGHTS_GIB": "230",
    "ADVISOR_SIM_SPEED": "50",
}
SPEC = '{"method": "ngram", "num_speculative_tokens": 3}'
# The ExecStart of issue 10: a variable, a quoted name, JSON, a secret from Environment=, an
# apostrophe, a literal %, a lone ";" and one inside an argument, and flags after them.
ARGS = [
    "serve",
    "${MODEL}",
    "--served-model-name",
    "minimax m25",
    "--speculative-config",
    SPEC,
    "--api-key",
    "${API_KEY}",
    "--chat-template",
    "/etc/vllm/it's mine.jinja",
    "--x-note",
    "100%",
    "--x-sep",
    ";",
    "--x-cmd",
    "a ;b",
    "--tensor-parallel-size",
    "4",
    "--max-model-len",
    "131072",
    "--gpu-memory-utilization",
    "0.9",
    "--trust-remote-code",
    "--max-num-seqs",
    "256",
]
ENV = {"MODEL": "MiniMaxAI/MiniMax-M2.5", "API_KEY": "sk-secret", **SEED}


@pytest.fixture
def host(gpu_host: GpuHost) -> GpuHost:
    return gpu_host


wait_for = partial(wait, timeout=20.0)


def step(kind: str, **fields: object) -> ActionStep:
    return ActionStep.model_validate({"kind": kind, "unit": UNIT, "why": "test", **fields})


def run(backend: SystemdBackend, s: ActionStep) -> str:
    before = backend.observe(UNIT)
    return backend.perform(s, before, backend.prepare(s, before)).detail


def argv_of_last_start(host: GpuHost) -> list[str]:
    lines = host.argv_log.read_text().splitlines()
    return list(json.loads(lines[-1])["argv"][1:])


def test_flags_are_changed_in_the_real_argv_and_both_changes_stay(host: GpuHost) -> None:
    host.add_vllm(UNIT, ARGS, environment=ENV)
    backend = host.backend()
    loaded = backend.observe(UNIT).exec_start[0].argv
    assert list(loaded[1:]) == ARGS  # systemd's own argv: ${MODEL} unexpanded
    run(backend, step("set_flag", flag="--max-num-seqs", value=128))
    run(backend, step("set_flag", flag="--max-model-len", value=65536))  # a second change
    dropins = sorted(p.name for p in (host.units_dir / f"{UNIT}.d").iterdir())
    assert dropins == [ADVISOR_DROPIN]  # one drop-in holds both
    expected = [*ARGS[:-1], "128"]
    expected[expected.index("131072")] = "65536"
    assert list(backend.observe(UNIT).exec_start[0].argv[1:]) == expected
    # What the process gets: the variables expanded by systemd, every argument whole.
    host.box.systemctl("start", UNIT)
    wait_for("the server to start", lambda: host.argv_log.exists())
    ran = argv_of_last_start(host)
    assert ran[:2] == ["serve", "MiniMaxAI/MiniMax-M2.5"]
    assert ran[ran.index("--api-key") + 1] == "sk-secret"
    for flag, value in (
        ("--served-model-name", "minimax m25"),
        ("--speculative-config", SPEC),
        ("--chat-template", "/etc/vllm/it's mine.jinja"),
        ("--x-note", "100%"),
        ("--x-sep", ";"),
        ("--x-cmd", "a ;b"),
        ("--tensor-parallel-size", "4"),
        ("--max-num-seqs", "128"),
        ("--max-model-len", "65536"),
    ):
        assert ran[ran.index(flag) + 1] == value, flag


def test_an_operators_override_is_the_command_advisor_changes(host: GpuHost) -> None:
    host.add_vllm(UNIT, ARGS, environment=ENV)
    # `systemctl edit` wrote ExecStart in override.conf: that is the command in force, and
    # advisor's drop-in sorts after it, so the change is made to it, and it stays as written.
    folder = host.units_dir / f"{UNIT}.d"
    folder.mkdir()
    override = f"[Service]\nExecStart=\nExecStart={host.script} serve x --max-num-seqs 1024\n"
    (folder / "override.conf").write_text(override)
    host.box.systemctl("daemon-reload")
    backend = host.backend()
    run(backend, step("set_flag", flag="--max-num-seqs", value=512))
    argv = backend.observe(UNIT).exec_start[0].argv
    assert list(argv[1:]) == ["serve", "x", "--max-num-seqs", "512"]
    assert (folder / "override.conf").read_text() == override
    names = [p.rpartition("/")[2] for p in backend.observe(UNIT).drop_in_paths]
    assert names == ["override.conf", ADVISOR_DROPIN]


def test_a_change_systemd_does_not_load_as_written_fails_and_is_put_back(host: GpuHost) -> None:
    host.add_vllm(UNIT, ARGS, environment=ENV)
    # A drop-in that sorts after advisor's sets ExecStart again: advisor's change is lost.
    folder = host.units_dir / f"{UNIT}.d"
    folder.mkdir()
    (folder / "zzzz-late.conf").write_text(
        f"[Service]\nExecStart=\nExecStart={host.script} serve x --max-num-seqs 1024\n"
    )
    host.box.systemctl("daemon-reload")
    backend = host.backend()
    with pytest.raises(BackendError, match=r"--max-num-seqs 1024 in force.*zzzz.*put back"):
        run(backend, step("set_flag", flag="--max-num-seqs", value=512))
    assert not (folder / ADVISOR_DROPIN).exists()
    assert backend.observe(UNIT).need_daemon_reload is False


def test_hardening_changes_only_what_changes_something(host: GpuHost) -> None:
    host.add_vllm(UNIT, ARGS, environment=ENV, timeout_stop_sec="5s")
    backend = host.backend()
    now = backend.observe(UNIT)
    assert now.timeout_stop_s == 5.0 and now.kill_mode == "control-group"
    shorter = judge(step("set_unit_option", option="TimeoutStopSec", value="30s"), now, Context())
    same = judge(step("set_unit_option", option="KillMode", value="control-group"), now, Context())
    assert (shorter.action, same.action) == ("skip", "skip")
    assert "already 5 s" in shorter.why
    host.add_vllm(UNIT, ARGS, environment=ENV, timeout_stop_sec="90s", kill_mode="mixed")
    now = backend.observe(UNIT)
    for option, value in (("TimeoutStopSec", "30s"), ("KillMode", "control-group")):
        s = step("set_unit_option", option=option, value=value)
        assert judge(s, now, Context()).action == "run"
        run(backend, s)
    after = backend.observe(UNIT)
    assert (after.timeout_stop_s, after.kill_mode) == (30.0, "control-group")


def test_a_kill_never_touches_an_invocation_it_was_not_made_for(host: GpuHost) -> None:
    host.add_vllm(UNIT, ARGS, environment=ENV)
    backend = host.backend()
    host.box.systemctl("start", UNIT)
    now = backend.observe(UNIT)
    assert now.running and now.invocation_id
    stale = judge(step("kill", invocation_id="0" * 32), now, Context())
    assert stale.action == "skip" and "not to be killed" in stale.why
    assert judge(step("kill", invocation_id=now.invocation_id), now, Context()).action == "run"


def test_the_start_limit_is_cleared_before_a_restart(host: GpuHost) -> None:
    host.add_vllm(
        UNIT,
        ["serve", "${MODEL}", "--max-num-seqs", "1024", "--tensor-parallel-size", "4"],
        environment={**ENV, "ADVISOR_SIM_SPEED": "400"},
        restart="always",
        restart_sec="50ms",
        start_limit_burst=3,
        start_limit_interval_sec="60s",
    )
    backend = host.backend()
    host.box.systemctl("start", UNIT)
    wait_for(
        "the start limit",
        lambda: (
            "Start request repeated too quickly" in host.box.journalctl("-u", UNIT, "-o", "cat")
        ),
    )
    # Not the last line systemctl prints: systemd's own words, and what clears it.
    with pytest.raises(
        BackendError,
        match=r"Start request repeated too quickly.*start limit "
        r"was hit.*StartLimitBurst=3.*reset-failed clears it",
    ):
        run(backend, step("restart", seconds=10))
    run(backend, step("reset_failed"))
    assert backend.observe(UNIT).active_state == "inactive"
    host.add_vllm(UNIT, ARGS, environment=ENV, start_limit_burst=3, start_limit_interval_sec="60s")
    run(backend, step("wait_gpu_free", seconds=30, gpus=[0, 1, 2, 3]))
    assert "ready after" in run(backend, step("restart", seconds=60))


def test_a_restart_counts_only_when_the_new_invocation_is_ready(host: GpuHost) -> None:
    host.add_vllm(UNIT, ARGS, environment=ENV)
    backend = host.backend()
    detail = run(backend, step("restart", seconds=60))
    assert "ready after" in detail and "Application startup complete" in detail
    after = backend.observe(UNIT)
    assert after.running and after.invocation_id is not None
    # A configuration that cannot start: the step fails, it does not wait out its bound.
    host.add_vllm(
        UNIT,
        ["serve", "${MODEL}", "--max-num-seqs", "1024", "--tensor-parallel-size", "4"],
        environment=ENV,
    )
    began = time.monotonic()
    with pytest.raises(BackendError, match="did not come up"):
        run(backend, step("restart", seconds=120))
    assert time.monotonic() - began < 60


def test_wait_gpu_free_polls_the_gpus_until_memory_is_back(host: GpuHost) -> None:
    host.add_vllm(UNIT, ARGS, environment=ENV)
    backend = host.backend()
    run(backend, step("restart", seconds=60))
    assert host.twin().used_by(UNIT) > 0
    host.box.systemctl("kill", "--signal=SIGKILL", UNIT)
    wait_for("the unit to die", lambda: not backend.observe(UNIT).running)
    began = time.monotonic()
    detail = run(backend, step("wait_gpu_free", seconds=30, gpus=[0, 1, 2, 3]))
    waited = time.monotonic() - began
    assert "free, 3 samples in a row" in detail
    assert waited >= 0.5 and host.twin().used_by(UNIT) == 0  # the driver's delay, not at once
    no_gpus = SystemdBackend(bus=backend.bus, root=backend.root)  # the bus: closed by host
    with pytest.raises(BackendError, match="cannot tell when"):
        no_gpus.perform(step("wait_gpu_free", seconds=1), None, None)


def test_hold_restarts_stops_a_crash_loop_and_the_restart_lifts_it(host: GpuHost) -> None:
    host.add_vllm(
        UNIT,
        ["serve", "${MODEL}", "--max-num-seqs", "1024", "--tensor-parallel-size", "4"],
        environment=ENV,
        restart="on-failure",
        restart_sec="1s",
    )
    backend = host.backend()
    host.box.systemctl("start", UNIT)
    wait_for("a restart", lambda: backend.observe(UNIT).n_restarts >= 1)
    run(backend, step("hold_restarts"))
    held = backend.observe(UNIT)
    assert held.held and held.restart == "no" and held.stopped and not held.running
    time.sleep(1.5)
    assert backend.observe(UNIT).stopped  # nothing restarted it
    run(backend, step("set_flag", flag="--max-num-seqs", value=256))
    run(backend, step("restart", seconds=60))
    after = backend.observe(UNIT)
    assert not after.held and after.restart == "on-failure" and after.running
    assert not (host.units_dir / f"{UNIT}.d" / HOLD_DROPIN).exists()


STOP_SLOWLY = (
    "/bin/sh -c 'trap \"sleep {delay}; exit 0\" TERM; echo armed; while :; do sleep 0.1; done'"
)
# Ignores SIGTERM, and so do its children (an ignored signal stays ignored across exec): with
# SendSIGKILL=no nothing ever stops it, however systemd's second (final) SIGTERM falls.
STOP_NEVER = "/bin/sh -c 'trap \"\" TERM; echo armed; while :; do sleep 0.1; done'"


def start_armed(host: GpuHost, unit: str) -> None:
    """Start a STOP_SLOWLY or STOP_NEVER unit and wait until its shell has set the trap: a
    SIGTERM that came before would end it at once (systemctl start returns at the fork)."""
    host.box.systemctl("start", unit)
    wait_for(
        f"{unit} to set its trap", lambda: "armed" in host.box.journalctl("-u", unit, "-o", "cat")
    )


def test_a_stop_is_bounded_by_the_units_own_timeout(host: GpuHost) -> None:
    unit = "slow-stop.service"
    host.box.install(
        unit, "[Service]\nExecStart=" + STOP_SLOWLY.format(delay=3) + "\nTimeoutStopSec=infinity\n"
    )
    start_armed(host, unit)
    backend = host.backend(stop_ceiling_s=60.0)
    began = time.monotonic()
    detail = backend.perform(ActionStep(kind="stop", unit=unit, why="t"), None, None).detail
    assert "stopped slow-stop.service" in detail and time.monotonic() - began >= 2.5
    # A stop that outlasts the unit's own bound fails and says systemd's job goes on.
    stuck = "stuck-stop.service"
    host.box.install(
        stuck, "[Service]\nExecStart=" + STOP_NEVER + "\nTimeoutStopSec=1s\nSendSIGKILL=no\n"
    )
    start_armed(host, stuck)
    quick = host.backend(stop_margin_s=1.0)
    with pytest.raises(
        BackendError,
        match=r"(stop job is still running after 3 s|process\(es\) "
        r"of the unit are left 3 s later)",
    ):
        quick.perform(ActionStep(kind="stop", unit=stuck, why="t"), None, None)


@pytest.mark.slow
def test_a_stop_longer_than_two_minutes_is_waited_for(host: GpuHost) -> None:
    unit = "very-slow-stop.service"
    host.box.install(
        unit, "[Service]\nExecStart=" + STOP_SLOWLY.format(delay=125) + "\nTimeoutStopSec=200s\n"
    )
    start_armed(host, unit)
    backend = host.backend()
    began = time.monotonic()
    detail = backend.perform(ActionStep(kind="stop", unit=unit, why="t"), None, None).detail
    assert time.monotonic() - began >= 124 and "inactive" in detail


def test_rollback_restores_the_file_and_only_in_order(host: GpuHost) -> None:
    host.add_vllm(UNIT, ARGS, environment=ENV)
    backend = host.backend()
    first = step("set_flag", flag="--max-num-seqs", value=128)
    before = backend.observe(UNIT)
    change = backend.prepare(first, before)
    assert change is not None and change.previous is None
    backend.perform(first, before, change)
    assert backend.observe(UNIT).exec_start[0].argv[-1] == "128"
    backend.restore(change)
    assert list(backend.observe(UNIT).exec_start[0].argv[1:]) == ARGS
    assert not (host.units_dir / f"{UNIT}.d" / ADVISOR_DROPIN).exists()
