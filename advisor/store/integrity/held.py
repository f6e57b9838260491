"""A `ship.held` event in a central store: the range of a host's events the host kept
(`advisor.fleet.selection`), bridged in the host's chain by the hash before the range (its
payload) and the hash after it (its origin, like any shipped event's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from pydantic import ValidationError

from advisor.core.payloads import LinesHeld

HELD_TYPE: Final[str] = LinesHeld.model_fields["type"].default
HELD_STREAM: Final = "@held"  # HOST/@held: no unit name starts with "@"


@dataclass(frozen=True)
class HeldRange:
    first_seq: int
    last_seq: int
    from_hash: bytes


def held_range(payload: str, key: int) -> HeldRange | None:
    """The range a `ship.held` payload stands for, keyed `key` (its last host seq); None
    when it is not one (malformed, or its range does not end at its key)."""
    try:
        held = LinesHeld.model_validate_json(payload)
    except ValidationError:
        return None
    if held.last_seq != key or held.first_seq > held.last_seq:
        return None
    return HeldRange(held.first_seq, held.last_seq, bytes.fromhex(held.from_hash))


@dataclass(frozen=True)
class RangeFault:
    """Where a host's chain breaks at a kept range, and how: the range starts from another
    hash than the chain's there (`starts_elsewhere`), or it does not follow the seq before
    it (or is no range at all)."""

    first_bad_seq: int
    starts_elsewhere: bool


def range_fault(
    payload: str, key: int, next_seq: int, prev_hash: bytes | None
) -> RangeFault | None:
    """None when the `ship.held` payload keyed `key` is a range that starts at `next_seq`
    from the chain's hash `prev_hash` (None: nothing to compare, the events before were
    shipped before origins were kept); else the fault. The shipping writer and `advisor
    verify` both judge a range by it."""
    held = held_range(payload, key)
    if held is None or held.first_seq != next_seq:
        return RangeFault(next_seq, starts_elsewhere=False)
    if prev_hash is not None and held.from_hash != prev_hash:
        return RangeFault(held.first_seq, starts_elsewhere=True)
    return None
