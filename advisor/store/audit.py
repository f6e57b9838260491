"""Walk the hash chain (`advisor verify`) and summarise the store (`advisor status`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import func, select

from advisor.events import ChainAnchor, StoreRetained
from advisor.store import migrate
from advisor.store.schema import checkpoints, events, sources
from advisor.store.store import GENESIS_HASH, SHIP_PREFIX, EventStore, event_hash
from advisor.store.types import EventFilter


@dataclass(frozen=True)
class VerifyReport:
    checked: int
    last_seq: int
    first_bad_seq: int | None = None
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.first_bad_seq is None


def verify(store: EventStore, *, chunk: int = 10_000,
           progress: Callable[[int], None] | None = None) -> VerifyReport:
    """Recompute every hash in sequence order; name the first event that does not match.
    Where old events were retained (`advisor retention`), start from their anchor."""
    prev, expected_seq, checked = GENESIS_HASH, 1, 0
    for event in store.read_raw(chunk=chunk):
        if checked == 0 and event.seq > 1:
            anchor = anchors(store)[0].get(event.seq - 1)
            if anchor is not None:
                prev, expected_seq = bytes.fromhex(anchor.hash), event.seq
        if event.seq != expected_seq:
            return VerifyReport(checked, event.seq, expected_seq,
                                f"sequence gap: event {expected_seq} is missing")
        h = event.recomputed_hash(prev)
        if h != event.hash:
            return VerifyReport(checked, event.seq, event.seq,
                                "hash mismatch: content or chain was altered")
        prev, expected_seq, checked = h, event.seq + 1, checked + 1
        if progress is not None and checked % chunk == 0:
            progress(checked)
    if progress is not None:
        progress(checked)
    return VerifyReport(checked, expected_seq - 1)


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

    @property
    def ok(self) -> bool:
        return self.first_bad_seq is None


def shipped_sources(store: EventStore) -> list[str]:
    with store.engine.connect() as conn:
        return list(conn.execute(select(sources.c.name)
                                 .where(sources.c.name.startswith(SHIP_PREFIX, autoescape=True))
                                 .order_by(sources.c.name)).scalars())


def verify_host(store: EventStore, source: str) -> HostChainReport:
    """Walk one host's chain as shipped (key = the host's seq, `origin` = the rest of the
    host's envelope) from its first event; name the first host seq that does not match."""
    host = source.removeprefix(SHIP_PREFIX)
    prev, expected, checked, unchecked = GENESIS_HASH, 1, 0, 0
    anchor = anchors(store)[1].get(source)
    if anchor is not None:  # its older events were retained
        prev, expected = bytes.fromhex(anchor.hash), anchor.seq + 1
    for event in store.read_raw(source=source):
        if event.origin is None:
            unchecked += 1
            continue
        origin = orjson.loads(event.origin)
        if checked == 0 and unchecked and event.key == expected + unchecked:
            # the first with its origin after older ones without: the chain starts here
            prev, expected, unchecked = bytes.fromhex(origin["hash"]), event.key + 1, unchecked + 1
            continue
        if event.key != expected:
            return HostChainReport(host, checked, event.key, expected,
                                   f"host event {expected} was not shipped", unchecked)
        h = event_hash(prev, event.key, event.stream, event.type, event.version, event.time_us,
                       origin["recorded_us"], origin["source"], origin["key"],
                       event.payload.encode())
        if h.hex() != origin["hash"]:
            return HostChainReport(host, checked, event.key, event.key,
                                   "hash mismatch: the host's content or chain was altered",
                                   unchecked)
        prev, expected, checked = h, event.key + 1, checked + 1
    return HostChainReport(host, checked, expected - 1, unchecked=unchecked)


def retentions(store: EventStore) -> list[StoreRetained]:
    """The store.retained events (`advisor retention`), oldest first."""
    return [e.payload for e in store.read(EventFilter(type="store.retained"))
            if isinstance(e.payload, StoreRetained)]


def anchors(store: EventStore) -> tuple[dict[int, ChainAnchor], dict[str, ChainAnchor]]:
    """From the store.retained events: the store chain's anchors by the seq they end at, and
    each shipping host's latest anchor (by its source name)."""
    chain: dict[int, ChainAnchor] = {}
    hosts: dict[str, ChainAnchor] = {}
    for retained in retentions(store):
        chain[retained.anchor.seq] = retained.anchor
        for source, anchor in retained.hosts.items():
            if source not in hosts or anchor.seq > hosts[source].seq:
                hosts[source] = anchor
    return chain, hosts


def last_seq(store: EventStore) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(select(func.coalesce(func.max(events.c.seq), 0))).scalar_one())


@dataclass
class StoreStatus:
    url: str
    revision: str | None
    head_revision: str | None
    events: int
    last_seq: int | None
    by_type: dict[str, int] = field(default_factory=dict)
    by_stream: dict[str, int] = field(default_factory=dict)
    checkpoints: dict[str, dict[str, Any]] = field(default_factory=dict)


def status(store: EventStore) -> StoreStatus:
    with store.engine.connect() as conn:
        revision = migrate.current_revision(conn)
        by_type: dict[str, int] = dict(conn.execute(select(events.c.type, func.count())
                                    .group_by(events.c.type).order_by(events.c.type)).all())
        by_stream: dict[str, int] = dict(conn.execute(select(events.c.stream, func.count())
                                      .group_by(events.c.stream).order_by(events.c.stream)).all())
        last_seq = conn.execute(select(func.max(events.c.seq))).scalar()
        cps = {name: {**orjson.loads(pos), "updated_time_us": updated}
               for name, pos, updated in conn.execute(
                   select(checkpoints.c.name, checkpoints.c.position,
                          checkpoints.c.updated_time_us).order_by(checkpoints.c.name))}
    return StoreStatus(url=store.display_url, revision=revision,
                       head_revision=migrate.head_revision(), events=sum(by_type.values()),
                       last_seq=last_seq, by_type=by_type, by_stream=by_stream, checkpoints=cps)
