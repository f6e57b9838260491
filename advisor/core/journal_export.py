"""Parser for journald's export format (`journalctl -o export`), binary-safe and length-framed.

An entry is a run of fields ended by an empty line. A field is either `NAME=value\\n` or
`NAME\\n` + 64-bit little-endian length + raw bytes + `\\n`. A field may repeat.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

MAX_FIELD_BYTES = 256 * 1024 * 1024


class ExportFormatError(ValueError):
    pass


def iter_export(stream: IO[bytes]) -> Iterator[dict[str, bytes | list[bytes]]]:
    """Yield one dict per entry; values are bytes, or a list of bytes for repeated fields."""
    readline = stream.readline
    read = stream.read
    entry: dict[str, bytes | list[bytes]] = {}
    while True:
        line = readline()
        if not line:
            if entry:
                yield entry  # stream ended without the final blank line (killed writer)
            return
        if line == b"\n":
            if entry:
                yield entry
                entry = {}
            continue
        eq = line.find(b"=")
        if eq > 0:
            name = line[:eq].decode("ascii", "replace")
            value = line[eq + 1 : -1] if line.endswith(b"\n") else line[eq + 1 :]
        else:
            name = line.rstrip(b"\n").decode("ascii", "replace")
            size_raw = read(8)
            if len(size_raw) < 8:
                raise ExportFormatError(f"field {name}: stream ended inside a length")
            size = int.from_bytes(size_raw, "little")
            if size > MAX_FIELD_BYTES:
                raise ExportFormatError(f"field {name}: length {size} is not plausible")
            value = read(size)
            if len(value) < size or read(1) != b"\n":
                raise ExportFormatError(f"field {name}: stream ended inside a binary value")
        previous = entry.get(name)
        if previous is None:
            entry[name] = value
        elif isinstance(previous, list):
            previous.append(value)
        else:
            entry[name] = [previous, value]


def _export_value(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else value


def write_export_entry(out: IO[bytes], fields: list[tuple[str, bytes | str]]) -> None:
    """Write one entry in export format (used to build real .journal fixtures)."""
    for name, raw in fields:
        value = _export_value(raw)
        if all(b >= 32 or b == 9 for b in value) and _is_utf8(value):
            out.write(name.encode() + b"=" + value + b"\n")
        else:
            out.write(name.encode() + b"\n" + len(value).to_bytes(8, "little") + value + b"\n")
    out.write(b"\n")


def _is_utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
