"""Logs as `LogLine`s: from a file (journald JSON or plain text, told apart by content) or
from stored `log.recorded` events. `advisor classify` reads files without a store; it uses
the journald decoder of `ingest` so that a line means the same here as once stored.

`open_log` reads lazily, a line at a time (a journal of millions of lines is never held in
memory); `read_log` is the same reader, all at once."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from itertools import chain
from pathlib import Path
from typing import BinaryIO

from advisor.core.errors import InputError
from advisor.core.gcpause import gc_paused
from advisor.parsing.lines import LogLine, line_from_payload
from advisor.parsing.pasted import unpaste
from ingest.kinds import JOURNAL_JSON, SNIFF_BYTES, binary_message, line_kind, looks_binary

JOURNALD = "journald-json"
TEXT = "text"
_BLOCK = 1 << 20


def _journal_lines(
    blocks: Iterable[list[bytes]], name: str, malformed: list[tuple[int, str]] | None
) -> Iterator[LogLine]:
    """The lines of a `journalctl -o json` file; one that cannot be decoded is an InputError,
    or with `malformed` given, is skipped and noted there as (line number, why)."""
    from ingest.journal import json_line_payload

    number = 0
    for block in blocks:
        for raw in block:
            number += 1
            if not raw.strip():
                continue
            decoded = json_line_payload(raw)
            if isinstance(decoded, str):
                if malformed is None:
                    raise InputError(f"{name}: line {number}: {decoded}")
                malformed.append((number, decoded))
                continue
            time_us, payload = decoded
            yield line_from_payload(number, payload, time_us)


def _text_lines(blocks: Iterable[list[bytes]]) -> Iterator[LogLine]:
    number = 0
    for block in blocks:
        for raw in block:
            number += 1
            text = raw.decode("utf-8", "replace").rstrip("\r\n")
            if text.strip():
                yield LogLine(number=number, text=text)


def _cannot_read(name: str, e: OSError) -> InputError:
    if isinstance(e, FileNotFoundError):
        return InputError(f"{name}: no such file")
    if isinstance(e, IsADirectoryError):
        return InputError(f"{name}: is a folder, not a log file")
    return InputError(f"{name}: cannot read: {e.strerror or e}")


def _raw_blocks(stream: BinaryIO, head: bytes, name: str) -> Iterator[list[bytes]]:
    """The input split at b"\\n" (without it), `head` (already read) first: lists of lines,
    a block of the file at a time (cheaper than a line at a time)."""
    try:
        first = head + stream.readline() if head else b""  # head's last line completed
        parts = first.split(b"\n")
        if first.endswith(b"\n"):
            parts.pop()
        yield parts
        rest = b""
        while block := stream.read(_BLOCK):
            lines = (rest + block).split(b"\n")
            rest = lines.pop()
            yield lines
        if rest:
            yield [rest]
    except OSError as e:
        raise _cannot_read(name, e) from e
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def _first_line(blocks: Iterator[list[bytes]]) -> tuple[list[list[bytes]], bytes]:
    """The blocks up to and including the one with the first non-empty line, and that line
    (b"" if none)."""
    seen = []
    for block in blocks:
        seen.append(block)
        for raw in block:
            if raw.strip():
                return seen, raw
    return seen, b""


def open_log(
    path: str, *, malformed: list[tuple[int, str]] | None = None
) -> tuple[str, Iterator[LogLine]]:
    """(format, lines read as they are consumed) of a log file, or of stdin for `-`.
    InputError when unreadable, binary or empty (at once), or for a bad journal line (when
    it is reached) unless `malformed` is given: then such a line is skipped and noted there
    as (line number, why)."""
    name = "<stdin>" if path == "-" else path
    try:
        # Closed by the line reader when it is done (or by the checks below).
        stream: BinaryIO = sys.stdin.buffer if path == "-" else Path(path).open("rb")  # noqa: SIM115
        head = stream.read(SNIFF_BYTES)
    except OSError as e:
        raise _cannot_read(name, e) from e
    if looks_binary(head):
        if stream is not sys.stdin.buffer:
            stream.close()
        raise InputError(binary_message(name))
    blocks = _raw_blocks(stream, head, name)
    seen, first = _first_line(blocks)
    if not first:
        raise InputError(f"{name}: empty log")
    everything = chain(seen, blocks)
    if line_kind(first) == JOURNAL_JSON:
        return JOURNALD, _journal_lines(everything, name, malformed)
    return TEXT, unpaste(_text_lines(everything))


def read_log(path: str) -> tuple[str, list[LogLine]]:
    """(format, lines) of a log file, or of stdin for `-`. InputError when unreadable."""
    fmt, lines = open_log(path)
    with gc_paused():
        return fmt, list(lines)
