"""``SimNode``: a GPU host in a folder — GPUs and their driver, a service manager with systemd
semantics, and the stand-in vLLM server (``advisor.sim.server``) as real processes.

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
import os
import queue
import secrets
import shlex
import signal as signals
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from advisor.core.journald import exit_fields
from advisor.sim import process
from advisor.sim.gpus import DEFAULT_GPU_NAME, Driver
from advisor.sim.journal import JournalWriter, Stream, default_comm, new_id
from advisor.sim.process import Child, Exit, Line
from advisor.sim.units import (
    CLEAN_SIGNALS,
    UnitSpec,
    UnitState,
    check_option,
    exit_status,
    parse_signal,
    parse_timespan,
    restarts_after,
    set_flag,
    timespan,
)

READY_MARKER = b"Application startup complete."
POLL_S = 0.02
SERVER_MODULE = "advisor.sim.server"


def wall_clock() -> Callable[[], float]:
    """Wall-clock seconds that never go backwards (epoch now + monotonic time elapsed)."""
    base, start = time.time(), time.monotonic()
    return lambda: base + (time.monotonic() - start)


@dataclass
class _Unit:
    spec: UnitSpec
    argv: list[str]
    restart: str
    restart_sec: float
    timeout_stop_sec: float
    kill_mode: str
    active: str = "inactive"
    sub: str = "dead"
    child: Child | None = None
    invocation_id: str | None = None
    n_restarts: int = 0
    result: str = "success"
    held: bool = False
    ready: bool = False
    output_lines: int = 0
    restart_at: float | None = None
    stop_job: tuple[int, str] | None = None     # (job id, job type) of a running stop
    stop_deadline: float | None = None
    stop_timed_out: bool = False
    last_exit: Exit | None = None
    starts: deque[float] = field(default_factory=deque)


class SimNode:
    """A simulated GPU host rooted at ``root`` (created if missing)."""

    def __init__(self, root: Path, *, host: str = "sim-node-07", gpus: int = 8,
                 gpu_gib: float = 96.0, release_delay_s: float = 5.0,
                 sample_interval_s: float = 1.0, clock: Callable[[], float] | None = None,
                 gpu_name: str = DEFAULT_GPU_NAME) -> None:
        self.root = root
        self.host = host
        self.gpu_count = gpus
        self.gpu_gib = gpu_gib
        self.sample_interval_s = sample_interval_s
        self.clock = clock or wall_clock()
        root.mkdir(parents=True, exist_ok=True)
        self.journal = JournalWriter(root / "journal.jsonl", host=host, clock=self.clock)
        try:
            self.driver = Driver(root / "claims", root / "gpus.jsonl", host=host, count=gpus,
                                 gpu_gib=gpu_gib, clock=self.clock,
                                 release_delay_s=release_delay_s, gpu_name=gpu_name)
        except BaseException:
            self.journal.close()
            raise
        self._units: dict[str, _Unit] = {}
        self._lines: queue.Queue[Line] = queue.Queue()
        self._children: dict[int, Child] = {}          # every live process, orphans included
        self._streams: dict[int, tuple[_Unit, Stream]] = {}
        self._job = 3000 + secrets.randbelow(1000)
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

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """SIGKILL every process still running, reap them, close the files."""
        if self._closed:
            return
        self._closed = True
        try:
            for child in list(self._children.values()):
                process.send(process.group_members(child.pid), signals.SIGKILL)
                process.reap(child, self.clock(), block=True)
                child.reader.join(timeout=5)
            self._drain()
        finally:
            self.journal.close()
            self.driver.close()

    # ------------------------------------------------------------------ units
    def add_unit(self, spec: UnitSpec) -> None:
        """Install a unit (as a unit file plus ``daemon-reload``); it starts inactive."""
        if spec.name in self._units:
            raise ValueError(f"unit {spec.name} exists")
        bad = [g for g in spec.gpus if not 0 <= g < self.gpu_count]
        if bad:
            raise ValueError(f"{spec.name}: no GPU {bad[0]} on this node")
        self._units[spec.name] = _Unit(spec, list(spec.args), spec.restart, spec.restart_sec,
                                       spec.timeout_stop_sec, spec.kill_mode)

    def units(self) -> list[str]:
        return list(self._units)

    def _unit(self, name: str) -> _Unit:
        try:
            return self._units[name]
        except KeyError:
            raise KeyError(f"Unit {name} not found.") from None

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
            self._start_job(u)
        return self._state(u)

    def stop(self, unit: str, *, wait: bool = True, bound_s: float | None = None) -> UnitState:
        """``systemctl stop``: SIGTERM per KillMode=, SIGKILL after TimeoutStopSec=. Blocks
        until the stop job is done (or ``bound_s`` passed) unless ``wait`` is False."""
        self.step()
        u = self._unit(unit)
        self._begin_stop(u, "stop")
        if wait:
            self.run_until(lambda: u.stop_job is None, bound_s)
        return self._state(u)

    def kill(self, unit: str, signal: str | int = "SIGKILL", *,
             whom: str = "all") -> UnitState:
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
        self._begin_stop(u, "restart")
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

    def set_flag(self, unit: str, flag: str,
                 value: str | int | float | bool | None) -> tuple[str, ...]:
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
        self._drain()
        for pid, child in list(self._children.items()):
            ex = process.reap(child, now)
            if ex is None:
                continue
            child.reader.join(timeout=5)
            self._drain()
            del self._children[pid]
            self.driver.died(pid, ex.when)
            owner = self._streams.get(pid)
            if owner is not None and owner[0].child is child:
                self._main_exited(owner[0], ex)
        self.driver.release_due(now)
        for u in self._units.values():
            if u.stop_deadline is not None and now >= u.stop_deadline:
                self._stop_timed_out(u, now)
            if u.restart_at is not None and now >= u.restart_at:
                self._auto_restart(u)
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

    # ------------------------------------------------------------------ internals
    def _drain(self) -> None:
        while True:
            try:
                when, pid, raw = self._lines.get_nowait()
            except queue.Empty:
                return
            owner = self._streams.get(pid)
            if raw is None or owner is None:
                continue
            u, stream = owner
            written = self.journal.stdout(stream, raw, when)
            if u.child is not None and u.child.pid == pid:
                u.output_lines += written
                u.ready = u.ready or READY_MARKER in raw

    def _pid1(self, kind: str, u: _Unit, extra: dict[str, str] | None = None,
              **fmt: object) -> None:
        self.journal.pid1(kind, unit=u.spec.name, status=u.spec.status,
                          invocation_id=u.invocation_id, extra=extra, **fmt)

    def _next_job(self) -> int:
        self._job += 1
        return self._job

    def _start_job(self, u: _Unit) -> None:
        now = self.clock()
        job = {"JOB_ID": str(self._next_job()), "JOB_TYPE": "start"}
        interval = u.spec.start_limit_interval_sec
        while u.starts and now - u.starts[0] > interval:
            u.starts.popleft()
        if interval > 0 and len(u.starts) >= u.spec.start_limit_burst:
            self._pid1("start_limit", u)
            u.result = "start-limit-hit"
            self._pid1("failed", u, {"UNIT_RESULT": u.result}, result=u.result)
            self._pid1("failed_start", u, {**job, "JOB_RESULT": "failed"})
            u.active, u.sub = "failed", "failed"
            return
        u.starts.append(now)
        u.invocation_id = new_id()
        self._pid1("starting", u, job)
        cmd = [sys.executable, "-u", "-m", SERVER_MODULE, *u.argv,
               "--claims", str(self.driver.claims_dir), "--gpus", ",".join(map(str, u.spec.gpus)),
               "--gpu-gib", repr(self.gpu_gib)]
        child = process.spawn(cmd, env=_server_env(), lines=self._lines, clock=self.clock,
                              argv=tuple(u.argv))
        comm = default_comm()
        stream = Stream(u.spec.name, u.invocation_id, child.pid, shlex.join(cmd), comm,
                        sys.executable, new_id())
        self._children[child.pid] = child
        self._streams[child.pid] = (u, stream)
        self.driver.register(child.pid, u.spec.name, comm)
        u.child, u.ready, u.stop_timed_out, u.result = child, False, False, "success"
        u.output_lines = 0
        u.active, u.sub = "active", "running"
        self._pid1("started", u, {**job, "JOB_RESULT": "done"})

    def _begin_stop(self, u: _Unit, job_type: str) -> None:
        if u.stop_job is not None:
            return
        if u.child is None:
            if u.restart_at is not None:   # stopping a unit waiting to restart
                u.restart_at = None
                self._pid1("stopped", u, {"JOB_ID": str(self._next_job()), "JOB_TYPE": job_type,
                                          "JOB_RESULT": "done"})
                u.active, u.sub = ("inactive", "dead") if u.result == "success" else (
                    "failed", "failed")
            return
        job = (self._next_job(), job_type)
        u.stop_job = job
        self._pid1("stopping", u, {"JOB_ID": str(job[0]), "JOB_TYPE": job_type})
        if u.kill_mode == "none":   # nothing is signalled: the process is left behind
            pid = u.child.pid
            self._pid1("remains", u, pid=pid, comm=process.comm_of(pid, default_comm()))
            u.child, u.ready, u.restart_at = None, False, None
            self._finish_stop(u, "inactive", "dead")
            return
        u.active, u.sub = "deactivating", "stop-sigterm"
        main = u.child.pid
        targets = process.group_members(main) if u.kill_mode == "control-group" else [main]
        process.send(targets, signals.SIGTERM)
        process.send(targets, signals.SIGCONT)
        timeout = u.timeout_stop_sec
        u.stop_deadline = None if math.isinf(timeout) else self.clock() + timeout

    def _finish_stop(self, u: _Unit, active: str, sub: str) -> None:
        assert u.stop_job is not None
        job_id, job_type = u.stop_job
        self._pid1("stopped", u, {"JOB_ID": str(job_id), "JOB_TYPE": job_type,
                                  "JOB_RESULT": "done"})
        u.stop_job, u.stop_deadline = None, None
        u.active, u.sub = active, sub

    def _stop_timed_out(self, u: _Unit, now: float) -> None:
        u.stop_deadline = None
        if u.child is None:
            return
        self._pid1("stop_timeout", u)
        main = u.child.pid
        targets = process.group_members(main) if u.kill_mode != "process" else [main]
        for pid in targets:
            self._pid1("killing", u, pid=pid, comm=process.comm_of(pid, default_comm()))
        process.send(targets, signals.SIGKILL)
        u.stop_timed_out = True
        u.sub = "stop-sigkill"

    def _main_exited(self, u: _Unit, ex: Exit) -> None:
        u.child, u.ready, u.last_exit = None, False, ex
        clean = (ex.code == "exited" and ex.status == 0) or (
            ex.code == "killed" and ex.signal_name in CLEAN_SIGNALS)
        if u.stop_timed_out:
            result = "timeout"
        elif clean:
            result = "success"
        else:
            result = {"exited": "exit-code", "dumped": "core-dump"}.get(ex.code, "signal")
        if clean and not u.stop_timed_out:
            self._pid1("deactivated", u)
        else:
            status = exit_status(ex)
            self._pid1("exited", u, exit_fields(ex.code, status), code=ex.code, exit=status)
            self._pid1("failed", u, {"UNIT_RESULT": result}, result=result)
        if ex.cpu_s > 1.0:
            self._pid1("consumed", u, {"PRIORITY": "6" if ex.cpu_s < 600 else "5",
                                       "CPU_USAGE_NSEC": str(int(ex.cpu_s * 1e9))},
                       cpu=timespan(ex.cpu_s))
        u.result = result
        after = ("inactive", "dead") if result == "success" else ("failed", "failed")
        if u.stop_job is not None:
            self._finish_stop(u, *after)
            return
        if not u.held and restarts_after(u.restart, clean=clean, code=ex.code, result=result):
            u.active, u.sub = "activating", "auto-restart"
            u.restart_at = ex.when + u.restart_sec
        else:
            u.active, u.sub = after

    def _auto_restart(self, u: _Unit) -> None:
        u.restart_at = None
        u.n_restarts += 1
        self._pid1("restart", u, {"N_RESTARTS": str(u.n_restarts)}, n=u.n_restarts)
        self._pid1("stopped", u, {"JOB_ID": str(self._next_job()), "JOB_TYPE": "restart",
                                  "JOB_RESULT": "done"})
        self._start_job(u)

    def _state(self, u: _Unit) -> UnitState:
        ex = u.last_exit
        return UnitState(
            name=u.spec.name, active_state=u.active, sub_state=u.sub,
            main_pid=u.child.pid if u.child is not None else None, n_restarts=u.n_restarts,
            result=u.result, invocation_id=u.invocation_id, argv=tuple(u.argv),
            running_argv=u.child.argv if u.child is not None else None, restart=u.restart,
            restart_sec=u.restart_sec, timeout_stop_sec=u.timeout_stop_sec,
            kill_mode=u.kill_mode, restarts_held=u.held, ready=u.ready,
            output_lines=u.output_lines,
            exit_code=ex.code if ex else None, exit_status=exit_status(ex) if ex else None)


def _server_env() -> dict[str, str]:
    """The server's environment: this checkout importable, unbuffered output."""
    env = dict(os.environ)
    here = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env
