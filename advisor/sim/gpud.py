"""The simulated GPU driver as a daemon, for servers run by a real service manager:

    python -m advisor.sim.gpud --claims DIR --view FILE --gpus N --gpu-gib G \\
        --release-delay S [--interval 0.2] [--recording FILE] [--host NAME]

Run it in the same PID namespace as the servers it watches (a unit beside them). Every
``--interval`` seconds it reads the claims the servers write (``advisor.sim.claims``), lists each
new claimant under the systemd unit of its cgroup and its ``comm``, notes as dead every claimant
without a ``/proc/PID`` or that is a zombie, frees a dead process's claims ``--release-delay``
seconds after it died (``advisor.sim.gpus.Driver``, the logic ``SimNode`` uses in-process), and
replaces ``--view`` atomically with what NVML would report now: one NVML recording line
(``ingest.gpu_recording``; per GPU its index, uuid, name, total / used / free bytes, and the
processes with their PID, bytes, unit and comm), read by ``advisor.sim.nvml_twin.TwinSampler``.
With ``--recording`` every sample is also appended there, for ``advisor ingest gpu --replay``.
It keeps the claims of live processes found at start (it may be restarted under running
servers). Stops on SIGTERM or SIGINT, exit status 0.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from advisor.core.host import this_host
from advisor.core.payloads import GpuSampled
from advisor.sim.gpus import Driver
from ingest.cgroup import comm_for_pid, unit_for_pid
from ingest.gpu_recording import recording_line

PROC = Path("/proc")


def alive(pid: int, proc_root: Path = PROC) -> bool:
    """The process exists and is not a zombie (its memory goes with its death, not its reaping)."""
    try:
        stat = (proc_root / str(pid) / "stat").read_bytes()
    except OSError:
        return False
    state = stat[stat.rfind(b")") + 2 :][:1]
    return state not in (b"Z", b"X", b"")


def owner(pid: int, proc_root: Path = PROC) -> tuple[str | None, str | None]:
    """(unit, comm) of a live process, as NVML consumers attribute it."""
    return unit_for_pid(pid, proc_root), comm_for_pid(pid, proc_root)


def write_view(view: Path, time_us: int, host: str, samples: list[GpuSampled]) -> None:
    """Replace ``view`` with one recording line (write then rename: never half a file)."""
    tmp = view.with_name(f".{view.name}.{os.getpid()}.tmp")
    tmp.write_bytes(recording_line(time_us, host, samples))
    os.replace(tmp, view)


class Daemon:
    """One tick at a time: notice deaths, release what is due, sample, publish."""

    def __init__(
        self, driver: Driver, view: Path, interval_s: float, proc_root: Path = PROC
    ) -> None:
        self.driver = driver
        self.view = view
        self.interval_s = interval_s
        self.proc_root = proc_root
        self.stop = threading.Event()

    def tick(self) -> None:
        now = time.time()
        d = self.driver
        d.watch(now, lambda pid: alive(pid, self.proc_root), lambda pid: owner(pid, self.proc_root))
        d.release_due(now)
        samples = d.sample(now)
        write_view(self.view, int(now * 1_000_000), d.host, samples)

    def run(self) -> None:
        while not self.stop.is_set():
            self.tick()
            wait = self.interval_s
            due = self.driver.next_release()
            if due is not None:
                wait = min(wait, max(0.0, due - time.time()))
            self.stop.wait(wait)

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stop.set()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m advisor.sim.gpud", description="The simulated GPU driver, as a daemon."
    )
    p.add_argument("--claims", type=Path, required=True, help="the servers' claims folder")
    p.add_argument("--view", type=Path, required=True, help="the NVML-like view to keep current")
    p.add_argument("--gpus", type=int, required=True, help="number of GPUs")
    p.add_argument("--gpu-gib", type=float, required=True, help="memory of each GPU")
    p.add_argument(
        "--release-delay",
        type=float,
        required=True,
        help="seconds after a process's death until its memory is free",
    )
    p.add_argument("--interval", type=float, default=0.2, help="seconds between samples")
    p.add_argument("--recording", type=Path, help="also append NVML recording lines here")
    p.add_argument("--host", help="host name in the samples (default: this host's)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    a = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if a.gpus < 1 or a.gpu_gib <= 0 or a.release_delay < 0 or a.interval <= 0:
        parser.error("--gpus, --gpu-gib and --interval must be positive, --release-delay >= 0")
    driver = Driver(
        a.claims,
        a.recording,
        host=a.host or this_host(),
        count=a.gpus,
        gpu_gib=a.gpu_gib,
        clock=time.time,
        release_delay_s=a.release_delay,
        clear=False,
    )
    a.view.parent.mkdir(parents=True, exist_ok=True)
    daemon = Daemon(driver, a.view, a.interval)
    print(
        f"simulated driver: {a.gpus} GPU(s) of {a.gpu_gib:g} GiB, memory freed "
        f"{a.release_delay:g} s after a process dies; claims {a.claims}, view {a.view}",
        flush=True,
    )
    signal.signal(signal.SIGTERM, daemon.on_signal)
    signal.signal(signal.SIGINT, daemon.on_signal)
    try:
        daemon.run()
    finally:
        driver.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
