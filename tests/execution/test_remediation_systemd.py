"""End to end on real systemd 252 (a box running the GPU driver and the stand-in vLLM as real
units): the seed crash loop fixed through `advisor remediate` and through `advisor watch
--auto`, a wedged stop, a KV-cache OOM, memory held by another unit, two executors at once, and
an executor killed mid-plan — each checked in the journal, in systemd's own state and in the
store. The advisor runs inside the box, as it does on a host: systemd's private socket,
/etc/systemd/system, the system journal; GPUs through the driver's NVML twin."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from advisor.pipeline.processing import Processor
from advisor.sim.gpuhost import GpuHost
from advisor.sim.models import MINIMAX_M25_FLAGS
from advisor.store import EventFilter, EventStore, open_store
from advisor.views.read.actions import all_actions
from advisor.views.read.reading import read_rows
from advisor.views.read.rows import ActionRow
from tests.boxproc import advisor_in, watching
from tests.conftest import ROOT
from tests.waiting import wait

UNIT = "vllm-minimax-m25.service"
SPEC = '{"method": "ngram", "num_speculative_tokens": 3}'
SIM = {
    "ADVISOR_SIM_VOCAB_SIZE": "200064",
    "ADVISOR_SIM_WEIGHTS_GIB": "230",
    "ADVISOR_SIM_SPEED": "16",
}
ENV = {"MODEL": "MiniMaxAI/MiniMax-M2.5", "API_KEY": "sk-x", **SIM}
# The seed's flags, with the arguments that used to come back corrupted around them.
SEED = [
    "serve",
    "${MODEL}",
    "--served-model-name",
    "minimax m25",
    "--speculative-config",
    SPEC,
    "--api-key",
    "${API_KEY}",
    "--chat-template",
    "/etc/vllm/it's.jinja",
    *MINIMAX_M25_FLAGS,
]
FITS = [a if a != "1024" else "256" for a in SEED]  # the seed with a max_num_seqs that fits
POLICY = (
    "min_confidence = 0.9\ncooldown_s = 0\nmax_actions_per_hour = 40\n[[allow]]\n"
    'units = "vllm-*.service"\nkinds = ["hold_restarts", "kill", "wait_gpu_free", '
    '"set_flag", "set_unit_option", "reset_failed", "restart", "stop"]\n'
)


@pytest.fixture
def host(gpu_host: GpuHost) -> GpuHost:
    return gpu_host


def crash_loop(
    host: GpuHost,
    *,
    args: list[str] = SEED,
    failures: int = 2,
    env: dict[str, str] | None = None,
    **unit: object,
) -> None:
    options: dict[str, object] = {
        "restart": "on-failure",
        "restart_sec": "2s",
        "timeout_stop_sec": "5s",
    } | unit
    host.add_vllm(UNIT, args, environment={**ENV, **(env or {})}, **options)
    host.box.systemctl("start", UNIT)
    wait(
        f"{failures} failed runs",
        lambda: (
            host.box.journalctl("-u", UNIT, "-o", "cat").count("Failed with result") >= failures
        ),
        timeout=60,
    )


def diagnosed(host: GpuHost, url: str) -> EventStore:
    store = open_store(url)
    host.ingest(store)
    Processor(store).run(final=False)
    return store


def last_argv(host: GpuHost) -> list[str]:
    return list(json.loads(host.argv_log.read_text().splitlines()[-1])["argv"][1:])


def value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def show(host: GpuHost, *props: str) -> dict[str, str]:
    return host.box.show(UNIT, *props)


def actions(store: EventStore) -> list[ActionRow]:
    return all_actions(store)  # with what the advisor processes appended meanwhile


def statuses(store: EventStore) -> list[tuple[str, str]]:
    return [(r.kind, r.status) for r in actions(store)]


def check_fixed(host: GpuHost, seqs: str = "256") -> None:
    """Running, ready, started with the new value and every other argument as written."""
    props = show(host, "ActiveState", "SubState")
    assert (props["ActiveState"], props["SubState"]) == ("active", "running")
    argv = last_argv(host)
    assert value(argv, "--max-num-seqs") == seqs
    assert argv[1] == "MiniMaxAI/MiniMax-M2.5" and value(argv, "--api-key") == "sk-x"
    assert value(argv, "--served-model-name") == "minimax m25"
    assert value(argv, "--speculative-config") == SPEC
    assert value(argv, "--chat-template") == "/etc/vllm/it's.jinja"
    assert value(argv, "--tensor-parallel-size") == "4"


def test_the_seed_crash_loop_is_fixed_with_manual_approval(host: GpuHost, sqlite_url: str) -> None:
    crash_loop(host)
    store = diagnosed(host, sqlite_url)
    (incident,) = read_rows(store, "incidents")
    assert incident["label"] == "sampler_warmup_oom"
    done = advisor_in(
        host.box,
        sqlite_url,
        "remediate",
        "vllm-minimax-m25",
        "--yes",
        "--gpus-from",
        str(host.view),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "plan done" in done.stdout
    check_fixed(host)
    dropins = show(host, "DropInPaths")["DropInPaths"].split()
    assert [Path(p).name for p in dropins] == ["zz-advisor.conf"]  # the hold is gone
    # Ready, and the store says so: the incident is resolved at the readiness line.
    store.close()
    store = diagnosed(host, sqlite_url)
    (incident,) = read_rows(store, "incidents")
    assert incident["status"] == "resolved"
    ready = [r for r in read_rows(store, "runs") if r["ready_us"] is not None]
    assert incident["resolved_us"] == ready[-1]["ready_us"]
    assert statuses(store) == [
        ("hold_restarts", "succeeded"),
        ("set_flag", "succeeded"),
        ("set_flag", "proposed"),
        ("wait_gpu_free", "succeeded"),
        ("reset_failed", "succeeded"),
        ("restart", "succeeded"),
    ]
    restart = next(r for r in actions(store) if r.kind == "restart")
    assert "Application startup complete" in (restart.detail or "")
    store.close()


def test_watch_auto_fixes_the_loop_and_never_kills_the_fixed_instance(
    host: GpuHost, sqlite_url: str, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    # Wedged on stop: the hold's stop of a doomed start hangs until systemd's 5 s SIGKILL,
    # and that wedge is a second incident whose plan starts with a kill.
    env = {**ENV, "ADVISOR_SIM_WEDGE_ON_STOP": "1"}
    with watching(
        host.box,
        sqlite_url,
        "--unit",
        "vllm-*.service",
        "--auto",
        "--policy",
        str(policy),
        "--gpus-from",
        str(host.view),
        command=("watch",),
    ) as watch:
        watch.wait_until_watching()
        host.add_vllm(
            UNIT,
            SEED,
            environment=env,
            restart="on-failure",
            restart_sec="500ms",
            timeout_stop_sec="5s",
        )
        host.box.systemctl("start", UNIT)

        def fixed() -> bool:
            return (
                host.argv_log.exists()
                and "256" in last_argv(host)
                and show(host, "ActiveState")["ActiveState"] == "active"
                and "Application startup complete"
                in host.box.journalctl(
                    f"_SYSTEMD_INVOCATION_ID={show(host, 'InvocationID')['InvocationID']}",
                    "-o",
                    "cat",
                )
            )

        wait("the fixed service", fixed, watch.proc, timeout=120)
        pid = show(host, "MainPID")["MainPID"]
        time.sleep(3)  # what auto does next must not touch it
        assert show(host, "MainPID")["MainPID"] == pid
        assert watch.stop() == 0
    check_fixed(host)
    killed = host.box.journalctl("-u", UNIT, "-o", "cat")
    assert f"Killing process {pid} " not in killed
    store = open_store(sqlite_url)
    kinds = statuses(store)
    assert ("restart", "succeeded") in kinds
    assert ("kill", "succeeded") not in kinds or all(
        r.status != "succeeded" or (r.state_after or {}).get("main_pid") != int(pid)
        for r in actions(store)
        if r.kind == "kill"
    )
    store.close()


def test_a_wedged_stop_is_diagnosed_and_its_plan_changes_only_what_changes_something(
    host: GpuHost, sqlite_url: str
) -> None:
    host.add_vllm(
        UNIT,
        FITS,
        environment={**ENV, "ADVISOR_SIM_WEDGE_ON_STOP": "1"},
        timeout_stop_sec="5s",
        kill_mode="mixed",
    )
    host.box.systemctl("start", UNIT)
    wait(
        "ready",
        lambda: "Application startup complete" in host.box.journalctl("-u", UNIT, "-o", "cat"),
        timeout=60,
    )
    began = time.monotonic()
    host.box.systemctl("stop", UNIT)  # wedges; systemd SIGKILLs it after TimeoutStopSec=5
    assert time.monotonic() - began >= 4.5
    assert "State 'stop-sigterm' timed out. Killing." in host.box.journalctl(
        "-u", UNIT, "-o", "cat"
    )
    store = diagnosed(host, sqlite_url)
    assert [i["label"] for i in read_rows(store, "incidents")] == ["wedged_stop"]
    done = advisor_in(
        host.box, sqlite_url, "remediate", UNIT, "--yes", "--gpus-from", str(host.view)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # systemd had killed it: nothing to kill; 5 s is already shorter than 30 s; mixed → cgroup
    assert statuses(store) == [
        ("kill", "skipped"),
        ("wait_gpu_free", "succeeded"),
        ("set_unit_option", "skipped"),
        ("set_unit_option", "succeeded"),
    ]
    props = show(host, "KillMode", "TimeoutStopUSec", "ActiveState")
    assert (props["KillMode"], props["TimeoutStopUSec"], props["ActiveState"]) == (
        "control-group",
        "5s",
        "failed",
    )
    store.close()


def test_a_kv_cache_oom_is_fixed_from_the_stated_capacity(host: GpuHost, sqlite_url: str) -> None:
    args = [*SEED]
    args[args.index("131072")] = "4194304"
    args[args.index("1024")] = "256"
    crash_loop(host, args=args)
    store = diagnosed(host, sqlite_url)
    assert read_rows(store, "incidents")[0]["label"] == "kv_cache_oom"
    done = advisor_in(
        host.box, sqlite_url, "remediate", UNIT, "--yes", "--gpus-from", str(host.view)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    length = int(value(last_argv(host), "--max-model-len"))
    assert length < 4194304 and length % 1024 == 0
    assert show(host, "ActiveState")["ActiveState"] == "active"
    store.close()


def test_memory_held_by_another_unit_is_freed_by_stopping_that_unit(
    host: GpuHost, sqlite_url: str
) -> None:
    other = "notebook.service"
    host.add_vllm(
        other,
        ["serve", "Qwen/Qwen2.5-7B", "--max-model-len", "8192", "--tensor-parallel-size", "4"],
        environment=SIM,
    )
    host.box.systemctl("start", other)
    wait(
        "the other unit ready",
        lambda: "Application startup complete" in host.box.journalctl("-u", other, "-o", "cat"),
        timeout=60,
    )
    crash_loop(host, args=FITS)
    store = diagnosed(host, sqlite_url)
    incident = next(i for i in read_rows(store, "incidents") if i["unit"] == UNIT)
    assert incident["label"] == "gpu_memory_held"
    done = advisor_in(
        host.box, sqlite_url, "remediate", UNIT, "--yes", "--gpus-from", str(host.view)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert host.box.show(other, "ActiveState")["ActiveState"] in ("inactive", "failed")
    assert show(host, "ActiveState")["ActiveState"] == "active"
    stop = next(r for r in actions(store) if r.kind == "stop")
    assert (stop.unit, stop.status) == (other, "succeeded")
    store.close()


def test_two_executors_at_once_run_each_step_once(host: GpuHost, sqlite_url: str) -> None:
    crash_loop(host)
    diagnosed(host, sqlite_url).close()
    args = ("remediate", UNIT, "--yes", "--gpus-from", str(host.view))
    results: list[subprocess.CompletedProcess[str]] = []
    both = [
        threading.Thread(target=lambda: results.append(advisor_in(host.box, sqlite_url, *args)))
        for _ in range(2)
    ]
    for t in both:
        t.start()
    for t in both:
        t.join(240)
    outputs = " | ".join(r.stdout + r.stderr for r in results)
    assert sorted(r.returncode for r in results) in ([0, 0], [0, 1]), outputs
    store = open_store(sqlite_url)
    started = [e.payload for e in store.read(EventFilter(type="action.started"))]
    ids = [getattr(p, "action_id", "") for p in started]
    assert len(ids) == len(set(ids)), "a step started twice"
    assert not list(store.read(EventFilter(type="action.failed"))), outputs
    held = [
        p
        for p in started
        if getattr(p, "dropin", None) and str(getattr(p, "dropin", "")).endswith("zz-advisor.conf")
    ]
    assert all(getattr(p, "had_previous", None) is False for p in held)  # never its own copy
    stops = host.box.journalctl("-u", UNIT, "-o", "cat").count("Stopping ")
    assert stops <= 1
    check_fixed(host)
    store.close()


def test_a_restart_that_does_not_come_up_fails_the_plan_and_offers_rollback(
    host: GpuHost, sqlite_url: str
) -> None:
    crash_loop(host)
    store = diagnosed(host, sqlite_url)
    plan = read_rows(store, "incidents")[0]["incident_id"]
    # Someone else's drop-in makes every start fail, whatever advisor sets.
    folder = host.units_dir / f"{UNIT}.d"
    folder.mkdir(exist_ok=True)
    (folder / "99-broken.conf").write_text("[Service]\nEnvironment=ADVISOR_SIM_GPU_GIB=1\n")
    host.box.systemctl("daemon-reload")
    done = advisor_in(
        host.box, sqlite_url, "remediate", UNIT, "--yes", "--gpus-from", str(host.view)
    )
    assert done.returncode == 1 and "did not come up" in done.stdout, done.stdout + done.stderr
    assert f"`advisor rollback {plan}#1`" in done.stdout
    undone = advisor_in(host.box, sqlite_url, "rollback", f"{plan}#1")
    assert undone.returncode == 0, undone.stdout + undone.stderr
    argv = host.box.show(UNIT, "ExecStart")["ExecStart"]
    assert "--max-num-seqs 1024" in argv
    assert "zz-advisor.conf" not in show(host, "DropInPaths")["DropInPaths"]
    store.close()


def test_a_dropin_written_but_not_recorded_is_found_and_rolled_back(
    host: GpuHost, sqlite_url: str, tmp_path: Path
) -> None:
    crash_loop(host)
    store = diagnosed(host, sqlite_url)
    plan = read_rows(store, "incidents")[0]["incident_id"]
    kill_executor_at(host, sqlite_url, plan, "1", "performed", tmp_path)
    assert "--max-num-seqs 256" in host.box.show(UNIT, "ExecStart")["ExecStart"]
    time.sleep(1.2)
    listed = json.loads(advisor_in(host.box, sqlite_url, "actions", "--json").stdout)
    step = next(r for r in listed if r["action_id"] == f"{plan}#1")
    assert step["status"] == "started" and step["dropin"].endswith("zz-advisor.conf")
    undone = advisor_in(host.box, sqlite_url, "rollback", f"{plan}#1")
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert "--max-num-seqs 1024" in host.box.show(UNIT, "ExecStart")["ExecStart"]
    store.close()


DRIVER = """
import os, signal, sys
from pathlib import Path
from advisor.pipeline.backend_setup import systemd_backend
from advisor.execution.decisions import approve
from advisor.execution.run import Executor
from advisor.store import open_store

url, plan, step, phase, view = sys.argv[1:6]
store = open_store(url)
approve(store, plan, "human:test")

def hook(at, action_id):
    if at == phase and action_id.endswith("#" + step):
        os.kill(os.getpid(), signal.SIGKILL)

backend = systemd_backend(Path("/etc/systemd/system"), gpu_twin=Path(view))
Executor(store, backend, hook=hook, lease_ttl_s=1.0).run(plan)
"""


def kill_executor_at(
    host: GpuHost, url: str, plan: str, step: str, phase: str, folder: Path
) -> None:
    """Run the plan in a process inside the box that SIGKILLs itself at `phase` of `step`."""
    driver = folder / "driver.py"
    driver.write_text(DRIVER)
    killed = subprocess.run(
        host.box.nsenter_argv(
            [sys.executable, str(driver), url, plan, step, phase, str(host.view)]
        ),
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr


@pytest.mark.parametrize(
    ("step", "phase"),
    [("0", "performed"), ("1", "started"), ("3", "started"), ("4", "performed"), ("5", "started")],
)
def test_an_executor_killed_at_any_step_leaves_the_unit_recoverable(
    host: GpuHost, sqlite_url: str, tmp_path: Path, step: str, phase: str
) -> None:
    crash_loop(host)
    store = diagnosed(host, sqlite_url)
    plan = read_rows(store, "incidents")[0]["incident_id"]
    kill_executor_at(host, sqlite_url, plan, step, phase, tmp_path)
    time.sleep(1.2)  # its lease lapses
    # The next executor finds the step interrupted, lifts the hold, proposes anew...
    first = advisor_in(
        host.box, sqlite_url, "remediate", UNIT, "--yes", "--gpus-from", str(host.view)
    )
    assert first.returncode == 1 and "interrupted" in first.stdout, first.stdout + first.stderr
    assert "zzz-advisor-hold.conf" not in show(host, "DropInPaths")["DropInPaths"]
    # ...and that plan runs to a fixed service, skipping what is already done.
    again = advisor_in(
        host.box, sqlite_url, "remediate", UNIT, "--yes", "--gpus-from", str(host.view)
    )
    assert again.returncode == 0, again.stdout + again.stderr
    check_fixed(host)
    rows = actions(store)
    interrupted = [r for r in rows if r.status == "failed"]
    assert len(interrupted) == 1 and interrupted[0].action_id == f"{plan}#{step}"
    assert "interrupted" in (interrupted[0].detail or "")
    started = [
        getattr(e.payload, "action_id", "") for e in store.read(EventFilter(type="action.started"))
    ]
    assert len(started) == len(set(started))
    store.close()
