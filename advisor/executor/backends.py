"""Where actions take effect: the systemd backend (systemctl by argv, drop-ins under a root
folder) and a dry-run twin that only records. Same interface, same events either way.

Every method takes values that were validated already (`recommend.is_unit_name`,
`dropins.check_flag`); the systemd backend checks again before it builds any argv, because a
backend is the last place before the operating system.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from advisor.errors import AdvisorError, InputError
from advisor.executor.dropins import (
    check_flag,
    check_option,
    exec_start_dropin,
    option_dropin,
    with_flag,
    write_atomically,
)
from advisor.recommend import is_unit_name

HOLD_DROPIN = "40-advisor-hold-restarts.conf"


class BackendError(AdvisorError):
    """An action could not be carried out."""


@dataclass(frozen=True)
class Outcome:
    detail: str
    dropin: str | None = None
    previous: str | None = None


class Backend(Protocol):
    name: str

    def stop(self, unit: str) -> Outcome: ...
    def kill(self, unit: str) -> Outcome: ...
    def restart(self, unit: str) -> Outcome: ...
    def reset_failed(self, unit: str) -> Outcome: ...
    def hold_restarts(self, unit: str) -> Outcome: ...
    def set_flag(self, unit: str, flag: str, value: str, tag: str) -> Outcome: ...
    def set_unit_option(self, unit: str, option: str, value: str, tag: str) -> Outcome: ...
    def wait_gpu_free(self, unit: str, seconds: float) -> Outcome: ...
    def rollback(self, dropin: str, previous: str | None) -> Outcome: ...


def _unit(unit: str) -> str:
    if not is_unit_name(unit):
        raise InputError(f"{unit[:80]!r} is not a systemd unit name")
    return unit


Runner = Callable[[Sequence[str]], str]


def run_argv(argv: Sequence[str]) -> str:
    """Run a command by argv (never a shell); its stdout, or BackendError with its stderr."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=120,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BackendError(f"{shlex.join(argv)}: {e}") from e
    if done.returncode != 0:
        reason = (done.stderr or done.stdout).strip().splitlines()
        raise BackendError(f"{shlex.join(argv)} exited {done.returncode}"
                           f"{': ' + reason[-1] if reason else ''}")
    return done.stdout


@dataclass
class SystemdBackend:
    """systemctl and drop-ins. `root` is where unit drop-ins go (/etc/systemd/system on a
    host; a folder in tests); `runner` runs argv (subprocess by default)."""

    root: Path = Path("/etc/systemd/system")
    runner: Runner = run_argv
    systemctl: str = "systemctl"
    poll_s: float = 1.0
    gpu_used: Callable[[str], int | None] | None = None
    name: str = "systemd"

    def _ctl(self, *args: str) -> str:
        return self.runner([self.systemctl, *args])

    def stop(self, unit: str) -> Outcome:
        self._ctl("stop", _unit(unit))
        return Outcome(f"systemctl stop {unit}")

    def kill(self, unit: str) -> Outcome:
        self._ctl("kill", "--signal=SIGKILL", _unit(unit))
        return Outcome(f"systemctl kill --signal=SIGKILL {unit}")

    def restart(self, unit: str) -> Outcome:
        hold = self._dropin_dir(unit) / HOLD_DROPIN
        lifted = ""
        if hold.exists():  # the plan's hold_restarts ends here
            hold.unlink()
            self._ctl("daemon-reload")
            lifted = f"removed {hold}; systemctl daemon-reload; "
        self._ctl("restart", _unit(unit))
        return Outcome(f"{lifted}systemctl restart {unit}")

    def reset_failed(self, unit: str) -> Outcome:
        self._ctl("reset-failed", _unit(unit))
        return Outcome(f"systemctl reset-failed {unit}")

    def hold_restarts(self, unit: str) -> Outcome:
        """Restart=no in a drop-in of its own (lifted by `restart`), then stop the unit."""
        out = self._write(unit, HOLD_DROPIN, option_dropin("Restart", "no"))
        self._ctl("stop", unit)
        return Outcome(f"{out.detail}; systemctl stop {unit}", out.dropin, out.previous)

    def _dropin_dir(self, unit: str) -> Path:
        return self.root / f"{_unit(unit)}.d"

    def _write(self, unit: str, name: str, text: str) -> Outcome:
        path = self._dropin_dir(unit) / name
        previous = write_atomically(path, text, self.root / ".advisor-previous" / unit)
        self._ctl("daemon-reload")
        return Outcome(f"wrote {path}; systemctl daemon-reload", str(path),
                       str(previous) if previous else None)

    def current_argv(self, unit: str) -> list[str]:
        """The command the unit runs: its main process's /proc cmdline when it runs, else the
        ExecStart systemd has loaded."""
        pid = self._ctl("show", "--property=MainPID", "--value", _unit(unit)).strip()
        if pid.isdigit() and int(pid) > 0:
            try:
                raw = Path(f"/proc/{int(pid)}/cmdline").read_bytes()
                return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]
            except OSError:
                pass
        shown = self._ctl("show", "--property=ExecStart", "--value", unit)
        start = shown.find("argv[]=")
        if start < 0:
            raise BackendError(f"{unit}: systemd shows no ExecStart")
        end = shown.find(" ;", start)
        return shlex.split(shown[start + len("argv[]="):end if end > 0 else None])

    def set_flag(self, unit: str, flag: str, value: str, tag: str) -> Outcome:
        check_flag(flag, value)
        argv = with_flag(self.current_argv(unit), flag, value)
        return self._write(unit, f"50-advisor-{flag.lstrip('-')}.conf", exec_start_dropin(argv))

    def set_unit_option(self, unit: str, option: str, value: str, tag: str) -> Outcome:
        check_option(option, value)
        return self._write(unit, f"50-advisor-{option}.conf", option_dropin(option, value))

    def wait_gpu_free(self, unit: str, seconds: float) -> Outcome:
        if self.gpu_used is None:
            time.sleep(seconds)
            return Outcome(f"waited {seconds:.0f} s (no GPU sampler to poll)")
        deadline = time.monotonic() + seconds
        stable = 0
        while time.monotonic() < deadline:
            used = self.gpu_used(_unit(unit))
            stable = stable + 1 if used == 0 else 0
            if stable >= 3:  # free *and stable*, not one low reading
                return Outcome("the unit's GPU memory is free (3 samples in a row)")
            time.sleep(self.poll_s)
        raise BackendError(f"{unit}: GPU memory not free after {seconds:.0f} s")

    def rollback(self, dropin: str, previous: str | None) -> Outcome:
        path = Path(dropin)
        if not path.is_relative_to(self.root):
            raise InputError(f"{dropin}: not a drop-in under {self.root}")
        if previous is None:
            path.unlink(missing_ok=True)
            detail = f"removed {path}"
        else:
            write_atomically(path, Path(previous).read_text(encoding="utf-8"),
                             self.root / ".advisor-previous" / "rolled-back")
            detail = f"restored {path} from {previous}"
        self._ctl("daemon-reload")
        return Outcome(f"{detail}; systemctl daemon-reload")


@dataclass
class DryRunBackend:
    """Does nothing, records what it would have done: `--dry-run`, and tests."""

    done: list[str] = field(default_factory=list)
    name: str = "dry-run"

    def _record(self, what: str) -> Outcome:
        self.done.append(what)
        return Outcome(f"dry run: would {what}")

    def stop(self, unit: str) -> Outcome:
        return self._record(f"stop {unit}")

    def kill(self, unit: str) -> Outcome:
        return self._record(f"kill {unit}")

    def restart(self, unit: str) -> Outcome:
        return self._record(f"restart {unit}")

    def reset_failed(self, unit: str) -> Outcome:
        return self._record(f"reset-failed {unit}")

    def hold_restarts(self, unit: str) -> Outcome:
        return self._record(f"hold restarts of {unit}")

    def set_flag(self, unit: str, flag: str, value: str, tag: str) -> Outcome:
        check_flag(flag, value)
        return self._record(f"set {flag} {value} on {unit}")

    def set_unit_option(self, unit: str, option: str, value: str, tag: str) -> Outcome:
        check_option(option, value)
        return self._record(f"set {option}={value} on {unit}")

    def wait_gpu_free(self, unit: str, seconds: float) -> Outcome:
        return self._record(f"wait up to {seconds:.0f} s for {unit}'s GPU memory")

    def rollback(self, dropin: str, previous: str | None) -> Outcome:
        return self._record(f"roll back {dropin}")
