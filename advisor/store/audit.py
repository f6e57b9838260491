"""Walk the hash chain (`advisor verify`) and summarise the store (`advisor status`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import func, select

from advisor.store import migrate
from advisor.store.schema import checkpoints, events, sources
from advisor.store.store import GENESIS_HASH, EventStore, event_hash


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
    """Recompute every hash in sequence order; name the first event that does not match."""
    query = (select(events.c.seq, events.c.stream, events.c.type, events.c.schema_version,
                    events.c.event_time_us, events.c.recorded_time_us, sources.c.name,
                    events.c.idem_key, events.c.payload, events.c.hash)
             .join(sources, sources.c.id == events.c.source_id)
             .order_by(events.c.seq))
    prev, expected_seq, checked = GENESIS_HASH, 1, 0
    with store.engine.connect() as conn:
        while True:
            rows = conn.execute(query.where(events.c.seq >= expected_seq).limit(chunk)).all()
            for seq, stream, type_, version, t, rec, source, key, payload, stored in rows:
                if seq != expected_seq:
                    return VerifyReport(checked, seq, expected_seq,
                                        f"sequence gap: event {expected_seq} is missing")
                h = event_hash(prev, seq, stream, type_, version, t, rec, source, key,
                               payload.encode())
                if h != bytes(stored):
                    return VerifyReport(checked, seq, seq,
                                        "hash mismatch: content or chain was altered")
                prev, expected_seq, checked = h, seq + 1, checked + 1
            if progress is not None:
                progress(checked)
            if len(rows) < chunk:
                return VerifyReport(checked, expected_seq - 1)


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
