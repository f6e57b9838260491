"""Unit definitions and state for the simulated service manager, and the edits the advisor's
actions make to them (a drop-in that rewrites ``ExecStart=``, one that sets an option).

Values follow systemd's own spelling (``Restart=on-failure``, ``KillMode=control-group``,
``TimeoutStopSec=90s`` or ``infinity``) so that the executor can hand the sim the same values it
would write into a real drop-in.
"""

from __future__ import annotations

import math
import re
import signal
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from advisor.sim.process import Exit

RESTART_POLICIES: Final = ("no", "on-success", "on-failure", "on-abnormal", "on-abort", "always")
KILL_MODES: Final = ("control-group", "mixed", "process", "none")
# Exits that count as clean for a non-oneshot service (systemd.service(5)).
CLEAN_SIGNALS: Final = frozenset({"TERM", "INT", "HUP", "PIPE"})
# systemd's exit-status names (src/shared/exit-status.c) for the codes a server produces.
EXIT_NAMES = {
    0: "SUCCESS",
    1: "FAILURE",
    2: "INVALIDARGUMENT",
    3: "NOTIMPLEMENTED",
    4: "NOPERMISSION",
    5: "NOTINSTALLED",
    6: "NOTCONFIGURED",
    7: "NOTRUNNING",
    203: "EXEC",
    255: "EXCEPTION",
}
_SPAN = re.compile(r"(\d+(?:\.\d+)?)\s*(usec|us|msec|ms|sec|min|hr|s|m|h)?(?![a-z])")
_UNITS: Final = {
    None: 1.0,
    "usec": 1e-6,
    "us": 1e-6,
    "msec": 1e-3,
    "ms": 1e-3,
    "s": 1.0,
    "sec": 1.0,
    "m": 60.0,
    "min": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
}


@dataclass(frozen=True, slots=True)
class UnitSpec:
    """A service unit: ``args`` are the server's flags (ExecStart= after the executable).

    ``start_limit_burst`` starts within ``start_limit_interval_sec`` are allowed (systemd's
    defaults, 5 in 10 s); 0 for the interval switches the limit off. Durations are seconds.
    """

    name: str
    args: list[str]
    description: str = ""
    restart: str = "on-failure"
    restart_sec: float = 0.1
    timeout_stop_sec: float = 90.0
    kill_mode: str = "control-group"
    gpus: tuple[int, ...] = (0, 1, 2, 3)
    start_limit_burst: int = 5
    start_limit_interval_sec: float = 10.0

    def __post_init__(self) -> None:
        if not self.name.endswith(".service") or "/" in self.name:
            raise ValueError(f"not a service unit name: {self.name!r}")
        check_option("Restart", self.restart)
        check_option("KillMode", self.kill_mode)

    @property
    def status(self) -> str:
        """The name job messages use (``StatusUnitFormat=combined``, Debian 12's default)."""
        return f"{self.name} - {self.description}" if self.description else self.name


@dataclass(frozen=True, slots=True)
class UnitState:
    """What ``systemctl show`` would say, plus what the sim knows about the server."""

    name: str
    active_state: str  # active, activating, deactivating, inactive, failed
    sub_state: str  # running, auto-restart, stop-sigterm, stop-sigkill, dead, failed
    main_pid: int | None
    n_restarts: int
    result: str  # success, exit-code, signal, core-dump, timeout, start-limit-hit
    invocation_id: str | None
    argv: tuple[str, ...]  # the server flags the next (or current) start uses
    running_argv: tuple[str, ...] | None  # what the live main process was started with
    restart: str
    restart_sec: float
    timeout_stop_sec: float
    kill_mode: str
    restarts_held: bool
    ready: bool  # the live process said "Application startup complete."
    output_lines: int = 0  # journal lines the current (or last) run has written
    exit_code: str | None = None  # of the last main process: exited / killed / dumped
    exit_status: str | None = None  # "1/FAILURE", "9/KILL"


def parse_timespan(value: str | float | int) -> float:
    """Seconds from a systemd time span (``90``, ``30s``, ``1min 30s``, ``500ms``,
    ``infinity``)."""
    if isinstance(value, bool):
        raise ValueError(f"not a time span: {value!r}")
    if isinstance(value, int | float):
        if value < 0 or math.isnan(value):
            raise ValueError(f"not a time span: {value!r}")
        return float(value)
    text = value.strip().lower()
    if text == "infinity":
        return math.inf
    total, pos = 0.0, 0
    for m in _SPAN.finditer(text):
        if text[pos : m.start()].strip():
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos == 0 or text[pos:].strip():
        raise ValueError(f"not a time span: {value!r}")
    return total


def check_option(option: str, value: str) -> str:
    allowed = {"Restart": RESTART_POLICIES, "KillMode": KILL_MODES}[option]
    if value not in allowed:
        raise ValueError(f"{option}= must be one of {', '.join(allowed)}, not {value!r}")
    return value


def set_flag(argv: list[str], flag: str, value: str | int | float | bool | None) -> list[str]:
    """``argv`` with ``flag`` set: ``--flag value`` replaced (or ``--flag=value``) or appended;
    ``True`` makes it a bare switch, ``False`` / ``None`` removes it."""
    if not flag.startswith("--") or len(flag) < 3 or any(c.isspace() for c in flag):
        raise ValueError(f"not a long option: {flag!r}")
    out: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == flag:
            takes_value = i + 1 < len(argv) and not argv[i + 1].startswith("--")
            i += 2 if takes_value else 1
            continue
        if arg.startswith(flag + "="):
            i += 1
            continue
        out.append(arg)
        i += 1
    if value is True:
        out.append(flag)
    elif value is not None and value is not False:
        out.extend([flag, str(value)])
    return out


def flag_value(argv: list[str] | tuple[str, ...], flag: str) -> str | None:
    """The value of ``flag`` in ``argv`` (``""`` for a bare switch), None when absent."""
    for i, arg in enumerate(argv):
        if arg == flag:
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            return nxt if nxt is not None and not nxt.startswith("--") else ""
        if arg.startswith(flag + "="):
            return arg[len(flag) + 1 :]
    return None


def restarts_after(policy: str, *, clean: bool, code: str, result: str) -> bool:
    """Whether ``Restart=policy`` restarts after this death (systemd.service(5) table)."""
    abnormal = (code in ("killed", "dumped") and not clean) or result in ("timeout", "watchdog")
    return {
        "no": False,
        "always": True,
        "on-success": clean,
        "on-failure": not clean,
        "on-abnormal": abnormal,
        "on-abort": code in ("killed", "dumped") and not clean,
    }[policy]


def parse_signal(value: str | int) -> signal.Signals:
    """``SIGKILL``, ``KILL``, ``9`` or 9 → the signal."""
    if isinstance(value, int) or value.isdigit():
        return signal.Signals(int(value))
    name = value.upper()
    return signal.Signals[name if name.startswith("SIG") else "SIG" + name]


def exit_status(ex: Exit) -> str:
    """``1/FAILURE``, ``120/n/a``, ``9/KILL`` — the status= part of "Main process exited"."""
    if ex.code == "exited":
        return f"{ex.status}/{EXIT_NAMES.get(ex.status, 'n/a')}"
    return f"{ex.status}/{ex.signal_name}"


def timespan(seconds: float) -> str:
    """systemd's time span with ms accuracy: ``345ms``, ``2.345s``, ``1min 4.811s``."""
    ms = round(seconds * 1000)
    if ms < 1000:
        return f"{ms}ms"
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs = f"{rest / 1000:.3f}".rstrip("0").rstrip(".") + "s"
    parts = ([f"{hours}h"] if hours else []) + ([f"{minutes}min"] if minutes else [])
    return " ".join([*parts, secs])
