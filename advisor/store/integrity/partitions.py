"""The partitions of a central PostgreSQL store's `events` (migration 0006): what each holds,
the chain anchors at a partition's end, and detaching one (`advisor.fleet.retention`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import orjson
from sqlalchemy import text

from advisor.core.errors import StoreError
from advisor.core.payloads import ChainAnchor
from advisor.store.store import SHIP_PREFIX, EventStore

_BOUND = re.compile(r"FROM \((?P<lo>[^)]*)\) TO \((?P<hi>[^)]*)\)")
_HOST_ANCHORS = text(
    "SELECT DISTINCT ON (e.source_id) s.name, e.idem_key, e.origin FROM events e "
    "JOIN sources s ON s.id = e.source_id WHERE e.seq BETWEEN :lo AND :hi "
    "AND s.name LIKE :ship AND e.origin IS NOT NULL "
    "ORDER BY e.source_id, e.idem_key DESC"
)


@dataclass(frozen=True)
class Partition:
    name: str
    below: int  # seqs below this (and from the previous partition's)
    events: int = 0
    first_seq: int | None = None
    last_seq: int | None = None
    last_recorded_us: int | None = None


def attached(store: EventStore) -> list[Partition]:
    """The attached partitions of `events`, oldest first, with what they hold."""
    with store.connect() as conn:
        found = conn.execute(
            text(
                "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i "
                "JOIN pg_class c ON c.oid = i.inhrelid "
                "WHERE i.inhparent = to_regclass('events')"
            )
        ).all()
        out = []
        for name, bound in found:
            match = _BOUND.search(bound or "")
            if match is None:
                raise StoreError(f"partition {name} has an unexpected bound: {bound}")
            # By the primary key only, not a scan: seqs have no gaps (verify checks that, and
            # the export is counted back), and a partition's events were appended in seq
            # order, so its last event is its last recorded.
            table = conn.dialect.identifier_preparer.quote(name)
            low, high = conn.execute(text(f"SELECT min(seq), max(seq) FROM {table}")).one()
            recorded = (
                None
                if high is None
                else conn.execute(
                    text(f"SELECT recorded_time_us FROM {table} WHERE seq = :s"), {"s": high}
                ).scalar()
            )
            out.append(
                Partition(
                    name,
                    int(match["hi"].strip("'")),
                    0 if high is None else high - low + 1,
                    low,
                    high,
                    recorded,
                )
            )
    return sorted(out, key=lambda p: p.below)


def detach(store: EventStore, name: str) -> None:
    """Detach a partition: it stays in the database as a table of its own."""
    with store.begin() as conn:
        conn.execute(
            text(
                "ALTER TABLE events DETACH PARTITION "
                + conn.dialect.identifier_preparer.quote(name)
            )
        )


def chain_anchor(store: EventStore, seq: int) -> ChainAnchor:
    """The store chain's anchor at `seq`: the seq and its event's hash."""
    with store.connect() as conn:
        value = conn.execute(
            text("SELECT hash FROM events WHERE seq = :s"), {"s": seq}
        ).scalar_one()
    return ChainAnchor(seq=seq, hash=bytes(value).hex())


def host_anchors(store: EventStore, first_seq: int, last_seq: int) -> dict[str, ChainAnchor]:
    """Each shipping host's last event between two seqs: its own seq and its own hash, by
    its source name."""
    with store.connect() as conn:
        rows = conn.execute(
            _HOST_ANCHORS, {"lo": first_seq, "hi": last_seq, "ship": SHIP_PREFIX + "%"}
        ).all()
    return {
        name: ChainAnchor(seq=key, hash=orjson.loads(origin)["hash"]) for name, key, origin in rows
    }
