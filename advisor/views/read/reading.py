"""Reading the projections back: a table's rows, a run's own log lines, the lines fetched
from a host."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from typing import Any, Final

from sqlalchemy import select

from advisor.core.events import StoredEvent
from advisor.core.payloads import LogRecorded
from advisor.parsing.lines import LogLine, line_from_payload
from advisor.store import EventFilter, EventStore
from advisor.store.integrity.kept import KEPT_PREFIX
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
    stream_heads,
)
from advisor.store.store import read_payload
from advisor.views.fold.keys import order_key
from advisor.views.fold.logpages import log_event, log_query, log_rows
from advisor.views.read.rows import RunView

KERNEL_MARGIN_US: Final = 5_000_000  # the host's kernel lines this far around a run count


def read_rows(
    store: EventStore,
    table_name: str,
    *,
    unit: str | None = None,
    host: str | None = None,
    between_us: tuple[int, int] | None = None,
    status: str | None = None,
) -> list[dict[str, Any]]:
    """Rows of a projection table in a stable order (runs and incidents in time order),
    optionally for one unit / host, (GPU samples) from one time to another, and (incidents,
    actions) of one status. Incidents include `superseded` ones."""
    table = {t.name: t for t in PROJECTION_TABLES}[table_name]
    query = select(table)
    if status is not None:
        query = query.where(table.c.status == status)
    if between_us is not None:
        query = query.where(table.c.time_us.between(*between_us))
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
        "stream_heads": stream_heads.c.stream,
    }[table_name]
    with store.connect() as conn:
        rows = conn.execute(query.order_by(order, *table.primary_key)).all()
    return [{str(k): v for k, v in r._mapping.items()} for r in rows]


def run_log_events(store: EventStore, run: RunView) -> Iterator[StoredEvent]:
    """A run's own log lines (a `runs` row), in the fold's order: the stream's lines from its
    first line's place to its last's (read in (time, seq) order on the stream's time index,
    a page at a time, and handed on as they are read: a run may have millions)."""
    first, last = run.first_key or "", run.last_key or ""
    until = run.last_us or run.started_us
    query = log_query(run.stream).where(events.c.event_time_us <= until)

    def rows() -> Iterator[StoredEvent]:
        with store.connect() as conn:
            for row in log_rows(conn, query, run.started_us):
                p = read_payload(row.seq, "log.recorded", row.schema_version, row.payload)
                if not isinstance(p, LogRecorded):
                    continue
                # Only the first and last lines' microseconds can hold other runs' lines.
                if (
                    row.event_time_us in (run.started_us, until)
                    and not first <= order_key(row.event_time_us, p) <= last
                ):
                    continue
                yield log_event(row, run.stream, p)

    return in_line_order(rows())


def fetched_lines(
    store: EventStore, host: str, stream: str, window: tuple[int, int], n: int
) -> list[StoredEvent]:
    """The last `n` log lines of `stream` fetched from `host` (`advisor fetch`: source
    `kept:HOST`, keyed by the host's seq) between the window's two times, oldest first; a
    line whose payload cannot be read is left out."""
    with store.connect() as conn:
        rows = conn.execute(
            log_query(stream)
            .where(sources.c.name == f"{KEPT_PREFIX}{host}")
            .where(events.c.event_time_us.between(*window))
            .order_by(events.c.event_time_us.desc(), events.c.seq.desc())
            .limit(n)
        ).all()
    lines = []
    for row in reversed(rows):
        p = read_payload(row.seq, "log.recorded", row.schema_version, row.payload, tolerant=True)
        if isinstance(p, LogRecorded):
            lines.append(log_event(row, stream, p))
    return lines


def in_line_order(lines: Iterable[StoredEvent]) -> Iterator[StoredEvent]:
    """Log events given in time order, in the order `order_key` gives: the lines of one
    microsecond put in the journal's order (their keys are worked out for those alone)."""
    group: list[StoredEvent] = []

    def flushed() -> list[StoredEvent]:
        if len(group) > 1:
            group.sort(
                key=lambda e: (
                    order_key(e.time_us, e.payload) if isinstance(e.payload, LogRecorded) else "",
                    e.seq,
                )
            )
        out = list(group)
        group.clear()
        return out

    for event in lines:
        if group and event.time_us != group[0].time_us:
            yield from flushed()
        group.append(event)
    yield from flushed()


def kernel_lines(store: EventStore, run: RunView) -> list[StoredEvent]:
    """The host's kernel lines a diagnosis of `run` (a `runs` row) reads with its own: those
    within `KERNEL_MARGIN_US` of its time window, in time order."""
    until = run.ended_us or run.last_us or run.started_us
    return sorted(
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


def run_lines(
    store: EventStore, run: RunView, kernel: list[StoredEvent] | None = None
) -> Iterator[LogLine]:
    """What a diagnosis of `run` (a `runs` row) reads: its own lines and the host's kernel
    lines around it (`kernel`, when read already), in the fold's order, as they are read."""
    if kernel is None:
        kernel = kernel_lines(store, run)
    # (a payload's own attributes: what model_dump gives, without copying each line's)
    return (
        line_from_payload(event.seq, vars(event.payload), event.time_us)
        for event in in_line_order(
            heapq.merge(run_log_events(store, run), kernel, key=lambda e: e.time_us)
        )
    )
