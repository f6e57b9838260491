"""The small values the store takes and gives, importable without a database driver (the
parser process uses them and nothing else of the store)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Checkpoint:
    name: str
    position: dict[str, Any]


@dataclass
class AppendResult:
    appended: int = 0
    duplicates: int = 0
    last_seq: int | None = None


@dataclass(frozen=True)
class EventFilter:
    stream: str | None = None
    type: str | None = None
    since_us: int | None = None
    until_us: int | None = None
    after_seq: int | None = None
    limit: int | None = None
