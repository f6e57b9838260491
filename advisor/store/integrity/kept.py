"""A host's kept events in a central store: asked for by range, taken whole or not at all,
and only as the events the host kept.

A host keeps its routine lines (`advisor.fleet.selection`); each run of them stands in the
central store as a `ship.held` event: the range's first and last host seq, the host's chain
hash before it (payload) and after it (origin). The owner asks for a range in
`fetch_requests` (`advisor.store.integrity.fetchrequests`); the host's shipper answers
(`advisor.fleet.fetch`). The central store takes the range's events only when they are every
host seq of it, in order, each extending the host's chain from the range's starting hash,
the last ending at its closing hash (`kept_fault`) — the hash the host committed to when it
shipped the range, which a head it signed there names. They are stored with source
`kept:HOST` and the host seq as key, so a range fetched twice is a duplicate. In PostgreSQL
`advisor_ship_kept` (migration 0014) makes the checks and the append itself; another store
(SQLite: development, tests) gets them here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson
from sqlalchemy import Connection, Select, select, text

from advisor.core.errors import IntegrityError
from advisor.core.events import Prepared
from advisor.store.chain import RawEvent
from advisor.store.engine import in_parts
from advisor.store.integrity.fetchrequests import answered
from advisor.store.integrity.held import HELD_STREAM, HELD_TYPE, HeldRange, held_range
from advisor.store.schema import events, sources
from advisor.store.store import SHIP_PREFIX, EventStore

__all__ = [
    "KEPT_PREFIX",
    "NOTE_CHARS",
    "SLACK_US",
    "Kept",
    "decline",
    "fetched_any",
    "fetched_keys",
    "kept_call",
    "kept_events",
    "kept_fault",
    "kept_of",
    "kept_ranges",
    "take_kept",
]

KEPT_PREFIX: Final = "kept:"  # the source of a host's kept events sent when asked
NOTE_CHARS: Final = 500  # migration 0014's bound on a host's reason
# A range's `ship.held` event carries its last event's time; one that starts in a window ends
# at most this much later (a run of kept events waits at most a minute for company, and a
# host catching up after a long silence closes one every 5,000 events).
SLACK_US: Final = 3_600_000_000
_KEPT_SQL = text(
    "SELECT appended, duplicates FROM advisor_ship_kept(:host, :held, :note, "
    "CAST(:keys AS bigint[]), CAST(:streams AS text[]), CAST(:types AS text[]), "
    "CAST(:versions AS integer[]), CAST(:times AS bigint[]), CAST(:recorded AS bigint[]), "
    "CAST(:sources AS text[]), CAST(:source_keys AS bigint[]), CAST(:payloads AS text[]), "
    "CAST(:hashes AS bytea[]))"
)


@dataclass(frozen=True)
class Kept:
    """A range of a host's events that the host kept, as its `ship.held` event says: the
    host seqs, their first and last time, how many events each stream had, the hashes
    before and after."""

    held: HeldRange
    closing: bytes
    first_time_us: int
    last_time_us: int
    streams: dict[str, int]

    @property
    def key(self) -> int:
        return self.held.last_seq

    @property
    def events(self) -> int:
        return self.held.last_seq - self.held.first_seq + 1


def kept_of(payload: str, key: int, origin: str | None) -> Kept | None:
    """The range a `ship.held` event (payload, key, origin) stands for; None when it is not
    one."""
    held = held_range(payload, key)
    if held is None or origin is None:
        return None
    try:
        body = orjson.loads(payload)
        closing = bytes.fromhex(orjson.loads(origin)["hash"])
    except (ValueError, KeyError, TypeError):
        return None
    return Kept(held, closing, body["first_time_us"], body["last_time_us"], body["streams"])


def _held_events(host: str) -> Select[Any]:
    """`host`'s `ship.held` events (key, payload, origin): the ranges it kept."""
    return (
        select(events.c.idem_key, events.c.payload, events.c.origin)
        .join(sources, sources.c.id == events.c.source_id)
        .where(events.c.type == HELD_TYPE)
        .where(sources.c.name == f"{SHIP_PREFIX}{host}")
    )


def kept_ranges(
    central: EventStore, host: str, from_us: int, to_us: int, *, slack_us: int = SLACK_US
) -> list[Kept]:
    """The ranges `host` kept that hold events between `from_us` and `to_us`: their
    `ship.held` events, read on the host's `@held` stream's time index from `from_us` to
    `to_us + slack_us` (a range's event carries its last event's time: one that starts
    before `to_us` ends at most `slack_us` later)."""
    found: list[Kept] = []
    with central.connect() as conn:
        rows = conn.execute(
            _held_events(host)
            .where(events.c.stream == f"{host}/{HELD_STREAM}")
            .where(events.c.event_time_us >= from_us)
            .where(events.c.event_time_us <= to_us + slack_us)
            .order_by(events.c.event_time_us, events.c.seq)
        )
        for key, payload, origin in rows:
            kept = kept_of(payload, int(key), origin)
            if kept is not None and kept.first_time_us <= to_us and kept.last_time_us >= from_us:
                found.append(kept)
    return found


def fetched_any(central: EventStore, host: str) -> bool:
    """Whether the central store ever took a range `host` kept."""
    with central.connect() as conn:
        name = f"{KEPT_PREFIX}{host}"
        return conn.execute(select(sources.c.id).where(sources.c.name == name)).first() is not None


def fetched_keys(central: EventStore, host: str, keys: Sequence[int]) -> set[int]:
    """Which of these ranges (by their last host seq) the central store holds the events of
    (a range is stored whole or not at all)."""
    held: set[int] = set()
    with central.connect() as conn:
        sid = conn.execute(
            select(sources.c.id).where(sources.c.name == f"{KEPT_PREFIX}{host}")
        ).scalar()
        if sid is None:
            return held
        for part in in_parts(keys):
            held.update(
                int(k)
                for k in conn.execute(
                    select(events.c.idem_key)
                    .where(events.c.source_id == sid)
                    .where(events.c.idem_key.in_(part))
                ).scalars()
            )
    return held


def kept_events(central: EventStore, host: str, kept: Kept) -> list[RawEvent]:
    """A fetched range's events as the host held them (its seqs, envelopes and hashes, from
    each event's origin), in host seq order; an event whose origin is not an advisor origin
    reads with no hash, which `kept_fault` refuses."""
    got: list[RawEvent] = []
    with central.connect() as conn:
        rows = conn.execute(
            select(
                events.c.idem_key,
                events.c.stream,
                events.c.type,
                events.c.schema_version,
                events.c.event_time_us,
                events.c.payload,
                events.c.origin,
            )
            .join(sources, sources.c.id == events.c.source_id)
            .where(sources.c.name == f"{KEPT_PREFIX}{host}")
            .where(events.c.idem_key.between(kept.held.first_seq, kept.held.last_seq))
            .order_by(events.c.idem_key)
        )
        for key, stream, type_, version, time_us, payload, origin_text in rows:
            try:
                o = orjson.loads(origin_text or "null")
                envelope = (int(o["recorded_us"]), str(o["source"]), int(o["key"]))
                hash_ = bytes.fromhex(o["hash"])
            except (ValueError, KeyError, TypeError):
                envelope, hash_ = (0, "", 0), b""
            got.append(
                RawEvent(int(key), stream, type_, version, time_us, *envelope, payload, hash_, None)
            )
    return got


def kept_fault(kept: Kept, got: Sequence[RawEvent]) -> tuple[int, str] | None:
    """None when `got` are the range's events: every host seq of it in order, each
    extending the host's chain from the range's starting hash, the last at its closing hash;
    else the first host seq that is not, and why."""
    prev, expected = kept.held.from_hash, kept.held.first_seq
    for e in got:
        if e.seq != expected or e.seq > kept.held.last_seq:
            return expected, f"seq {e.seq} is not the next of the kept range"
        h = e.recomputed_hash(prev)
        if h != e.hash:
            return e.seq, f"seq {e.seq} does not extend the host's chain from the range's start"
        prev, expected = h, expected + 1
    if expected != kept.held.last_seq + 1:
        return expected, f"the range ends at seq {expected - 1}, not {kept.held.last_seq}"
    if prev != kept.closing:
        return kept.held.first_seq, "the range does not end at the hash the host shipped for it"
    return None


def _held(central: EventStore, host: str, held_key: int) -> Kept:
    with central.connect() as conn:
        row = conn.execute(_held_events(host).where(events.c.idem_key == held_key)).first()
    kept = None if row is None else kept_of(row[1], held_key, row[2])
    if kept is None:
        raise IntegrityError(
            f"host {host} kept no range ending at its seq {held_key} here",
            first_bad_seq=held_key,
        )
    return kept


def take_kept(central: EventStore, host: str, held_key: int, got: Sequence[RawEvent]) -> int:
    """A store other than PostgreSQL (development, tests): the checks of
    `advisor_ship_kept`, then the range's events appended (none again when they are there)
    and the request answered; how many were appended."""
    from advisor.store.integrity.central import origin

    kept = _held(central, host, held_key)
    fault = kept_fault(kept, got)
    if fault is not None:
        raise IntegrityError(
            f"host {host}: its kept range {kept.held.first_seq}..{held_key}: {fault[1]}: "
            "these are not the events it kept",
            first_bad_seq=fault[0],
        )
    outgoing: list[Prepared] = [
        (e.stream, e.type, e.version, e.time_us, f"{KEPT_PREFIX}{host}", e.seq, e.payload.encode())
        for e in got
    ]
    result = central.append_prepared(outgoing, origins=[origin(e) for e in got])
    answered(central, host, held_key, len(got), None)
    return result.appended


def decline(central: EventStore, host: str, held_key: int, note: str) -> None:
    """A store other than PostgreSQL: the host cannot send the range, and says why."""
    _held(central, host, held_key)
    answered(central, host, held_key, 0, note[:NOTE_CHARS] or "the host sent no events")


def kept_call(
    conn: Connection, host: str, held_key: int, got: Sequence[RawEvent], note: str
) -> tuple[int, int]:
    """PostgreSQL: the range through the owner's `advisor_ship_kept` (with no events:
    `note`, why not); (appended, duplicates)."""
    params: dict[str, Any] = {
        "host": host,
        "held": held_key,
        "note": note[:NOTE_CHARS],
        "keys": [e.seq for e in got],
        "streams": [e.stream for e in got],
        "types": [e.type for e in got],
        "versions": [e.version for e in got],
        "times": [e.time_us for e in got],
        "recorded": [e.recorded_us for e in got],
        "sources": [e.source for e in got],
        "source_keys": [e.key for e in got],
        "payloads": [e.payload for e in got],
        "hashes": [e.hash for e in got],
    }
    row = conn.execute(_KEPT_SQL, params).one()
    return int(row[0]), int(row[1])
