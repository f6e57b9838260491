"""The drop-ins advisor writes, and systemd's quoting of an ExecStart= line.

Every lasting change advisor makes to a unit — flags in ExecStart=, variables the command
reads, options such as TimeoutStopSec= — lives in one file, ``UNIT.d/zz-advisor.conf``,
rewritten whole from a small state kept on its first comment line, so a second change never
loses the first (two files that each reset ExecStart= would: the one sorting last wins). It is
named to sort after the drop-ins operators write (``override.conf`` from ``systemctl edit``,
``10-gpu.conf``…): for ExecStart= and for the order of environment files, the last one wins.
Variables advisor overrides go into its environment file beside it, ``zz-advisor.env``, which
the drop-in names with ``EnvironmentFile=`` — listed after the unit's own files, and an
environment file beats ``Environment=`` — written and removed with the drop-in, from the same
state. A temporary hold on restarts (``Restart=no`` while a plan changes the unit) is a second
file, ``zzz-advisor-hold.conf``, named to sort after every other drop-in, advisor's own
included, and removed when the plan restarts the unit.

A drop-in replacing the command resets ExecStart= first (an empty assignment), or systemd
refuses the unit ("has more than one ExecStart= setting"). Each argument is written in
systemd's syntax: double quotes with C escapes around anything but a plain word, ``%`` doubled
(specifiers), ``$`` kept as it was (``${MODEL}`` stays a variable systemd expands at start; a
literal dollar is already ``$$`` in the loaded argv). The argv comes from systemd's D-Bus
property, which holds it exactly as the unit file said, so what is written back is the same
command with one flag changed.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import orjson

from advisor.core.errors import InputError
from advisor.execution.state import ExecCommand

ADVISOR_DROPIN: Final = "zz-advisor.conf"
ADVISOR_ENV: Final = "zz-advisor.env"
HOLD_DROPIN: Final = "zzz-advisor-hold.conf"
# Names earlier versions wrote: still advisor's to roll back and to lift.
LEGACY_DROPINS: Final = ("50-advisor.conf", "zz-advisor-hold.conf")
_STATE_PREFIX: Final = "# advisor-state: "
# ExecStartEx flag names → the ExecStart= prefix that sets them.
_PREFIXES: Final = {
    "ignore-failure": "-",
    "privileged": "+",
    "no-setuid": "!",
    "ambient": "!!",
    "no-env-expand": ":",
}
_PLAIN = re.compile(r"^[A-Za-z0-9_@%+=:,./$-]+$")
_ESCAPES: Final = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def quote(arg: str, *, always: bool = False, specifiers: bool = False) -> str:
    """One ExecStart= argument in systemd's syntax (`$` kept, `%` doubled — or kept as
    written with `specifiers`, for a word whose `%i` must stay a specifier); double-quoted
    when it needs it, or `always`."""
    doubled = arg if specifiers else arg.replace("%", "%%")
    if not always and _PLAIN.match(arg) and arg != ";":
        return doubled
    out = []
    for c in doubled:
        if c in _ESCAPES:
            out.append(_ESCAPES[c])
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\x{ord(c):02x}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def exec_start_line(command: ExecCommand) -> str:
    """The value of an ExecStart= that systemd loads back as exactly `command`."""
    if not command.argv:
        raise InputError(f"{command.path}: an ExecStart with no argv")
    prefix = "".join(_PREFIXES[f] for f in command.flags if f in _PREFIXES)
    unknown = [f for f in command.flags if f not in _PREFIXES]
    if unknown:
        raise InputError(f"ExecStart flag {unknown[0]!r} is not one advisor can write back")
    words = [quote(a) for a in command.argv]
    if command.argv[0] != command.path:  # `@`: the binary and argv[0] differ
        return f"{prefix}@{quote(command.path)} " + " ".join(words)
    return prefix + " ".join(words)


def with_flag(argv: Sequence[str], flag: str, value: str) -> tuple[str, ...]:
    """`argv` with `flag` set to `value` (`--flag V` or `--flag=V` replaced, else appended)."""
    out: list[str] = []
    replaced = False
    skip = False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        if arg == flag and i + 1 < len(argv):
            out += [flag, value]
            skip = replaced = True
        elif arg.startswith(flag + "="):
            out.append(f"{flag}={value}")
            replaced = True
        else:
            out.append(arg)
    if not replaced:
        out += [flag, value]
    return tuple(out)


def flag_value(argv: Sequence[str], flag: str) -> str | None:
    """The value `flag` has in `argv` (`--flag V` or `--flag=V`), None when absent."""
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg[len(flag) + 1 :]
    return None


@dataclass(frozen=True)
class AdvisorDropin:
    """What zz-advisor.conf says: the command (if advisor changed it; `exec_raw` is the line
    as written when it keeps specifiers such as `%i`), unit options, and the variables
    advisor overrides (in `env_file`, the environment file beside the drop-in)."""

    exec_start: ExecCommand | None = None
    options: Mapping[str, str] = field(default_factory=dict)
    environment: Mapping[str, str] = field(default_factory=dict)
    env_file: str | None = None
    exec_raw: str | None = None

    def render(self) -> str:
        state: dict[str, object] = {"options": dict(sorted(self.options.items()))}
        if self.exec_start is not None:
            state["exec_start"] = {
                "path": self.exec_start.path,
                "argv": list(self.exec_start.argv),
                "flags": list(self.exec_start.flags),
            }
            if self.exec_raw is not None:
                state["exec_raw"] = self.exec_raw
        if self.environment:
            state["environment"] = dict(sorted(self.environment.items()))
            state["env_file"] = self.env_file
        lines = [
            "# Written by advisor: every change it made to this unit, in one file, "
            "rewritten whole.",
            "# `advisor rollback ACTION` puts back what one change replaced.",
            _STATE_PREFIX + orjson.dumps(state, option=orjson.OPT_SORT_KEYS).decode(),
            "[Service]",
        ]
        lines += [f"{k}={v}" for k, v in sorted(self.options.items())]
        if self.environment:
            lines.append(f"EnvironmentFile={quote(str(self.env_file))}")
        if self.exec_start is not None:
            line = self.exec_raw if self.exec_raw is not None else exec_start_line(self.exec_start)
            lines += ["ExecStart=", "ExecStart=" + line]
        return "\n".join(lines) + "\n"

    def env_text(self) -> str | None:
        """The environment file's text, None when advisor overrides no variable."""
        if not self.environment:
            return None
        from advisor.execution.envfile import env_file_text

        return env_file_text(
            self.environment,
            header="# Written by advisor with zz-advisor.conf beside it: the variables it "
            "overrides.\n",
        )

    def with_option(self, option: str, value: str) -> AdvisorDropin:
        options = {**self.options, option: value}
        return AdvisorDropin(
            self.exec_start, options, self.environment, self.env_file, self.exec_raw
        )

    def with_exec_start(self, command: ExecCommand, raw: str | None = None) -> AdvisorDropin:
        return AdvisorDropin(command, self.options, self.environment, self.env_file, raw)

    def with_variables(self, values: Mapping[str, str], env_file: str) -> AdvisorDropin:
        environment = {**self.environment, **values}
        return AdvisorDropin(self.exec_start, self.options, environment, env_file, self.exec_raw)


def parse_dropin(path: Path, text: str) -> AdvisorDropin:
    """Read back a 50-advisor.conf; InputError if it is not exactly what advisor wrote."""
    for line in text.splitlines():
        if line.startswith(_STATE_PREFIX):
            try:
                dropin = _from_state(orjson.loads(line[len(_STATE_PREFIX) :]))
            except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
                raise InputError(f"{path}: advisor's state line does not parse: {e}") from e
            if dropin.render() != text:
                raise InputError(
                    f"{path} was edited by hand; advisor will not rewrite it "
                    "(remove it, or put it back as advisor wrote it)"
                )
            return dropin
        if not line.startswith("#"):
            break
    raise InputError(f"{path} exists and was not written by advisor; advisor will not overwrite it")


def _from_state(state: dict[str, object]) -> AdvisorDropin:
    command = state.get("exec_start")
    environment = state.get("environment") or {}
    options = state["options"]
    assert isinstance(options, dict) and isinstance(environment, dict)
    raw = state.get("exec_raw")
    env_file = state.get("env_file")
    return AdvisorDropin(
        ExecCommand(
            str(command["path"]),
            tuple(str(a) for a in command["argv"]),
            tuple(str(f) for f in command["flags"]),
        )
        if isinstance(command, dict)
        else None,
        {str(k): str(v) for k, v in options.items()},
        {str(k): str(v) for k, v in environment.items()},
        None if env_file is None else str(env_file),
        None if raw is None else str(raw),
    )


def env_companion(path: Path, text: str | None) -> tuple[Path, str | None]:
    """The environment file that goes with advisor's drop-in `path` holding `text` (None:
    removed), and its text (None: no variables, so no file)."""
    companion = path.with_name(ADVISOR_ENV)
    if text is None:
        return companion, None
    try:
        return companion, parse_dropin(path, text).env_text()
    except InputError:
        return companion, None


def advisor_dropin(path: Path, current: str | None) -> AdvisorDropin:
    """What advisor's drop-in at `path` says now (`current`: its text, None when absent)."""
    return parse_dropin(path, current) if current is not None else AdvisorDropin()


def hold_text() -> str:
    return (
        "# Written by advisor: no automatic restarts while a plan changes this unit.\n"
        "# Removed when the plan restarts the unit (or ends without finishing).\n"
        "[Service]\nRestart=no\n"
    )


def write_atomically(path: Path, text: str, mode: int = 0o644) -> None:
    """Write `text` to `path` (temp file in the same folder, fsync, rename), with `mode`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
