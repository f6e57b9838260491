"""systemd drop-ins: an ExecStart with one flag changed, unit options; written atomically.

A drop-in replacing the command must reset ExecStart first (`ExecStart=` then the new line;
DOMAIN.md 2.6), or systemd refuses the unit. Arguments are written in systemd's own quoting:
double quotes around an argument with blanks or quotes, backslash escapes, and `$`/`%` doubled
so that systemd expands neither variables nor specifiers in them.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

from advisor.errors import InputError

_FLAG = re.compile(r"^--[a-z0-9][a-z0-9-]{0,60}$")
_VALUE = re.compile(r"^[A-Za-z0-9._:/+-]{1,200}$")
_OPTION_VALUES = {
    "TimeoutStopSec": re.compile(r"^(?:infinity|\d{1,6}(?:ms|s|min|h)?)$"),
    "KillMode": re.compile(r"^(?:control-group|mixed|process)$"),
    "Restart": re.compile(r"^(?:no|on-failure|on-abnormal|always|on-abort|on-watchdog)$"),
    "RestartSec": re.compile(r"^\d{1,6}(?:ms|s|min)?$"),
}


def check_flag(flag: str, value: str) -> None:
    """Only a long option name and a plain value (a number, a name) may go into ExecStart."""
    if not _FLAG.match(flag):
        raise InputError(f"flag {flag[:80]!r} is not a long option name")
    if not _VALUE.match(value):
        raise InputError(f"value {value[:80]!r} for {flag} is not a plain value")


def check_option(option: str, value: str) -> None:
    pattern = _OPTION_VALUES.get(option)
    if pattern is None:
        raise InputError(f"unit option {option[:80]!r} is not one advisor sets "
                         f"({', '.join(_OPTION_VALUES)})")
    if not pattern.match(value):
        raise InputError(f"{option}={value[:80]!r} is not a value systemd takes")


def quote(arg: str) -> str:
    """One ExecStart argument in systemd's syntax."""
    escaped = arg.replace("\\", "\\\\").replace('"', '\\"').replace("$", "$$")
    escaped = escaped.replace("%", "%%").replace("\n", "\\n")
    if not escaped or any(c.isspace() for c in arg) or '"' in arg or "'" in arg or ";" in arg:
        return f'"{escaped}"'
    return escaped


def with_flag(argv: Sequence[str], flag: str, value: str) -> list[str]:
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
    return out


def exec_start_dropin(argv: Sequence[str]) -> str:
    return ("# Written by advisor: the service's command with one setting changed.\n"
            "[Service]\nExecStart=\nExecStart=" + " ".join(quote(a) for a in argv) + "\n")


def option_dropin(option: str, value: str) -> str:
    return f"# Written by advisor.\n[Service]\n{option}={value}\n"


def write_atomically(path: Path, text: str, keep_previous_in: Path) -> Path | None:
    """Write `text` to `path` (temp file, fsync, rename). An existing file is kept first as
    `keep_previous_in/<name>`; return that path, or None when there was no file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    previous = None
    if path.exists():
        keep_previous_in.mkdir(parents=True, exist_ok=True)
        previous = keep_previous_in / path.name
        previous.write_bytes(path.read_bytes())
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return previous
