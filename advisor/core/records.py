"""What every source yields to the pipeline: an event (as a raw dict) or a malformed line."""

from __future__ import annotations

import base64
import functools
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Told (bytes read so far, bytes to read in all) as a file is ingested.
Progress = Callable[[int, int], None]

_CONTROL = {c: None for c in range(32)} | {127: None}


@dataclass(frozen=True, slots=True)
class Record:
    """One unit of input. `event` is None when the input was malformed (`error` says why).

    `position` is where a reader resumes after this record; the pipeline saves the last one
    of each batch as the checkpoint, in the same transaction as the batch.
    """

    line_no: int
    event: dict[str, Any] | None
    error: str | None = None
    position: dict[str, Any] | None = None
    consumed: int = 0  # input bytes this record used (for progress bars)


def stable_key(data: bytes) -> int:
    """A compact, non-negative 63-bit idempotency key for an opaque identity (e.g. a cursor)."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big") >> 1


def decode_text(raw: bytes) -> tuple[str, str | None]:
    """Decode bytes as UTF-8; when that is lossy also return the raw bytes as base64."""
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace"), base64.b64encode(raw).decode("ascii")


@functools.lru_cache(maxsize=4096)  # hosts and units repeat on every line
def clean_name(value: str, limit: int = 200) -> str:
    """A stream component from hostile text: no control characters, no slashes, bounded."""
    cleaned = value.translate(_CONTROL).replace("/", "_").strip()
    return cleaned[:limit] or "-"
