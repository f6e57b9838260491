"""Time to recovery under real systemd: the seed's first crash to the fixed service ready.

    .venv/bin/python bench/recovery.py [--runs 3]

Boots systemd in a box (`advisor.sim.box`, needs root) with the simulated GPU driver and the
seed's vLLM unit (sampler warm-up OOM at --max-num-seqs 1024, Restart=on-failure,
RestartSec=3s, the driver freeing a dead process's memory 2 s later), and runs
`advisor watch --auto --policy` inside the box, as a host runs it. Measured from the journal
and the store:

* total: the first "Main process exited" → "Application startup complete." of the fixed
  invocation (the readiness line: time to recovery as the incident records it);
* crash → plan: the first crash → the plan's `action.proposed` committed;
* each step: its `action.started` → its outcome, as the executor recorded them;
* the advisor's own share: the CPU time the watch process used (user + system) over the
  same span — the rest is systemd, the server starting and the driver releasing memory.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from advisor.demo.systemd import ARGS, UNIT  # noqa: E402
from advisor.sim.box import unavailable  # noqa: E402
from advisor.sim.gpuhost import GpuHost  # noqa: E402
from advisor.store import EventFilter, open_store  # noqa: E402

ENV = {
    "MODEL": "MiniMaxAI/MiniMax-M2.5",
    "ADVISOR_SIM_VOCAB_SIZE": "200064",
    "ADVISOR_SIM_WEIGHTS_GIB": "230",
    "ADVISOR_SIM_SPEED": "8",
}
POLICY = (
    "min_confidence = 0.9\ncooldown_s = 0\nmax_actions_per_hour = 40\n[[allow]]\n"
    'units = "vllm-*.service"\nkinds = ["hold_restarts", "kill", "wait_gpu_free", '
    '"set_flag", "set_unit_option", "reset_failed", "restart", "stop"]\n'
)


def _journal_us(host: GpuHost, *match: str, text: str) -> int | None:
    import orjson

    out = host.box.journalctl(*match, "-o", "json")
    for line in out.splitlines():
        entry = orjson.loads(line)
        message = entry.get("MESSAGE")
        if isinstance(message, list):
            message = bytes(message).decode("utf-8", "replace")
        if isinstance(message, str) and text in message:
            return int(entry["__REALTIME_TIMESTAMP"])
    return None


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _until_recorded(db: str, kind: str, deadline: float) -> None:
    """The readiness line can be in the journal a moment before the executor records it."""
    while time.monotonic() < deadline:
        store = open_store(db)
        try:
            kinds = {
                str(getattr(e.payload, "action_id", "")): str(getattr(e.payload, "kind", ""))
                for e in store.read(EventFilter(type="action.proposed"))
            }
            done = {
                str(getattr(e.payload, "action_id", ""))
                for e in store.read(EventFilter(type="action.succeeded"))
            }
        finally:
            store.close()
        if any(kinds.get(a) == kind for a in done):
            return
        time.sleep(0.2)


def one_run(folder: Path) -> dict[str, Any]:
    db = f"sqlite:///{folder / 'events.db'}"
    policy = folder / "policy.toml"
    folder.mkdir(parents=True, exist_ok=True)
    policy.write_text(POLICY)
    with GpuHost(folder / "host", hostname="gpu-node-07", release_delay_s=2.0) as host:
        argv = host.box.nsenter_argv(
            [
                sys.executable,
                "-m",
                "advisor",
                "watch",
                "--unit",
                "vllm-*.service",
                "--auto",
                "--policy",
                str(policy),
                "--gpus-from",
                str(host.view),
            ]
        )
        watch = subprocess.Popen(
            argv,
            env={**os.environ, "ADVISOR_DB": db, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            while True:  # nsenter forks the watcher: its child is the advisor process
                kids = Path(f"/proc/{watch.pid}/task/{watch.pid}/children").read_text().split()
                if kids:
                    advisor_pid = int(kids[0])
                    break
                time.sleep(0.01)
            time.sleep(1.5)  # watching
            cpu_before = _cpu_s(advisor_pid)
            host.add_vllm(
                UNIT,
                list(ARGS),
                environment=ENV,
                restart="on-failure",
                restart_sec="3s",
                timeout_stop_sec="5s",
            )
            host.box.systemctl("start", UNIT)
            deadline = time.monotonic() + 180
            ready_us = None
            while ready_us is None and time.monotonic() < deadline:
                time.sleep(0.5)
                inv = host.box.show(UNIT, "InvocationID", "ExecStart")
                if "--max-num-seqs 256" in inv["ExecStart"] and inv["InvocationID"]:
                    ready_us = _journal_us(
                        host,
                        f"_SYSTEMD_INVOCATION_ID={inv['InvocationID']}",
                        text="Application startup complete",
                    )
            cpu = _cpu_s(advisor_pid) - cpu_before
            _until_recorded(db, "restart", time.monotonic() + 30)
            crash_us = _journal_us(host, "_PID=1", f"UNIT={UNIT}", text="Main process exited")
        finally:
            if watch.poll() is None:
                os.kill(advisor_pid, signal.SIGTERM)
            watch.wait(timeout=60)
            assert watch.stderr is not None
            watch.stderr.close()
    if ready_us is None or crash_us is None:
        raise SystemExit("the service did not recover within 180 s")
    store = open_store(db)
    events = list(store.read(EventFilter()))
    proposed = min(e.recorded_us for e in events if e.type == "action.proposed")
    steps: dict[str, dict[str, int]] = {}
    for e in events:
        if e.type in ("action.started", "action.succeeded", "action.skipped", "action.failed"):
            action = str(getattr(e.payload, "action_id", ""))
            steps.setdefault(action, {})[e.type.split(".")[1]] = e.recorded_us
    kinds = {
        str(getattr(e.payload, "action_id", "")): str(getattr(e.payload, "kind", ""))
        for e in events
        if e.type == "action.proposed"
    }
    store.close()
    timed = []
    for action, t in steps.items():
        end = t.get("succeeded") or t.get("skipped") or t.get("failed")
        if end and "started" in t:
            timed.append((kinds.get(action, action), (end - t["started"]) / 1e6))
    return {
        "total_s": (ready_us - crash_us) / 1e6,
        "crash_to_plan_s": (proposed - crash_us) / 1e6,
        "steps": timed,
        "advisor_cpu_s": cpu,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    reason = unavailable()
    if reason is not None:
        raise SystemExit(f"bench/recovery.py needs a systemd box: {reason}")
    results = []
    with tempfile.TemporaryDirectory(prefix="advisor-recovery-") as tmp:
        for i in range(args.runs):
            r = one_run(Path(tmp) / f"run{i}")
            results.append(r)
            steps = ", ".join(f"{k} {s:.2f}" for k, s in r["steps"])
            print(
                f"run {i + 1}: first crash → ready {r['total_s']:.2f} s; crash → plan "
                f"{r['crash_to_plan_s']:.2f} s; advisor CPU {r['advisor_cpu_s']:.2f} s "
                f"({100 * r['advisor_cpu_s'] / r['total_s']:.1f}%); steps (s): {steps}"
            )
    totals = sorted(r["total_s"] for r in results)
    cpu = sorted(r["advisor_cpu_s"] for r in results)
    print(
        f"median: first crash → fixed service ready {totals[len(totals) // 2]:.2f} s, of "
        f"which the advisor's own CPU {cpu[len(cpu) // 2]:.2f} s "
        f"({100 * cpu[len(cpu) // 2] / totals[len(totals) // 2]:.1f}%)"
    )


if __name__ == "__main__":
    main()
