"""Events the pipeline could not use: found before they break anything, skipped, recorded.

The fold (`advisor.views.fold.projector`) and the diagnoser (`pipeline.processing`)
never stop on an event. An event with a value the projection tables cannot hold (an integer
past 64 bits, a time past the year 9999, a NUL in a name the fold looks rows up by) is found
by `unusable`
before it is applied; anything else an event makes them raise is caught. Either way the
event is skipped, what follows is folded and diagnosed, and a `pipeline.skipped` event says
which one and why — once: its idempotency key is the stage and the skipped event's seq (the
run, for a diagnosis), so a rebuild or a second folder adds nothing twice. `advisor status`
and `advisor verify --json` count them by stage (`count_skipped`).

Failures of the store itself (unreachable, locked, a transaction aborted) are not the
event's fault: `environmental` tells them apart, and they propagate as before.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal

import orjson
from sqlalchemy import BigInteger, Connection, Float, Integer, Table, select
from sqlalchemy.exc import DataError, SQLAlchemyError

from advisor.core.actions import ActionProposed
from advisor.core.errors import InvalidEventError, StoreError
from advisor.core.events import NewEvent, StoredEvent
from advisor.core.payloads import (
    MAX_KEY,
    GpuSampled,
    IncidentRecurred,
    LogRecorded,
    PipelineSkipped,
)
from advisor.core.records import stable_key
from advisor.store.schema import events, sources

if TYPE_CHECKING:
    from advisor.store import EventStore

Stage = Literal["fold", "diagnosis"]
TYPE: Final = "pipeline.skipped"
SOURCE: Final = "pipeline"
STAGES: Final = ("fold", "diagnosis")
REASON_CHARS: Final = 200
# What `datetime` can hold (a run's id is the time of its first line): 0001-01-01 to the
# last second of 9999.
MIN_TIME_US: Final = -62_135_596_800_000_000
MAX_TIME_US: Final = 253_402_300_799_000_000
INT32: Final = (-(1 << 31), (1 << 31) - 1)
INT64: Final = (-(1 << 63), MAX_KEY)
_JSON_INT: Final = (-(1 << 63), (1 << 64) - 1)  # what orjson writes
_STREAM = re.compile(r"[^\x00-\x1f\x7f]{1,512}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_IDS: Final = ("run_id", "incident_id", "action_id", "plan_id")  # rows are looked up by these


def clean_reason(text: str) -> str:
    """One line of at most REASON_CHARS characters, no control characters."""
    line = _CONTROL.sub("?", " ".join(text.split()))
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 1] + "…"


def reason_of(error: BaseException) -> str:
    message = str(error)
    return clean_reason(f"{type(error).__name__}: {message}" if message else type(error).__name__)


def environmental(error: BaseException) -> bool:
    """Is `error` the store's (unreachable, locked, aborted), not the event's?"""
    if isinstance(error, InvalidEventError | DataError):
        return False
    return isinstance(error, StoreError | SQLAlchemyError)


# ------------------------------------------------------------------ what the fold cannot use
def _outside(value: int, bounds: tuple[int, int]) -> bool:
    return not bounds[0] <= value <= bounds[1]


def _bad_number(value: Any) -> str | None:
    """A number no column or JSON text can hold, anywhere in `value`."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return "an integer past 64 bits" if _outside(value, _JSON_INT) else None
    if isinstance(value, float):
        return None if math.isfinite(value) else "a number that is not finite"
    if isinstance(value, Mapping):
        value = value.values()
    if isinstance(value, list | tuple):
        for item in value:
            found = _bad_number(item)
            if found is not None:
                return found
    return None


def unusable(event: StoredEvent) -> str | None:
    """Why the fold cannot use `event` (a value its tables cannot hold, a payload that could
    not be read), or None."""
    p = event.payload
    if isinstance(p, str):  # the store's tolerant read: why the payload could not be read
        return p
    if isinstance(p, LogRecorded):
        if not MIN_TIME_US <= event.time_us <= MAX_TIME_US:
            return f"time {event.time_us} µs is past the year 9999"
        if p.invocation_id is not None and _CONTROL.search(p.invocation_id):
            return "its invocation id holds a control character"
        return None
    if isinstance(p, GpuSampled):
        if _outside(p.index, INT32):
            return f"GPU index {p.index} is out of range"
        if _outside(p.memory_used_bytes, INT64) or _outside(p.memory_total_bytes, INT64):
            return "a memory size past 2**63 bytes"
        if "\x00" in p.host or any("\x00" in (q.unit or "") for q in p.processes or ()):
            return "a name holds a NUL"
        return None
    if isinstance(p, IncidentRecurred) and _outside(p.runs, INT32):
        return f"runs={p.runs} is out of range"
    if isinstance(p, ActionProposed) and _outside(p.step, INT32):
        return f"step={p.step} is out of range"
    for name in _IDS:
        value = getattr(p, name, None)
        if isinstance(value, str) and "\x00" in value:
            return f"its {name} holds a NUL"
    return _bad_number(p.model_dump())


def fit_row(table: Table, row: dict[str, Any]) -> dict[str, Any]:
    """`row` with every value its column cannot hold made one it can, so that writing a
    projection row never fails on a value: text without NUL (PostgreSQL refuses it),
    integers inside the column's range, finite floats (else NULL, or the nearest bound
    where NULL is not allowed)."""
    fitted = row
    for column in table.columns:
        value = row.get(column.name)
        new = value
        if isinstance(value, str):
            if "\x00" in value:
                new = value.replace("\x00", "\ufffd")
        elif isinstance(value, bool):
            continue
        elif isinstance(value, int) and isinstance(column.type, Integer):
            low, high = INT64 if isinstance(column.type, BigInteger) else INT32
            if not low <= value <= high:
                new = None if column.nullable else max(low, min(high, value))
        elif (
            isinstance(value, float) and isinstance(column.type, Float) and not math.isfinite(value)
        ):
            new = None if column.nullable else 0.0
        if new is not value:
            if fitted is row:
                fitted = dict(row)
            fitted[column.name] = new
    return fitted


# ------------------------------------------------------------------ recording
def skipped_event(
    stream: str, time_us: int, stage: Stage, seq: int, reason: str, run_id: str | None = None
) -> NewEvent:
    """The `pipeline.skipped` event for one skipped event (`stage` fold) or run (diagnosis)."""
    ident = run_id if stage == "diagnosis" and run_id is not None else str(seq)
    return NewEvent.model_validate(
        {
            "stream": stream if _STREAM.fullmatch(stream) else SOURCE,
            "time_us": max(0, min(time_us, MAX_KEY)),
            "source": SOURCE,
            "key": stable_key(f"{TYPE}:{stage}:{ident}".encode("utf-8", "surrogatepass")),
            "payload": PipelineSkipped(
                stage=stage,
                seq=max(1, min(seq, MAX_KEY)),
                reason=clean_reason(reason),
                run_id=run_id,
            ),
        }
    )


def fold_skips(skipped: Iterable[tuple[StoredEvent, str]]) -> list[NewEvent]:
    return [skipped_event(e.stream, e.time_us, "fold", e.seq, why) for e, why in skipped]


def record(store: EventStore, batch: list[NewEvent]) -> int:
    """Append the skip events (those recorded already are left as they are)."""
    return store.append(batch).appended if batch else 0


# ------------------------------------------------------------------ reading
def _stages(conn: Connection) -> Iterable[tuple[int, str, str, dict[str, Any]]]:
    rows = conn.execute(
        select(events.c.seq, events.c.stream, sources.c.name, events.c.payload)
        .join(sources, sources.c.id == events.c.source_id)
        .where(events.c.type == TYPE)
        .order_by(events.c.seq)
    )
    for seq, stream, source, payload in rows:
        try:
            data = orjson.loads(payload)
        except orjson.JSONDecodeError:
            continue
        if isinstance(data, dict):
            yield int(seq), str(stream), str(source), data


def count_skipped_in(conn: Connection) -> dict[str, int]:
    """How many events (fold) and runs (diagnosis) the pipeline skipped, by stage."""
    counts = dict.fromkeys(STAGES, 0)
    for _seq, _stream, _source, data in _stages(conn):
        stage = data.get("stage")
        if isinstance(stage, str) and stage in counts:
            counts[stage] += 1
    return counts


def count_skipped(store: EventStore) -> dict[str, int]:
    with store.connect() as conn:
        return count_skipped_in(conn)


def skipped_events(store: EventStore) -> list[dict[str, Any]]:
    """The skips recorded, oldest first: where each was recorded (`recorded_seq`, `stream`;
    `source` is `pipeline` for this store's own, `ship:HOST` for a host's, whose `seq` is
    the host's), the stage, the event skipped (`seq`), the run (`run_id`, diagnosis) and
    the reason."""
    with store.connect() as conn:
        return [
            {
                "recorded_seq": seq,
                "stream": stream,
                "source": source,
                "stage": data.get("stage"),
                "seq": data.get("seq"),
                "run_id": data.get("run_id"),
                "reason": data.get("reason"),
            }
            for seq, stream, source, data in _stages(conn)
        ]
