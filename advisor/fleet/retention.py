"""Retention for a central PostgreSQL store: old partitions exported to Parquet, recorded as an
event, then detached.

`events` there is partitioned by blocks of sequence numbers (migration 0006). A partition is
retained when its events were recorded before the cutoff (its last one was); only a prefix of
the chain is ever retained (the oldest partitions, never the one being written), so what
stays is one contiguous chain. For each partition, oldest first:

1. its events are written to Parquet under DIR/events/day=…/host=…/ (the layout of
   `advisor export parquet`, plus each event's hash and origin), and the rows are counted back;
2. a `store.retained` event records the partition, its range, the export, and the chain
   anchors: the last retained event's seq and hash, and for each shipping host the last of its
   own seqs there with its host hash, so `advisor verify` resumes the chains from them;
3. the partition is detached (`ALTER TABLE events DETACH PARTITION`): it stays in the
   database as a table of its own until the owner drops it.

Running it again after an interruption finishes the work: a partition already recorded is not
exported again, only detached.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from advisor.core.errors import InputError, StoreError
from advisor.core.events import NewEvent
from advisor.core.payloads import StoreRetained
from advisor.reports.analytics import connect_store, events_select
from advisor.reports.sandbox import sql_literal
from advisor.store import EventStore
from advisor.store.integrity.partitions import (
    Partition,
    attached,
    chain_anchor,
    detach,
    host_anchors,
)
from advisor.store.integrity.retained import retentions

STREAM: Final = "store/retention"
SOURCE: Final = "advisor-retention"


@dataclass(frozen=True)
class Retained:
    partition: str
    first_seq: int
    last_seq: int
    events: int
    files: int
    event_seq: int | None  # the store.retained event (None: recorded by an earlier run)


def partitions(store: EventStore) -> list[Partition]:
    """The attached partitions of `events`, oldest first, with what they hold."""
    _require_partitioned(store)
    return attached(store)


def retainable(store: EventStore, recorded_before_us: int) -> list[Partition]:
    """The oldest partitions whose last event was recorded before the cutoff, stopping at
    the first that is not (and never the newest, which is being written)."""
    found = partitions(store)
    out = []
    for partition in found[:-1]:
        if (
            not partition.events
            or partition.last_recorded_us is None
            or partition.last_recorded_us >= recorded_before_us
        ):
            break
        out.append(partition)
    return out


def retain(store: EventStore, recorded_before_us: int, folder: Path) -> list[Retained]:
    """Export, record and detach every retainable partition (see the module's text)."""
    done = []
    already = {r.partition: r for r in retentions(store)}
    for partition in retainable(store, recorded_before_us):
        assert partition.first_seq is not None and partition.last_seq is not None
        recorded = already.get(partition.name)
        files, event_seq = 0, None
        if recorded is None:
            files = _export(store, partition, folder)
            event = NewEvent(
                stream=STREAM,
                time_us=time.time_ns() // 1000,
                source=SOURCE,
                key=partition.first_seq,
                payload=StoreRetained(
                    partition=partition.name,
                    first_seq=partition.first_seq,
                    events=partition.events,
                    recorded_before_us=recorded_before_us,
                    exported_to=str(folder.resolve()),
                    files=files,
                    anchor=chain_anchor(store, partition.last_seq),
                    hosts=host_anchors(store, partition.first_seq, partition.last_seq),
                ),
            )
            event_seq = store.append([event]).last_seq
        else:
            files = recorded.files
        detach(store, partition.name)
        done.append(
            Retained(
                partition.name,
                partition.first_seq,
                partition.last_seq,
                partition.events,
                files,
                event_seq,
            )
        )
    return done


def _require_partitioned(store: EventStore) -> None:
    if store.dialect != "postgresql":
        raise InputError(
            f"{store.display_url}: retention detaches partitions of a central "
            "PostgreSQL store; a host's SQLite store is kept whole"
        )


def _export(store: EventStore, partition: Partition, folder: Path) -> int:
    """The partition's events as Parquet under folder/events/day=…/host=…/; the rows are
    counted back from the files before anything is recorded."""
    conn = connect_store(store.url)
    try:
        name = partition.name
        target = folder / "events"
        target.mkdir(parents=True, exist_ok=True)
        rows = events_select(name, extra=", lower(hex(e.hash)) AS hash, e.origin")
        conn.con.execute(
            f"COPY (SELECT *, strftime(time, '%Y-%m-%d') AS day FROM ({rows})) "
            f"TO {sql_literal(str(target))} (FORMAT parquet, PARTITION_BY (day, host), "
            f"FILENAME_PATTERN {sql_literal(name + '_{i}')}, OVERWRITE_OR_IGNORE)"
        )
        written = sorted(target.rglob(f"{name}_*.parquet"))
        row = conn.con.execute(
            f"SELECT count(*) FROM read_parquet({_literal_list(written)})"
        ).fetchone()
        if not written or row is None or row[0] != partition.events:
            raise StoreError(
                f"retention: the export of {name} holds "
                f"{row[0] if row else 0} events, not {partition.events}; "
                "nothing was detached"
            )
        return len(written)
    finally:
        conn.close()


def _literal_list(paths: list[Path]) -> str:
    return "[" + ", ".join(sql_literal(str(p)) for p in paths) + "]"
