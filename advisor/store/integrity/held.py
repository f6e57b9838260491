"""A `ship.held` event in a central store: the range of a host's events the host kept
(`advisor.fleet.selection`), bridged in the host's chain by the hash before the range (its
payload) and the hash after it (its origin, like any shipped event's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from pydantic import ValidationError

from advisor.core.payloads import LinesHeld

HELD_TYPE: Final[str] = LinesHeld.model_fields["type"].default


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
