"""Logs as `LogLine`s: from a file (journald JSON or plain text, told apart by content) or
from stored `log.recorded` events. `advisor classify` reads files without a store; it uses
the journald decoder of `ingest` so that a line means the same here as once stored."""

from __future__ import annotations

import sys
from pathlib import Path

from advisor.core.errors import InputError
from advisor.parsing.lines import LogLine, line_from_payload
from ingest.kinds import JOURNAL_JSON, line_kind

JOURNALD = "journald-json"
TEXT = "text"


def _journal_lines(raw_lines: list[bytes], name: str) -> list[LogLine]:
    from ingest.journal import json_line_record

    out = []
    for number, raw in enumerate(raw_lines, start=1):
        if not raw.strip():
            continue
        record = json_line_record(raw, number)
        if record.event is None:
            raise InputError(f"{name}: line {number}: {record.error}")
        event = record.event
        out.append(line_from_payload(number, event["payload"], event["time_us"]))
    return out


def _text_lines(raw_lines: list[bytes]) -> list[LogLine]:
    out = []
    for number, raw in enumerate(raw_lines, start=1):
        text = raw.decode("utf-8", "replace").rstrip("\r\n")
        if text.strip():
            out.append(LogLine(number=number, text=text))
    return out


def read_log(path: str) -> tuple[str, list[LogLine]]:
    """(format, lines) of a log file, or of stdin for `-`. InputError when unreadable."""
    name = "<stdin>" if path == "-" else path
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except FileNotFoundError as e:
        raise InputError(f"{name}: no such file") from e
    except IsADirectoryError as e:
        raise InputError(f"{name}: is a folder, not a log file") from e
    except OSError as e:
        raise InputError(f"{name}: cannot read: {e.strerror or e}") from e
    if b"\x00" in data[:4096] and not data.lstrip().startswith(b"{"):
        raise InputError(
            f"{name}: binary data, not a log (a .journal file? use "
            "`journalctl --file F -o json` first)"
        )
    raw_lines = data.split(b"\n")
    first = next((line for line in raw_lines if line.strip()), b"")
    if not first:
        raise InputError(f"{name}: empty log")
    if line_kind(first) == JOURNAL_JSON:
        return JOURNALD, _journal_lines(raw_lines, name)
    return TEXT, _text_lines(raw_lines)
