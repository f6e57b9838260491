"""Reading files line by line from a saved position, across rotation and truncation."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from advisor.core.errors import InputError

HEAD_BYTES = 256
_CURSOR_KEYS = ("device", "inode", "offset", "line", "head")
# A line longer than this is cut (the rest is read as further pieces of the same line).
MAX_LINE_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class FileCursor:
    """Where reading a file got to: the file (device, inode and a fingerprint of its first
    bytes), the offset and line number reached, and what the line parser keeps between lines."""

    device: int
    inode: int
    offset: int
    line: int
    head: str
    extra: dict[str, Any] | None = None

    def position(self, offset: int, line: int) -> dict[str, Any]:
        pos: dict[str, Any] = {
            "device": self.device,
            "inode": self.inode,
            "offset": offset,
            "line": line,
            "head": self.head,
        }
        if self.extra:
            pos.update(self.extra)
        return pos


def checkpoint_name(kind: str, path: Path, qualifier: str = "") -> str:
    return f"{kind}:{qualifier + ':' if qualifier else ''}{path}"


def resolve(path: Path) -> Path:
    try:
        resolved = path.expanduser().resolve(strict=True)
    except (FileNotFoundError, RuntimeError) as e:
        raise InputError(f"{path}: no such file") from e
    if not resolved.is_file():
        raise InputError(f"{path}: not a regular file")
    return resolved


def _head(path: Path, size: int) -> str:
    """A fingerprint of the file's first bytes ("LENGTH:HASH"): tells a reused inode from
    the same file."""
    with open(path, "rb") as fh:
        data = fh.read(min(size, HEAD_BYTES))
    return f"{len(data)}:{hashlib.blake2b(data, digest_size=8).hexdigest()}"


def _same_head(path: Path, saved: str) -> bool:
    length, _, _digest = saved.partition(":")
    return length.isdigit() and _head(path, int(length)) == saved


def start_cursor(path: Path, saved: dict[str, Any] | None) -> FileCursor:
    """Resume where the last run stopped, unless the file was replaced or truncated."""
    try:
        st = os.stat(path)
        head = _head(path, st.st_size)
    except OSError as e:
        raise InputError(f"{path}: {e.strerror}") from e
    fresh = FileCursor(st.st_dev, st.st_ino, 0, 0, head)
    if not saved or (saved.get("device"), saved.get("inode")) != (st.st_dev, st.st_ino):
        return fresh
    offset = int(saved.get("offset", 0))
    saved_head = saved.get("head")
    if st.st_size < offset or not (isinstance(saved_head, str) and _same_head(path, saved_head)):
        return fresh  # truncated in place (copytruncate), or the inode now holds another file
    extra = {k: v for k, v in saved.items() if k not in _CURSOR_KEYS}
    return FileCursor(st.st_dev, st.st_ino, offset, int(saved["line"]), saved_head, extra or None)


def iter_lines(
    fh: BinaryIO, offset: int, line: int, *, complete_only: bool = False
) -> Iterator[tuple[int, bytes, int, bool]]:
    """Yield (line number, line without its newline, offset after it, complete) from `offset`.

    A last line without its newline is incomplete: a writer may still be appending to it.
    With `complete_only` it is left for later."""
    fh.seek(offset)
    while True:
        raw = fh.readline(MAX_LINE_BYTES)
        if not raw:
            return
        complete = raw.endswith(b"\n") or len(raw) >= MAX_LINE_BYTES
        if not complete and complete_only:
            return
        offset += len(raw)
        line += 1
        yield line, raw.rstrip(b"\r\n"), offset, complete
