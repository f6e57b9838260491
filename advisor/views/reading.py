"""Reading the projections back: a table's rows, a run's own log lines."""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Any, Final

from sqlalchemy import Row, Select, select

from advisor.core.events import LogRecorded, StoredEvent
from advisor.parsing.lines import LogLine, line_from_payload
from advisor.store import EventFilter, EventStore
from advisor.store.schema import (
    PROJECTION_TABLES,
    actions,
    events,
    fold_pending,
    gpu_samples,
    incidents,
    run_labels,
    runs,
    sources,
)
from advisor.store.store import read_payload
from advisor.views.foldbase import PAGE
from advisor.views.keys import order_key
from advisor.views.rows import RunView

KERNEL_MARGIN_US: Final = 5_000_000  # the host's kernel lines this far around a run count


def read_rows(
    store: EventStore, table_name: str, *, unit: str | None = None, host: str | None = None
) -> list[dict[str, Any]]:
    """Rows of a projection table in a stable order (runs and incidents in time order),
    optionally for one unit / host. Incidents include `superseded` ones."""
    table = {t.name: t for t in PROJECTION_TABLES}[table_name]
    query = select(table)
    if unit is not None and "unit" in table.c:
        query = query.where(table.c.unit == unit)
    if host is not None and "host" in table.c:
        query = query.where(table.c.host == host)
    order = {
        "runs": runs.c.started_us,
        "incidents": incidents.c.started_us,
        "gpu_samples": gpu_samples.c.seq,
        "actions": actions.c.proposed_seq,
        "run_labels": run_labels.c.seq,
        "fold_pending": fold_pending.c.stream,
    }[table_name]
    with store.connect() as conn:
        rows = conn.execute(query.order_by(order, *table.primary_key)).all()
    return [{str(k): v for k, v in r._mapping.items()} for r in rows]


def run_log_events(store: EventStore, run: RunView) -> list[StoredEvent]:
    """A run's own log lines (a `runs` row), in the fold's order: the stream's lines from its
    first line's place to its last's (read in (time, seq) order on the stream's time index,
    a page at a time)."""
    first, last = run.first_key or "", run.last_key or ""
    until = run.last_us or run.started_us
    query = _log_query(run.stream, until)
    found: list[StoredEvent] = []
    at, after_seq = run.started_us, 0
    with store.connect() as conn:
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
            for row in rows:
                p = read_payload(row.seq, "log.recorded", row.schema_version, row.payload)
                if not isinstance(p, LogRecorded):
                    continue
                # Only the first and last lines' microseconds can hold other runs' lines.
                if (
                    row.event_time_us in (run.started_us, until)
                    and not first <= order_key(row.event_time_us, p) <= last
                ):
                    continue
                found.append(_log_event(row, run.stream, p))
            if len(rows) < PAGE:
                break
            at, after_seq = rows[-1].event_time_us, rows[-1].seq
    return in_line_order(found)


def _log_query(stream: str, until: int) -> Select[Any]:
    """The `log.recorded` events of `stream` up to `until`, with their source's name."""
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
        .where(events.c.event_time_us <= until)
    )


def _log_event(row: Row[Any], stream: str, payload: LogRecorded) -> StoredEvent:
    """A row of `_log_query` as the stored event it is."""
    return StoredEvent.model_construct(
        seq=row.seq,
        stream=stream,
        type="log.recorded",
        version=row.schema_version,
        time_us=row.event_time_us,
        recorded_us=row.recorded_time_us,
        source=row.name,
        key=row.idem_key,
        payload=payload,
    )


def in_line_order(lines: Iterable[StoredEvent]) -> list[StoredEvent]:
    """Log events given in time order, in the order `order_key` gives: the lines of one
    microsecond put in the journal's order (their keys are worked out for those alone)."""
    ordered: list[StoredEvent] = []
    group: list[StoredEvent] = []

    def flush() -> None:
        if len(group) > 1:
            group.sort(
                key=lambda e: (
                    order_key(e.time_us, e.payload) if isinstance(e.payload, LogRecorded) else "",
                    e.seq,
                )
            )
        ordered.extend(group)
        group.clear()

    for event in lines:
        if group and event.time_us != group[0].time_us:
            flush()
        group.append(event)
    flush()
    return ordered


def run_lines(store: EventStore, run: RunView) -> list[LogLine]:
    """What a diagnosis of `run` (a `runs` row) reads: its own lines and the host's kernel
    lines around it, in the fold's order."""
    until = run.ended_us or run.last_us or run.started_us
    kernel = sorted(
        (
            event
            for event in store.read(
                EventFilter(
                    stream=f"{run.host}/kernel",
                    since_us=run.started_us - KERNEL_MARGIN_US,
                    until_us=until + KERNEL_MARGIN_US,
                )
            )
            if isinstance(event.payload, LogRecorded)
        ),
        key=lambda e: e.time_us,
    )
    return [
        line_from_payload(event.seq, event.payload.model_dump(), event.time_us)
        for event in in_line_order(
            heapq.merge(run_log_events(store, run), kernel, key=lambda e: e.time_us)
        )
    ]
