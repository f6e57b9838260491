"""The store.retained events (`advisor retention`) and the chain anchors they leave: where
the store's chain, and each shipping host's, goes on after the events retained."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select

from advisor.core.payloads import ChainAnchor, StoreRetained
from advisor.store.schema import events
from advisor.store.store import EventStore
from advisor.store.types import EventFilter

__all__ = ["anchors", "last_seq", "retentions"]


def retentions(store: EventStore) -> list[StoreRetained]:
    """The store.retained events (`advisor retention`), oldest first."""
    return [
        e.payload
        for e in store.read(EventFilter(type="store.retained"))
        if isinstance(e.payload, StoreRetained)
    ]


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


def last_seq(store: EventStore, types: Sequence[str] = ()) -> int:
    """The newest event's seq (0: none); with `types`, the newest of those types (one read
    of the type index)."""
    query = select(func.coalesce(func.max(events.c.seq), 0))
    if types:
        query = query.where(events.c.type.in_(types))
    with store.connect() as conn:
        return int(conn.execute(query).scalar_one())
