"""``SimNode``: a GPU host in a folder — GPUs and their driver, a service manager with systemd
semantics (``advisor.sim.manager``), and the stand-in vLLM server (``advisor.sim.server``) as
real processes.

What it writes under ``root`` is what a real host gives the advisor:

* ``journal.jsonl`` — ``journalctl -o json`` lines: PID 1's lifecycle messages (systemd 252,
  the sequences of docs/systemd.md) and each service's stdout;
* ``gpus.jsonl`` — NVML recordings (``advisor ingest gpu --replay``);
* ``claims/`` — the driver's view of who holds GPU memory (internal).

Time is real (the processes are), so nothing runs between calls: ``step()`` processes what
happened since the last call (output, deaths, stop timeouts, restart timers, memory release,
sampling); ``run_for`` / ``run_until`` step in a loop. Every public operation steps first, so
what it sees is current, and the blocking ones (``stop``, ``restart``) keep stepping until the
job is done — as ``systemctl stop`` blocks. Drive a node from one thread.

Semantics kept from systemd: ``Type=simple`` (``Started`` at fork); ``Restart=`` policies with
``RestartSec=`` and the restart counter (reset by an explicit start and by ``reset-failed``);
the start rate limit; a stop job sends SIGTERM (+SIGCONT) per ``KillMode=`` and SIGKILL after
``TimeoutStopSec=`` with result ``timeout``; ``kill`` only signals, then ordinary death
handling applies; no restart after an explicit stop; an exit on SIGTERM or with 0 is clean.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType

from advisor.sim import process
from advisor.sim.gpus import DEFAULT_GPU_NAME, Driver
from advisor.sim.journal import JournalWriter
from advisor.sim.manager import ManagedUnit, ServiceManager
from advisor.sim.units import (
    UnitSpec,
    UnitState,
    check_option,
    parse_signal,
    parse_timespan,
    set_flag,
)

POLL_S = 0.02


def wall_clock() -> Callable[[], float]:
    """Wall-clock seconds that never go backwards (epoch now + monotonic time elapsed)."""
    base, start = time.time(), time.monotonic()
    return lambda: base + (time.monotonic() - start)


class SimNode:
    """A simulated GPU host rooted at ``root`` (created if missing)."""

    def __init__(
        self,
        root: Path,
        *,
        host: str = "sim-node-07",
        gpus: int = 8,
        gpu_gib: float = 96.0,
        release_delay_s: float = 5.0,
        sample_interval_s: float = 1.0,
        clock: Callable[[], float] | None = None,
        gpu_name: str = DEFAULT_GPU_NAME,
    ) -> None:
        self.root = root
        self.host = host
        self.gpu_count = gpus
        self.gpu_gib = gpu_gib
        self.sample_interval_s = sample_interval_s
        self.clock = clock or wall_clock()
        root.mkdir(parents=True, exist_ok=True)
        self.journal = JournalWriter(root / "journal.jsonl", host=host, clock=self.clock)
        try:
            self.driver = Driver(
                root / "claims",
                root / "gpus.jsonl",
                host=host,
                count=gpus,
                gpu_gib=gpu_gib,
                clock=self.clock,
                release_delay_s=release_delay_s,
                gpu_name=gpu_name,
            )
        except BaseException:
            self.journal.close()
            raise
        self._manager = ServiceManager(self.journal, self.driver, self.clock, gpu_gib)
        self._next_sample = self.clock()
        self._closed = False

    # ------------------------------------------------------------------ files
    @property
    def journal_path(self) -> Path:
        return self.journal.path

    @property
    def gpus_path(self) -> Path:
        return self.root / "gpus.jsonl"

    @property
    def claims_dir(self) -> Path:
        return self.driver.claims_dir

    # ------------------------------------------------------------------ lifetime
    def __enter__(self) -> SimNode:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """SIGKILL every process still running, reap them, close the files."""
        if self._closed:
            return
        self._closed = True
        try:
            self._manager.kill_all()
        finally:
            self.journal.close()
            self.driver.close()

    # ------------------------------------------------------------------ units
    def add_unit(self, spec: UnitSpec) -> None:
        """Install a unit (as a unit file plus ``daemon-reload``); it starts inactive."""
        if spec.name in self._manager.units:
            raise ValueError(f"unit {spec.name} exists")
        bad = [g for g in spec.gpus if not 0 <= g < self.gpu_count]
        if bad:
            raise ValueError(f"{spec.name}: no GPU {bad[0]} on this node")
        self._manager.add(spec)

    def units(self) -> list[str]:
        return list(self._manager.units)

    def _unit(self, name: str) -> ManagedUnit:
        return self._manager.unit(name)

    def _state(self, u: ManagedUnit) -> UnitState:
        return self._manager.state(u)

    # ------------------------------------------------------------------ operations
    def start(self, unit: str) -> UnitState:
        """``systemctl start``: returns once the process is forked (Type=simple). Clears a
        restart hold and the restart counter; nothing happens if it is already active."""
        self.step()
        u = self._unit(unit)
        if u.child is None:
            u.held = False
            u.restart_at = None
            u.n_restarts = 0
            self._manager.start_job(u)
        return self._state(u)

    def stop(self, unit: str, *, wait: bool = True, bound_s: float | None = None) -> UnitState:
        """``systemctl stop``: SIGTERM per KillMode=, SIGKILL after TimeoutStopSec=. Blocks
        until the stop job is done (or ``bound_s`` passed) unless ``wait`` is False."""
        self.step()
        u = self._unit(unit)
        self._manager.begin_stop(u, "stop")
        if wait:
            self.run_until(lambda: u.stop_job is None, bound_s)
        return self._state(u)

    def kill(self, unit: str, signal: str | int = "SIGKILL", *, whom: str = "all") -> UnitState:
        """``systemctl kill --signal=S [--kill-whom=main|all]``: only sends the signal; what
        follows is the ordinary reaction to the process's death (on later steps)."""
        self.step()
        u = self._unit(unit)
        sig = parse_signal(signal)
        if u.child is not None:
            targets = process.group_members(u.child.pid) if whom == "all" else [u.child.pid]
            process.send(targets, sig)
        return self._state(u)

    def restart(self, unit: str, *, bound_s: float | None = None) -> UnitState:
        """``systemctl restart``: a stop (as ``stop``) then a start."""
        self.step()
        u = self._unit(unit)
        self._manager.begin_stop(u, "restart")
        self.run_until(lambda: u.stop_job is None, bound_s)
        if u.stop_job is not None:
            return self._state(u)
        return self.start(unit)

    def reset_failed(self, unit: str) -> UnitState:
        """``systemctl reset-failed``: failed → inactive, restart counter and start limit
        cleared."""
        self.step()
        u = self._unit(unit)
        if u.active == "failed":
            u.active, u.sub = "inactive", "dead"
        u.result = "success"
        u.n_restarts = 0
        u.starts.clear()
        return self._state(u)

    def hold_restarts(self, unit: str) -> UnitState:
        """No automatic restarts until the next explicit start; a restart already scheduled
        is dropped and the unit stays failed."""
        self.step()
        u = self._unit(unit)
        u.held = True
        if u.restart_at is not None:
            u.restart_at = None
            u.active, u.sub = "failed", "failed"
        return self._state(u)

    def release_hold(self, unit: str) -> UnitState:
        """The hold is lifted: automatic restarts follow Restart= again (from the next death)."""
        self.step()
        u = self._unit(unit)
        u.held = False
        return self._state(u)

    def set_flag(
        self, unit: str, flag: str, value: str | int | float | bool | None
    ) -> tuple[str, ...]:
        """Change one server flag for the next start (a drop-in rewriting ExecStart=):
        ``True`` sets a bare switch, ``False``/``None`` removes the flag. The new flags."""
        u = self._unit(unit)
        u.argv = set_flag(u.argv, flag, value)
        return tuple(u.argv)

    def set_unit_option(self, unit: str, option: str, value: str | float | int) -> UnitState:
        """A drop-in setting ``TimeoutStopSec=``, ``KillMode=``, ``Restart=`` or
        ``RestartSec=`` (time spans in systemd syntax or seconds)."""
        u = self._unit(unit)
        if option == "TimeoutStopSec":
            u.timeout_stop_sec = parse_timespan(value)
        elif option == "RestartSec":
            u.restart_sec = parse_timespan(value)
        elif option == "KillMode":
            u.kill_mode = check_option("KillMode", str(value))
        elif option == "Restart":
            u.restart = check_option("Restart", str(value))
        else:
            raise ValueError(f"unsupported unit option {option!r}")
        return self._state(u)

    def unit_state(self, unit: str) -> UnitState:
        self.step()
        return self._state(self._unit(unit))

    def gpu_used_bytes(self, gpus: Iterable[int] | None = None) -> dict[int, int]:
        """Bytes in use per GPU (all GPUs when ``gpus`` is None), as NVML would report."""
        self.step()
        return self.driver.used(gpus)

    def sample(self) -> None:
        """Record one NVML sample of every GPU now (the node also samples on its own)."""
        self.driver.sample()

    # ------------------------------------------------------------------ time
    def step(self) -> None:
        """Process everything that happened since the last step."""
        if self._closed:
            raise RuntimeError("the node is closed")
        now = self.clock()
        self._manager.drain()
        self._manager.reap(now)
        self.driver.release_due(now)
        self._manager.timers(now)
        if now >= self._next_sample:
            self.driver.sample(now)
            self._next_sample = max(self._next_sample + self.sample_interval_s, now)

    def run_for(self, seconds: float) -> None:
        """Let ``seconds`` of real time pass, stepping all along."""
        end = self.clock() + seconds
        while True:
            self.step()
            left = end - self.clock()
            if left <= 0:
                return
            time.sleep(min(left, POLL_S))

    def run_until(self, done: Callable[[], bool], timeout_s: float | None = None) -> bool:
        """Step until ``done()`` holds (True) or ``timeout_s`` passed (False)."""
        end = math.inf if timeout_s is None else self.clock() + timeout_s
        while True:
            self.step()
            if done():
                return True
            if self.clock() >= end:
                return False
            time.sleep(POLL_S)
