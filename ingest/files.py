"""Reading files line by line from a saved position, across rotation and truncation."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from advisor.errors import InputError

# A line longer than this is cut (the rest is read as further pieces of the same line).
MAX_LINE_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class FileCursor:
    """Where reading a file got to. `generation` counts truncations of the same inode, so
    that line numbers (idempotency keys of line-keyed sources) never repeat."""

    inode: int
    generation: int
    offset: int
    line: int
    extra: dict[str, Any] | None = None

    def position(self, offset: int, line: int) -> dict[str, Any]:
        pos: dict[str, Any] = {"inode": self.inode, "generation": self.generation,
                               "offset": offset, "line": line}
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


def start_cursor(path: Path, saved: dict[str, Any] | None) -> FileCursor:
    """Resume where the last run stopped, unless the file was replaced or truncated."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise InputError(f"{path}: {e.strerror}") from e
    if not saved or saved.get("inode") != st.st_ino:
        return FileCursor(st.st_ino, 0, 0, 0)
    extra = {k: v for k, v in saved.items() if k not in ("inode", "generation", "offset", "line")}
    generation = int(saved.get("generation", 0))
    if st.st_size < int(saved.get("offset", 0)):
        return FileCursor(st.st_ino, generation + 1, 0, 0)  # truncated in place
    return FileCursor(st.st_ino, generation, int(saved["offset"]), int(saved["line"]),
                      extra or None)


def iter_lines(fh: BinaryIO, offset: int, line: int, *,
               complete_only: bool = False) -> Iterator[tuple[int, bytes, int]]:
    """Yield (line number, line without its newline, offset after it) from `offset`.

    With `complete_only`, a last line without its newline is left for later (a writer may
    still be appending to it)."""
    fh.seek(offset)
    while True:
        raw = fh.readline(MAX_LINE_BYTES)
        if not raw:
            return
        if not raw.endswith(b"\n") and complete_only and len(raw) < MAX_LINE_BYTES:
            return
        offset += len(raw)
        line += 1
        yield line, raw.rstrip(b"\r\n"), offset
