"""Service processes: spawned without a shell in a session of their own (their "control
group"), read line by line on a thread, reaped with ``wait4`` for the exit status and the CPU
time systemd reports.

The reader thread only stamps lines and queues them; the journal is written by whoever drives
the node, so PID 1's messages and the service's lines interleave in the order they happened.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

# (clock seconds, pid, line) — line None: the stream reached EOF.
Line = tuple[float, int, bytes | None]


@dataclass(frozen=True, slots=True)
class Exit:
    """How a main process ended, in systemd's terms."""

    code: str  # exited / killed / dumped
    status: int  # exit status, or the signal number
    cpu_s: float  # user + system CPU time
    when: float  # clock seconds

    @property
    def signal_name(self) -> str | None:
        if self.code == "exited":
            return None
        try:
            return signal.Signals(self.status).name.removeprefix("SIG")
        except ValueError:
            return str(self.status)


@dataclass
class Child:
    popen: subprocess.Popen[bytes]
    argv: tuple[str, ...]
    started: float
    reader: threading.Thread
    exit: Exit | None = None
    eof: threading.Event = field(default_factory=threading.Event)

    @property
    def pid(self) -> int:
        return self.popen.pid


def spawn(
    cmd: list[str],
    *,
    env: dict[str, str],
    lines: queue.Queue[Line],
    clock: Callable[[], float],
    argv: tuple[str, ...],
) -> Child:
    """Start ``cmd`` (stdout and stderr into one pipe) and a thread feeding ``lines``."""
    popen = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    assert popen.stdout is not None
    eof = threading.Event()
    reader = threading.Thread(
        target=_read,
        args=(popen.stdout, popen.pid, lines, clock, eof),
        name=f"sim-stdout-{popen.pid}",
        daemon=True,
    )
    reader.start()
    return Child(popen, argv, clock(), reader, eof=eof)


def _read(
    stream: IO[bytes],
    pid: int,
    lines: queue.Queue[Line],
    clock: Callable[[], float],
    eof: threading.Event,
) -> None:
    try:
        for raw in iter(stream.readline, b""):
            lines.put((clock(), pid, raw))
    finally:
        stream.close()
        lines.put((clock(), pid, None))
        eof.set()


def reap(child: Child, now: float, *, block: bool = False) -> Exit | None:
    """The exit of ``child`` if it has ended (sets Popen's returncode so it does not warn)."""
    if child.exit is not None:
        return child.exit
    try:
        pid, status, usage = os.wait4(child.pid, 0 if block else os.WNOHANG)
    except ChildProcessError:
        pid, status, usage = child.pid, 0, None
    if pid == 0:
        return None
    child.popen.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime if usage is not None else 0.0
    if os.WIFSIGNALED(status):
        code = "dumped" if os.WCOREDUMP(status) else "killed"
        child.exit = Exit(code, os.WTERMSIG(status), cpu, now)
    else:
        child.exit = Exit("exited", os.WEXITSTATUS(status), cpu, now)
    return child.exit


def group_members(pid: int) -> list[int]:
    """The processes of ``pid``'s session (the unit's "cgroup"), main PID first."""
    members = [pid]
    try:
        entries = os.listdir("/proc")
    except OSError:
        return members
    for entry in entries:
        if not entry.isdigit() or int(entry) == pid:
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 3 and fields[3] == str(pid) and fields[0] != "Z":  # session id
            members.append(int(entry))
    return members


def comm_of(pid: int, default: str) -> str:
    """The kernel's ``comm`` (what systemd prints in "Killing process N (comm)")."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() or default
    except OSError:
        return default


def send(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
