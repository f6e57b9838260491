"""A stream's stored log lines read a page at a time on the stream's time index, in (time,
seq) order: the one range read that both the fold (`cutting`) and the run readers
(`reading`) walk."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy import Connection, Row, Select, select

from advisor.core.events import StoredEvent, stored_event
from advisor.core.payloads import LogRecorded
from advisor.store.schema import events, sources
from advisor.views.fold.foldbase import PAGE


def log_query(stream: str) -> Select[Any]:
    """The `log.recorded` events of `stream`, with their source's name (bounds are the
    caller's to add)."""
    return (
        select(
            events.c.seq,
            events.c.event_time_us,
            events.c.schema_version,
            events.c.payload,
            events.c.recorded_time_us,
            sources.c.name,
            events.c.idem_key,
        )
        .join(sources, sources.c.id == events.c.source_id)
        .where(events.c.stream == stream)
        .where(events.c.type == "log.recorded")
    )


def log_rows(conn: Connection, query: Select[Any], since: int) -> Iterator[Row[Any]]:
    """The rows of `query` from time `since` on, in (time, seq) order, `PAGE` at a time."""
    at, after_seq = since, 0
    while True:
        rows = conn.execute(
            query.where(events.c.event_time_us >= at)  # the index range's start
            .where(
                (events.c.event_time_us > at)
                | ((events.c.event_time_us == at) & (events.c.seq > after_seq))
            )
            .order_by(events.c.event_time_us, events.c.seq)
            .limit(PAGE)
        ).all()
        yield from rows
        if len(rows) < PAGE:
            return
        at, after_seq = rows[-1].event_time_us, rows[-1].seq


def log_event(row: Row[Any], stream: str, payload: LogRecorded) -> StoredEvent:
    """A row of `log_query` as the stored event it is."""
    return stored_event(
        row.seq,
        stream,
        "log.recorded",
        row.schema_version,
        row.event_time_us,
        row.recorded_time_us,
        row.name,
        row.idem_key,
        payload,
    )
