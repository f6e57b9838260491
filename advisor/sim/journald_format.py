"""What systemd-journald stores and ``journalctl -o json`` prints, for code that writes journals.

* ``SYSTEMD_MESSAGES``: the unit lifecycle messages PID 1 logs (systemd 252 wording,
  MESSAGE_IDs and source locations); ``PID1_FIELDS``, the fields journald
  attaches to every one of them; ``exit_fields`` for ``exited``.
* ``STDOUT_KEY_ORDER`` (a service's stdout entry) and ``cursor`` (an entry's ``__CURSOR``).
* ``json_value``, ``json_field_value`` and ``json_line``: how ``journalctl -o json`` prints
  values and entries.

Field values are strings, as the journal stores them (``PRIORITY`` is ``"6"``, not ``6``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

import orjson

# --------------------------------------------------------------------------- PID 1's messages


@dataclass(frozen=True, slots=True)
class SystemdMessage:
    """One unit lifecycle message: ``fmt`` takes the values named in braces (``{unit}``,
    ``{status}`` = ``"<unit> - <Description>"``, ...) and the rest are its journal fields."""

    fmt: str
    message_id: str | None
    priority: str
    code_file: str
    code_line: str
    code_func: str

    def fields(self) -> dict[str, str]:
        """PRIORITY, CODE_FILE, CODE_LINE, CODE_FUNC and MESSAGE_ID (absent when it has none)."""
        fields = {
            "PRIORITY": self.priority,
            "CODE_FILE": self.code_file,
            "CODE_LINE": self.code_line,
            "CODE_FUNC": self.code_func,
        }
        if self.message_id is not None:
            fields["MESSAGE_ID"] = self.message_id
        return fields


SYSTEMD_MESSAGES: Final[Mapping[str, SystemdMessage]] = MappingProxyType(
    {
        "starting": SystemdMessage(
            "Starting {status}...",
            "7d4958e842da4a758f6c1cdc7b36dcc5",
            "6",
            "src/core/job.c",
            "581",
            "job_emit_start_message",
        ),
        "started": SystemdMessage(
            "Started {status}.",
            "39f53479d3a045ac8e11786248231fbf",
            "6",
            "src/core/job.c",
            "768",
            "job_emit_done_message",
        ),
        "stopping": SystemdMessage(
            "Stopping {status}...",
            "de5b426a63be47a7b6ac3eaac82e2f6f",
            "6",
            "src/core/job.c",
            "581",
            "job_emit_start_message",
        ),
        "stopped": SystemdMessage(
            "Stopped {status}.",
            "9d1aaa27d60140bd96365438aad20286",
            "6",
            "src/core/job.c",
            "768",
            "job_emit_done_message",
        ),
        # PRIORITY 5 after exit(), 4 after a signal: see exit_fields().
        "exited": SystemdMessage(
            "{unit}: Main process exited, code={code}, status={exit}",
            "98e322203f7a4ed290d09fe03c09fe15",
            "5",
            "src/core/unit.c",
            "5771",
            "unit_log_process_exit",
        ),
        "failed": SystemdMessage(
            "{unit}: Failed with result '{result}'.",
            "d9b373ed55a64feb8242e02dbe79a49c",
            "4",
            "src/core/unit.c",
            "5723",
            "unit_log_failure",
        ),
        "deactivated": SystemdMessage(
            "{unit}: Deactivated successfully.",
            "7ad2d189f7e94e70a38c781354912448",
            "6",
            "src/core/unit.c",
            "5701",
            "unit_log_success",
        ),
        # NOTICE once the run has used more than 1 s of CPU time (unit_log_resources()).
        "consumed": SystemdMessage(
            "{unit}: Consumed {cpu} CPU time.",
            "ae8f7b866b0347b9af31fe1c80b127c0",
            "5",
            "src/core/unit.c",
            "2319",
            "unit_log_resources",
        ),
        "restart": SystemdMessage(  # systemd's scheduled restart, not an action kind
            "{unit}: Scheduled restart job, restart counter is at {n}.",
            "5eb03494b6584870a536b337290809b3",
            "6",
            "src/core/service.c",
            "2396",
            "service_enter_restart",
        ),
        "oom": SystemdMessage(
            "{unit}: A process of this unit has been killed by the OOM killer.",
            "fe6faa94e7774663a0da52717891d8ef",
            "5",
            "src/core/unit.c",
            "3957",
            "unit_check_oom",
        ),
        "stop_timeout": SystemdMessage(
            "{unit}: State 'stop-sigterm' timed out. Killing.",
            None,
            "4",
            "src/core/service.c",
            "4010",
            "service_dispatch_timer",
        ),
        "killing": SystemdMessage(
            "{unit}: Killing process {pid} ({comm}) with signal SIGKILL.",
            None,
            "5",
            "src/core/unit.c",
            "4719",
            "log_kill",
        ),
    }
)

# What journald adds to each of PID 1's messages about a unit, besides the message's own fields
# and UNIT / INVOCATION_ID (Debian 12, systemd 252).
PID1_FIELDS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "SYSLOG_FACILITY": "3",
        "TID": "1",
        "SYSLOG_IDENTIFIER": "systemd",
        "_PID": "1",
        "_UID": "0",
        "_GID": "0",
        "_COMM": "systemd",
        "_EXE": "/usr/lib/systemd/systemd",
        "_CMDLINE": "/sbin/init",
        "_CAP_EFFECTIVE": "1ffffffffff",
        "_SELINUX_CONTEXT": "unconfined",
        "_SYSTEMD_CGROUP": "/init.scope",
        "_SYSTEMD_UNIT": "init.scope",
        "_SYSTEMD_SLICE": "-.slice",
        "_TRANSPORT": "journal",
    }
)


def exit_fields(code: str, status: str, command: str = "ExecStart") -> dict[str, str]:
    """The fields of ``exited`` (``code=exited, status=1/FAILURE``, ``code=killed, status=9/KILL``).

    PRIORITY is NOTICE when the process called exit() and WARNING when a signal ended it.
    """
    return {
        "PRIORITY": "5" if code == "exited" else "4",
        "EXIT_CODE": code,
        "EXIT_STATUS": status.split("/", 1)[0],
        "COMMAND": command,
    }


# --------------------------------------------------------------------------- entries

# Key order of a service's stdout/stderr entry in ``journalctl -o json`` (before the address
# fields ``__CURSOR``, ``__REALTIME_TIMESTAMP`` and ``__MONOTONIC_TIMESTAMP``).
STDOUT_KEY_ORDER: Final = (
    "_TRANSPORT",
    "PRIORITY",
    "SYSLOG_FACILITY",
    "SYSLOG_IDENTIFIER",
    "MESSAGE",
    "_STREAM_ID",
    "_PID",
    "_UID",
    "_GID",
    "_COMM",
    "_EXE",
    "_CMDLINE",
    "_CAP_EFFECTIVE",
    "_SELINUX_CONTEXT",
    "_SYSTEMD_CGROUP",
    "_SYSTEMD_UNIT",
    "_SYSTEMD_SLICE",
    "_SYSTEMD_INVOCATION_ID",
    "_BOOT_ID",
    "_MACHINE_ID",
    "_HOSTNAME",
)


def cursor(seqnum_id: str, seqnum: int, boot_id: str, monotonic_us: int, realtime_us: int) -> str:
    """A ``__CURSOR`` in journald's layout; ``x=`` (the entry hash) is a stand-in."""
    xor = ((seqnum * 0x9E3779B97F4A7C15) ^ realtime_us) & 0xFFFF_FFFF_FFFF_FFFF
    return f"s={seqnum_id};i={seqnum:x};b={boot_id};m={monotonic_us:x};t={realtime_us:x};x={xor:x}"


# --------------------------------------------------------------------------- journalctl -o json

# Without --all, journalctl prints a field whose ``NAME=value`` is this many bytes or more as null.
JSON_THRESHOLD: Final = 4096

# Control characters (C0 but TAB and LF, DEL, C1): a value with one prints as a byte array.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# bytes.translate table: 0 for an ASCII control character, 1 for any other byte.
_ASCII_CONTROL_TO_0 = bytes(
    0 if (b < 0x20 and b not in (0x09, 0x0A)) or b == 0x7F else 1 for b in range(256)
)


def json_value(value: bytes | str) -> str | list[int]:
    """A value as ``journalctl -o json`` prints it: a string, or an array of its byte values when
    it is not valid UTF-8 or has control characters other than TAB and LF.

    A ``str`` stands for its UTF-8 encoding.
    """
    if isinstance(value, str):
        if value.isascii():  # the common case: no C1 controls, nothing to decode
            raw = value.encode()
            return value if 0 not in raw.translate(_ASCII_CONTROL_TO_0) else list(raw)
        text, raw = value, value.encode()
    else:
        raw = value
        try:
            text = raw.decode()
        except UnicodeDecodeError:
            return list(raw)
    return text if _CONTROL.search(text) is None else list(raw)


def json_field_value(name: str, value: bytes | str) -> str | list[int] | None:
    """``json_value``, or None: journalctl without --all prints null for a field whose
    ``NAME=value`` is ``JSON_THRESHOLD`` bytes or longer."""
    size = len(value) if isinstance(value, bytes) or value.isascii() else len(value.encode())
    if len(name) + 1 + size >= JSON_THRESHOLD:
        return None
    return json_value(value)


def json_line(
    fields: Mapping[str, bytes | str] | Iterable[tuple[str, bytes | str]], *, show_all: bool = False
) -> bytes:
    """One entry as a ``journalctl -o json`` line, newline included.

    Keys keep the order they first appear in; a name given more than once prints as an array of
    its values. ``show_all`` prints long values in full, as ``--all`` does.
    """
    items = fields.items() if isinstance(fields, Mapping) else fields
    values: dict[str, list[str | list[int] | None]] = {}
    for name, value in items:
        printed = json_value(value) if show_all else json_field_value(name, value)
        values.setdefault(name, []).append(printed)
    obj = {name: v[0] if len(v) == 1 else v for name, v in values.items()}
    return orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)
