"""Shipped hosts' chains in a central store: each host's chain recomputed from what it
shipped (`advisor verify`), and compared with the heads the host signed and shipped."""

from __future__ import annotations

from dataclasses import dataclass, replace

import orjson
from sqlalchemy import func, select, text

from advisor.core.payloads import ChainAnchor
from advisor.store.chain import GENESIS_HASH, RawEvent, event_hash
from advisor.store.integrity.heads import HeadFinding, SignedHead, compare_heads
from advisor.store.integrity.held import HELD_TYPE, range_fault
from advisor.store.integrity.kept import (
    fetched_any,
    fetched_keys,
    kept_events,
    kept_fault,
    kept_of,
)
from advisor.store.integrity.retained import anchors
from advisor.store.schema import events, sources
from advisor.store.store import SHIP_PREFIX, EventStore

__all__ = ["HostChainReport", "central_head_findings", "shipped_sources", "verify_host"]


@dataclass(frozen=True)
class HostChainReport:
    """A host's own chain, recomputed in the central store from what it shipped."""

    host: str
    checked: int
    last_seq: int
    first_bad_seq: int | None = None
    reason: str | None = None
    # Shipped before events carried their origin (and the first after those, whose link to
    # them cannot be recomputed): the chain is checked from there on.
    unchecked: int = 0
    kept: int = 0  # kept events fetched from the host, checked against their ranges

    @property
    def ok(self) -> bool:
        return self.first_bad_seq is None


def shipped_sources(store: EventStore) -> list[str]:
    with store.connect() as conn:
        return list(
            conn.execute(
                select(sources.c.name)
                .where(sources.c.name.startswith(SHIP_PREFIX, autoescape=True))
                .order_by(sources.c.name)
            ).scalars()
        )


def verify_host(store: EventStore, source: str) -> HostChainReport:
    """Walk one host's chain as shipped (key = the host's seq, `origin` = the rest of the
    host's envelope) from its first event; name the first host seq that does not match.
    Only a prefix of events without an origin (shipped before origins were kept) goes
    unchecked: one after the chain started was not shipped by advisor."""
    host = source.removeprefix(SHIP_PREFIX)
    prev, expected, checked, unchecked = GENESIS_HASH, 1, 0, 0
    anchor = anchors(store)[1].get(source)
    started = anchor is not None
    if anchor is not None:  # its older events were retained
        prev, expected = bytes.fromhex(anchor.hash), anchor.seq + 1
    held: list[RawEvent] = []  # its kept ranges, to check those fetched against

    def bad(key: int, first_bad: int, reason: str) -> HostChainReport:
        return HostChainReport(host, checked, key, first_bad, reason, unchecked)

    for event in store.read_raw(source=source):
        if event.origin is None:
            if started:
                return bad(
                    event.key,
                    event.key,
                    "no origin: this event was not shipped by the host "
                    "(written into the central store directly)",
                )
            unchecked += 1
            continue
        origin = _origin(event.origin)
        if origin is None:
            return bad(event.key, event.key, "the origin is not an advisor origin")
        claimed, recorded, key, name = origin
        if not started and unchecked and event.key == expected + unchecked:
            # the first with its origin after older ones without: the chain starts here
            prev, expected, unchecked = claimed, event.key + 1, unchecked + 1
            started = True
            continue
        started = True
        if event.type == HELD_TYPE:  # a range the host kept: bridged by its two hashes
            fault = range_fault(event.payload, event.key, expected, prev)
            if fault is not None:
                return bad(
                    event.key,
                    fault.first_bad_seq,
                    "a kept range does not start from the host's chain as shipped"
                    if fault.starts_elsewhere
                    else f"host event {expected} was not shipped",
                )
            prev, expected = claimed, event.key + 1
            held.append(event)
            continue
        if event.key != expected:
            return bad(event.key, expected, f"host event {expected} was not shipped")
        h = _host_hash(prev, event, recorded, name, key)
        if h != claimed:
            return bad(
                event.key, event.key, "hash mismatch: the host's content or chain was altered"
            )
        prev, expected, checked = h, event.key + 1, checked + 1
    report = HostChainReport(host, checked, expected - 1, unchecked=unchecked)
    return _with_fetched(store, report, held)


def _with_fetched(
    store: EventStore, report: HostChainReport, held: list[RawEvent]
) -> HostChainReport:
    """`report` with the kept ranges fetched from its host checked, each against the two
    hashes its `ship.held` event (of `held`, met in the walk) holds: how many events were,
    or the first fault."""
    if not report.ok or not fetched_any(store, report.host):
        return report
    found = (kept_of(e.payload, e.key, e.origin) for e in held)
    ranges = [r for r in found if r is not None]
    fetched = fetched_keys(store, report.host, [r.key for r in ranges])
    checked = 0
    for kept in (r for r in ranges if r.key in fetched):
        wrong = kept_fault(kept, kept_events(store, report.host, kept))
        if wrong is not None:
            reason = f"a kept range fetched from the host is not what it kept: {wrong[1]}"
            return replace(report, first_bad_seq=wrong[0], reason=reason, kept=checked)
        checked += kept.events
    return replace(report, kept=checked)


def _origin(text_: str) -> tuple[bytes, int, int, str] | None:
    """(hash, recorded µs, key, source) of a shipped event's origin on its host; None when
    it is not an advisor origin."""
    try:
        origin = orjson.loads(text_)
        claimed = bytes.fromhex(origin["hash"])
        recorded, key, name = origin["recorded_us"], origin["key"], origin["source"]
    except (ValueError, KeyError, TypeError):
        return None
    if not (isinstance(recorded, int) and isinstance(key, int) and isinstance(name, str)):
        return None
    return claimed, recorded, key, name


def _host_hash(prev: bytes, event: RawEvent, recorded: int, source: str, key: int) -> bytes:
    """The hash the host gave `event`, from its envelope there."""
    return event_hash(
        prev,
        event.key,
        event.stream,
        event.type,
        event.version,
        event.time_us,
        recorded,
        source,
        key,
        event.payload.encode(),
    )


def central_head_findings(store: EventStore) -> dict[str, list[HeadFinding]]:
    """A central store: each host's chain as shipped compared with the heads the host signed
    and shipped (`advisor_host_heads`), keyed by host seq and checked against the public key
    registered for the host (`advisor_shippers`), else the key the heads carry. Empty where
    the store keeps no heads (SQLite, or before migration 0009)."""
    if store.dialect != "postgresql":
        return {}
    with store.connect() as conn:
        if conn.execute(text("SELECT to_regclass('advisor_host_heads')")).scalar() is None:
            return {}
        rows = conn.execute(
            text(
                "SELECT h.host, h.seq, h.hash, h.time_us, h.public_key, h.signature, h.store, "
                "e.origin, k.public_key FROM advisor_host_heads h "
                "LEFT JOIN sources s ON s.name = :prefix || h.host "
                "LEFT JOIN events e ON e.source_id = s.id AND e.idem_key = h.seq "
                "LEFT JOIN advisor_shippers k ON k.host = h.host "
                "ORDER BY h.host, h.seq"
            ),
            {"prefix": SHIP_PREFIX},
        ).all()
    by_host: dict[str, list[tuple[SignedHead, bytes | None]]] = {}
    trusted: dict[str, bytes | None] = {}
    for host, seq, hash_, time_us, public_key, signature, label, origin, registered in rows:
        stored: bytes | None = None
        if origin is not None:
            try:
                stored = bytes.fromhex(orjson.loads(origin)["hash"])
            except (ValueError, KeyError, TypeError):
                stored = None
        head = SignedHead(
            host, int(seq), bytes(hash_), int(time_us), bytes(public_key), bytes(signature), label
        )
        by_host.setdefault(host, []).append((head, stored))
        trusted[host] = None if registered is None else bytes(registered)
    findings: dict[str, list[HeadFinding]] = {}
    for host, pairs in by_host.items():
        source = f"{SHIP_PREFIX}{host}"
        anchor = anchors(store)[1].get(source)
        stored_at = {head.seq: stored for head, stored in pairs}
        if anchor is not None and stored_at.get(anchor.seq) is None:
            stored_at[anchor.seq] = bytes.fromhex(anchor.hash)
        # heads at seqs whose events were retained (below the anchor) cannot be compared
        heads = [head for head, _ in pairs if anchor is None or head.seq >= anchor.seq]
        findings[host] = compare_heads(
            heads, stored_at.get, _host_last_seq(store, source, anchor), trusted[host]
        )
    return findings


def _host_last_seq(store: EventStore, source: str, anchor: ChainAnchor | None) -> int:
    with store.connect() as conn:
        value = conn.execute(
            select(func.max(events.c.idem_key))
            .join(sources, sources.c.id == events.c.source_id)
            .where(sources.c.name == source)
        ).scalar()
    return max(int(value or 0), anchor.seq if anchor is not None else 0)
