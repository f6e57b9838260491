"""The hash chain: an event's hash over the previous one and its canonical content, events as
stored, and the rows an append links on to the chain."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from advisor.core.events import Prepared

__all__ = ["GENESIS_HASH", "RawEvent", "chain_rows", "event_hash", "stored_hash"]

GENESIS_HASH = bytes(32)


def event_hash(
    prev: bytes,
    seq: int,
    stream: str,
    type_: str,
    version: int,
    time_us: int,
    recorded_us: int,
    source: str,
    key: int,
    payload: bytes,
    origin: bytes | None = None,
) -> bytes:
    """SHA-256 over the previous hash and the event's canonical content (with a shipped
    event's origin envelope, so that it cannot be altered either)."""
    h = hashlib.sha256(prev)
    h.update(orjson.dumps([seq, stream, type_, version, time_us, recorded_us, source, key]))
    h.update(b"\n")
    h.update(payload)
    if origin is not None:
        h.update(b"\n")
        h.update(origin)
    return h.digest()


@dataclass(frozen=True)
class RawEvent:
    """An event as stored: the envelope, the payload text and the hash, unparsed."""

    seq: int
    stream: str
    type: str
    version: int
    time_us: int
    recorded_us: int
    source: str
    key: int
    payload: str
    hash: bytes
    origin: str | None

    def recomputed_hash(self, prev: bytes) -> bytes:
        return event_hash(
            prev,
            self.seq,
            self.stream,
            self.type,
            self.version,
            self.time_us,
            self.recorded_us,
            self.source,
            self.key,
            self.payload.encode(),
            None if self.origin is None else self.origin.encode(),
        )


def stored_hash(value: object) -> bytes:
    """The hash column as bytes; a value of another type (the column altered) reads as no
    hash, which `verify` reports as a mismatch at its seq."""
    return bytes(value) if isinstance(value, bytes | bytearray | memoryview) else b""


def chain_rows(
    batch: Sequence[Prepared],
    source_ids: Mapping[str, int],
    seen: set[tuple[int, int]],
    last: tuple[int, bytes],
    origins: Sequence[bytes | None] | None,
) -> tuple[list[tuple[Any, ...]], int, int]:
    """The `events` rows for the events of `batch` not `seen` (they are added to it), linked
    on from `last` (seq, hash): the rows, the last seq, and how many were duplicates."""
    last_seq, last_hash = last
    recorded = time.time_ns() // 1000
    rows: list[tuple[Any, ...]] = []
    duplicates = 0
    for i, (stream, type_, version, time_us, source, key, body) in enumerate(batch):
        sid = source_ids[source]
        if (sid, key) in seen:
            duplicates += 1
            continue
        seen.add((sid, key))
        seq = last_seq + 1
        origin = None if origins is None else origins[i]
        h = event_hash(
            last_hash, seq, stream, type_, version, time_us, recorded, source, key, body, origin
        )
        rows.append(
            (
                seq,
                stream,
                type_,
                version,
                time_us,
                recorded,
                sid,
                key,
                body.decode(),
                h,
                None if origin is None else origin.decode(),
            )
        )
        last_seq, last_hash = seq, h
    return rows, last_seq, duplicates
