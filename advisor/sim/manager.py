"""The service manager of a ``SimNode``: its units and the jobs systemd runs on them — a start
that forks the stand-in server (``advisor.sim.server``), a stop job with its SIGTERM and
timeout, a main process's death and the restart it may schedule — each logged as PID 1 logs it.

It owns the server processes: it spawns them, reads their output into the journal and reaps
them. The node (``advisor.sim.node``) calls it; nothing here decides when time passes.
"""

from __future__ import annotations

import math
import os
import queue
import secrets
import shlex
import signal as signals
import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from advisor.sim import process, texts
from advisor.sim.gpus import Driver
from advisor.sim.journal import JournalWriter, Stream, default_comm, new_id
from advisor.sim.journald_format import exit_fields
from advisor.sim.process import Child, Exit, Line
from advisor.sim.units import (
    CLEAN_SIGNALS,
    UnitSpec,
    UnitState,
    exit_status,
    restarts_after,
    timespan,
)

READY_MARKER = texts.READY_SENTENCE.encode()
SERVER_MODULE = "advisor.sim.server"


@dataclass
class ManagedUnit:
    """One unit as the service manager holds it: its settings (drop-ins applied), state and
    the jobs and timers running on it."""

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
    stop_job: tuple[int, str] | None = None  # (job id, job type) of a running stop
    stop_deadline: float | None = None
    stop_timed_out: bool = False
    last_exit: Exit | None = None
    starts: deque[float] = field(default_factory=deque)


class ServiceManager:
    """The units of one node, with systemd's semantics (see ``advisor.sim.node``)."""

    def __init__(
        self, journal: JournalWriter, driver: Driver, clock: Callable[[], float], gpu_gib: float
    ) -> None:
        self.journal = journal
        self.driver = driver
        self.clock = clock
        self.gpu_gib = gpu_gib
        self.units: dict[str, ManagedUnit] = {}
        self.lines: queue.Queue[Line] = queue.Queue()
        self.children: dict[int, Child] = {}  # every live process, orphans included
        self.streams: dict[int, tuple[ManagedUnit, Stream]] = {}
        self._job = 3000 + secrets.randbelow(1000)

    def add(self, spec: UnitSpec) -> None:
        """Install a unit (the node checks it first); it starts inactive."""
        self.units[spec.name] = ManagedUnit(
            spec,
            list(spec.args),
            spec.restart,
            spec.restart_sec,
            spec.timeout_stop_sec,
            spec.kill_mode,
        )

    def unit(self, name: str) -> ManagedUnit:
        try:
            return self.units[name]
        except KeyError:
            raise KeyError(f"Unit {name} not found.") from None

    # ------------------------------------------------------------------ processes
    def drain(self) -> None:
        """Write the output the servers printed since the last call into the journal."""
        while True:
            try:
                when, pid, raw = self.lines.get_nowait()
            except queue.Empty:
                return
            owner = self.streams.get(pid)
            if raw is None or owner is None:
                continue
            u, stream = owner
            written = self.journal.stdout(stream, raw, when)
            if u.child is not None and u.child.pid == pid:
                u.output_lines += written
                u.ready = u.ready or READY_MARKER in raw

    def reap(self, now: float) -> None:
        """Reap the processes that died: the driver frees their memory (after its delay), and
        a unit whose main process it was reacts to the death."""
        for pid, child in list(self.children.items()):
            ex = process.reap(child, now)
            if ex is None:
                continue
            child.reader.join(timeout=5)
            self.drain()
            del self.children[pid]
            self.driver.died(pid, ex.when)
            owner = self.streams.get(pid)
            if owner is not None and owner[0].child is child:
                self._main_exited(owner[0], ex)

    def timers(self, now: float) -> None:
        """Stop timeouts and restart timers that are due."""
        for u in self.units.values():
            if u.stop_deadline is not None and now >= u.stop_deadline:
                self._stop_timed_out(u, now)
            if u.restart_at is not None and now >= u.restart_at:
                self._auto_restart(u)

    def kill_all(self) -> None:
        """SIGKILL every process still running and reap them."""
        for child in list(self.children.values()):
            process.send(process.group_members(child.pid), signals.SIGKILL)
            process.reap(child, self.clock(), block=True)
            child.reader.join(timeout=5)
        self.drain()

    # ------------------------------------------------------------------ jobs
    def _pid1(
        self, kind: str, u: ManagedUnit, extra: dict[str, str] | None = None, **fmt: object
    ) -> None:
        self.journal.pid1(
            kind,
            unit=u.spec.name,
            status=u.spec.status,
            invocation_id=u.invocation_id,
            extra=extra,
            **fmt,
        )

    def _next_job(self) -> int:
        self._job += 1
        return self._job

    def start_job(self, u: ManagedUnit) -> None:
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
        cmd = [
            sys.executable,
            "-u",
            "-m",
            SERVER_MODULE,
            *u.argv,
            "--claims",
            str(self.driver.claims_dir),
            "--gpus",
            ",".join(map(str, u.spec.gpus)),
            "--gpu-gib",
            repr(self.gpu_gib),
        ]
        child = process.spawn(
            cmd, env=_server_env(), lines=self.lines, clock=self.clock, argv=tuple(u.argv)
        )
        comm = default_comm()
        stream = Stream(
            u.spec.name, u.invocation_id, child.pid, shlex.join(cmd), comm, sys.executable, new_id()
        )
        self.children[child.pid] = child
        self.streams[child.pid] = (u, stream)
        self.driver.register(child.pid, u.spec.name, comm)
        u.child, u.ready, u.stop_timed_out, u.result = child, False, False, "success"
        u.output_lines = 0
        u.active, u.sub = "active", "running"
        self._pid1("started", u, {**job, "JOB_RESULT": "done"})

    def begin_stop(self, u: ManagedUnit, job_type: str) -> None:
        if u.stop_job is not None:
            return
        if u.child is None:
            if u.restart_at is not None:  # stopping a unit waiting to restart
                u.restart_at = None
                self._pid1(
                    "stopped",
                    u,
                    {"JOB_ID": str(self._next_job()), "JOB_TYPE": job_type, "JOB_RESULT": "done"},
                )
                u.active, u.sub = (
                    ("inactive", "dead") if u.result == "success" else ("failed", "failed")
                )
            return
        job = (self._next_job(), job_type)
        u.stop_job = job
        self._pid1("stopping", u, {"JOB_ID": str(job[0]), "JOB_TYPE": job_type})
        if u.kill_mode == "none":  # nothing is signalled: the process is left behind
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

    def _finish_stop(self, u: ManagedUnit, active: str, sub: str) -> None:
        assert u.stop_job is not None
        job_id, job_type = u.stop_job
        self._pid1(
            "stopped", u, {"JOB_ID": str(job_id), "JOB_TYPE": job_type, "JOB_RESULT": "done"}
        )
        u.stop_job, u.stop_deadline = None, None
        u.active, u.sub = active, sub

    def _stop_timed_out(self, u: ManagedUnit, now: float) -> None:
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

    def _main_exited(self, u: ManagedUnit, ex: Exit) -> None:
        u.child, u.ready, u.last_exit = None, False, ex
        clean = (ex.code == "exited" and ex.status == 0) or (
            ex.code == "killed" and ex.signal_name in CLEAN_SIGNALS
        )
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
            self._pid1(
                "consumed",
                u,
                {
                    "PRIORITY": "6" if ex.cpu_s < 600 else "5",
                    "CPU_USAGE_NSEC": str(int(ex.cpu_s * 1e9)),
                },
                cpu=timespan(ex.cpu_s),
            )
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

    def _auto_restart(self, u: ManagedUnit) -> None:
        u.restart_at = None
        u.n_restarts += 1
        self._pid1("restart", u, {"N_RESTARTS": str(u.n_restarts)}, n=u.n_restarts)
        self._pid1(
            "stopped",
            u,
            {"JOB_ID": str(self._next_job()), "JOB_TYPE": "restart", "JOB_RESULT": "done"},
        )
        self.start_job(u)

    def state(self, u: ManagedUnit) -> UnitState:
        ex = u.last_exit
        return UnitState(
            name=u.spec.name,
            active_state=u.active,
            sub_state=u.sub,
            main_pid=u.child.pid if u.child is not None else None,
            n_restarts=u.n_restarts,
            result=u.result,
            invocation_id=u.invocation_id,
            argv=tuple(u.argv),
            running_argv=u.child.argv if u.child is not None else None,
            restart=u.restart,
            restart_sec=u.restart_sec,
            timeout_stop_sec=u.timeout_stop_sec,
            kill_mode=u.kill_mode,
            restarts_held=u.held,
            ready=u.ready,
            output_lines=u.output_lines,
            exit_code=ex.code if ex else None,
            exit_status=exit_status(ex) if ex else None,
        )


def _server_env() -> dict[str, str]:
    """The server's environment: this checkout importable, unbuffered output."""
    env = dict(os.environ)
    here = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env
