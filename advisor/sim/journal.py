"""The node's journal: entries as ``journalctl -o json`` prints them, appended to one file.

Two kinds of entry, both built from ``advisor.sim.journald_format`` so that they are the same
shapes the ingester and the diagnosis already read from real hosts:

* PID 1's lifecycle messages about a unit (``SYSTEMD_MESSAGES``, systemd 252 wording, with
  ``UNIT=``, ``INVOCATION_ID=``, MESSAGE_IDs and ``_SOURCE_REALTIME_TIMESTAMP``);
* a service's stdout lines (``_TRANSPORT=stdout``, ``PRIORITY=6``, ``_PID`` = main PID), with
  journald's line handling: trailing whitespace stripped, empty lines dropped, ANSI colour
  codes turning MESSAGE into a byte array.

Every entry is flushed as it is written, so a follower (``ingest``'s tail, ``advisor watch``)
sees it at once. Realtime stamps never go backwards; ``__CURSOR`` comes from
``journald_format.cursor``.
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from advisor.sim.journald_format import (
    PID1_FIELDS,
    STDOUT_KEY_ORDER,
    SYSTEMD_MESSAGES,
    SystemdMessage,
    cursor,
    json_line,
)

# Messages PID 1 writes that advisor.sim.journald_format's catalogue does not have.
EXTRA_MESSAGES: Final = {
    "failed_start": SystemdMessage(
        "Failed to start {status}.",
        "be02cf6855d2428ba40df7e9d022f03d",
        "3",
        "src/core/job.c",
        "768",
        "job_emit_done_message",
    ),
    "start_limit": SystemdMessage(
        "{unit}: Start request repeated too quickly.",
        None,
        "4",
        "src/core/unit.c",
        "1877",
        "unit_test_start_limit",
    ),
    "remains": SystemdMessage(
        "{unit}: Unit process {pid} ({comm}) remains running after unit stopped.",
        None,
        "6",
        "src/core/unit.c",
        "5009",
        "unit_log_leftover",
    ),
}
STRIP: Final = b" \t\r\n"


@dataclass(frozen=True, slots=True)
class Stream:
    """The trusted fields journald attaches to one run's stdout stream."""

    unit: str
    invocation_id: str
    pid: int
    cmdline: str
    comm: str
    exe: str
    stream_id: str
    identifier: str = "vllm"


def new_id() -> str:
    """A 128-bit id as journald prints it (invocation, stream, boot ids)."""
    return secrets.token_hex(16)


def journal_line_text(raw: bytes) -> bytes | None:
    """One line of a service's output as journald stores it: trailing whitespace stripped,
    None when nothing is left (the line is dropped)."""
    text = raw.rstrip(STRIP)
    return text or None


class JournalWriter:
    """Appends entries to ``path``; ``clock`` gives wall-clock seconds."""

    def __init__(
        self, path: Path, *, host: str, clock: Callable[[], float], uptime_s: float = 3 * 86_400.0
    ) -> None:
        self.path = path
        self.host = host
        self.clock = clock
        self.boot_id = new_id()
        self.machine_id = new_id()
        self.seqnum_id = new_id()
        self.seqnum = 0x4A000 + secrets.randbelow(0x10000)
        self.boot_us = int((clock() - uptime_s) * 1_000_000)
        self.last_us = 0
        self.entries = 0
        self._file = path.open("ab")

    def close(self) -> None:
        self._file.close()

    def _address(self, time_s: float | None) -> tuple[int, dict[str, str]]:
        t = int((self.clock() if time_s is None else time_s) * 1_000_000)
        t = max(t, self.last_us)
        self.last_us = t
        self.seqnum += 1
        mono = t - self.boot_us
        return t, {
            "__CURSOR": cursor(self.seqnum_id, self.seqnum, self.boot_id, mono, t),
            "__REALTIME_TIMESTAMP": str(t),
            "__MONOTONIC_TIMESTAMP": str(mono),
        }

    def _write(self, fields: dict[str, str | bytes]) -> None:
        self._file.write(json_line(fields))
        self._file.flush()
        self.entries += 1

    def pid1(
        self,
        kind: str,
        *,
        unit: str,
        status: str,
        invocation_id: str | None,
        extra: dict[str, str] | None = None,
        **fmt: object,
    ) -> None:
        """A PID 1 message ``kind`` (``SYSTEMD_MESSAGES`` or ``EXTRA_MESSAGES``) about ``unit``."""
        message = SYSTEMD_MESSAGES.get(kind) or EXTRA_MESSAGES[kind]
        t, fields = self._address(None)
        entry: dict[str, str | bytes] = {
            **fields,
            **message.fields(),
            "SYSLOG_FACILITY": PID1_FIELDS["SYSLOG_FACILITY"],
            "TID": "1",
            "SYSLOG_IDENTIFIER": "systemd",
            "UNIT": unit,
        }
        if invocation_id is not None:
            entry["INVOCATION_ID"] = invocation_id
        entry.update(extra or {})
        entry["MESSAGE"] = message.fmt.format(unit=unit, status=status, **fmt)
        entry.update(PID1_FIELDS)
        entry.update(
            {
                "_SOURCE_REALTIME_TIMESTAMP": str(t - 37),
                "_BOOT_ID": self.boot_id,
                "_MACHINE_ID": self.machine_id,
                "_HOSTNAME": self.host,
            }
        )
        self._write(entry)

    def stdout(self, stream: Stream, raw: bytes, time_s: float | None = None) -> bool:
        """One line the service wrote; False when journald would drop it (empty)."""
        text = journal_line_text(raw)
        if text is None:
            return False
        _, entry = self._address(time_s)
        values: dict[str, str | bytes] = {
            "_TRANSPORT": "stdout",
            "PRIORITY": "6",
            "SYSLOG_FACILITY": "3",
            "SYSLOG_IDENTIFIER": stream.identifier,
            "MESSAGE": text,
            "_STREAM_ID": stream.stream_id,
            "_PID": str(stream.pid),
            "_UID": str(os.getuid()),
            "_GID": str(os.getgid()),
            "_COMM": stream.comm,
            "_EXE": stream.exe,
            "_CMDLINE": stream.cmdline,
            "_CAP_EFFECTIVE": "0",
            "_SELINUX_CONTEXT": "unconfined",
            "_SYSTEMD_CGROUP": f"/system.slice/{stream.unit}",
            "_SYSTEMD_UNIT": stream.unit,
            "_SYSTEMD_SLICE": "system.slice",
            "_SYSTEMD_INVOCATION_ID": stream.invocation_id,
            "_BOOT_ID": self.boot_id,
            "_MACHINE_ID": self.machine_id,
            "_HOSTNAME": self.host,
        }
        self._write({**entry, **{key: values[key] for key in STDOUT_KEY_ORDER}})
        return True


def default_comm() -> str:
    """The kernel ``comm`` of a Python process: its executable's base name, 15 bytes at most."""
    return Path(sys.executable).name[:15]
