"""Event payloads: immutable, versioned facts, validated before they reach the store.

A payload type is never edited once shipped: a change is a new version plus an upcaster in
``UPCASTERS`` that turns the stored older payload into the current shape on read.

The envelope (`NewEvent`, `StoredEvent`), the registry of payload types and the path into and
out of the store are here; the payload models themselves are in `advisor.core.payloads` and
`advisor.core.actions`, and every one is importable from here too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any, Final

import orjson
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from advisor.core.actions import (
    ActionApproved,
    ActionFailed,
    ActionPayload,
    ActionProposed,
    ActionRejected,
    ActionRolledBack,
    ActionSkipped,
    ActionStarted,
    ActionSucceeded,
)
from advisor.core.errors import InvalidEventError
from advisor.core.heartbeat import AgentHeartbeat
from advisor.core.payloads import (
    MAX_KEY,
    GpuFault,
    GpuSampled,
    IncidentClassified,
    IncidentOpened,
    IncidentRecurred,
    IncidentResolved,
    LabelCorrected,
    LinesHeld,
    LogRecorded,
    Payload,
    PipelineSkipped,
    RunClassified,
    StoreRetained,
)
from advisor.core.shapes import batch_adapter

__all__ = [
    "ACTION_EVENT_TYPES",
    "PAYLOAD_TYPES",
    "UPCASTERS",
    "AnyPayload",
    "NewEvent",
    "Prepared",
    "StoredEvent",
    "canonical_payload",
    "load_payload",
    "prepare",
    "prepare_events",
    "stored_event",
    "validate_batch",
]


AnyPayload = Annotated[
    LogRecorded
    | GpuSampled
    | RunClassified
    | IncidentOpened
    | IncidentClassified
    | IncidentRecurred
    | IncidentResolved
    | ActionPayload
    | StoreRetained
    | PipelineSkipped
    | GpuFault
    | LabelCorrected
    | LinesHeld
    # agent liveness (advisor.core.heartbeat)
    | AgentHeartbeat,
    Field(discriminator="type"),
]
PAYLOAD_TYPES: dict[str, type[Payload]] = {
    "log.recorded": LogRecorded,
    "gpu.sampled": GpuSampled,
    "run.classified": RunClassified,
    "incident.opened": IncidentOpened,
    "incident.classified": IncidentClassified,
    "incident.recurred": IncidentRecurred,
    "incident.resolved": IncidentResolved,
    "action.proposed": ActionProposed,
    "action.approved": ActionApproved,
    "action.rejected": ActionRejected,
    "action.started": ActionStarted,
    "action.succeeded": ActionSucceeded,
    "action.failed": ActionFailed,
    "action.skipped": ActionSkipped,
    "action.rolled_back": ActionRolledBack,
    "store.retained": StoreRetained,
    "pipeline.skipped": PipelineSkipped,
    "gpu.fault": GpuFault,
    "label.corrected": LabelCorrected,
    "ship.held": LinesHeld,
    # agent liveness (advisor.core.heartbeat)
    "agent.heartbeat": AgentHeartbeat,
}
ACTION_EVENT_TYPES: tuple[str, ...] = tuple(t for t in PAYLOAD_TYPES if t.startswith("action."))


def _unchanged(data: dict[str, Any]) -> dict[str, Any]:
    """Version 2 only added optional fields: a version 1 payload is a valid version 2."""
    return data


UPCASTERS: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {
    ("action.proposed", 1): _unchanged,
    ("action.started", 1): _unchanged,
    ("action.succeeded", 1): _unchanged,
    ("action.failed", 1): _unchanged,
    ("run.classified", 1): _unchanged,
}


class NewEvent(BaseModel):
    """An event on its way into the store: the envelope fields the ingester decides."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    # Names, not text: no control characters (they are shown on terminals and used as keys).
    stream: str = Field(min_length=1, max_length=512, pattern=r"^[^\x00-\x1f\x7f]+$")
    time_us: int = Field(ge=0, le=MAX_KEY)
    source: str = Field(min_length=1, max_length=4096, pattern=r"^[^\x00-\x1f\x7f]+$")
    key: int = Field(ge=0, le=MAX_KEY)
    payload: AnyPayload

    @property
    def type(self) -> str:
        return self.payload.type

    @property
    def version(self) -> int:
        return self.payload.version


class StoredEvent(BaseModel):
    model_config = ConfigDict(frozen=True)
    seq: int
    stream: str
    type: str
    version: int
    time_us: int
    recorded_us: int
    source: str
    key: int
    payload: AnyPayload


# A validated event in its stored form: (stream, type, version, time_us, source, key, canonical
# payload JSON). Made only by `prepare` / `prepare_events`, so nothing unvalidated reaches the
# store. A plain tuple: batches of them cross a process boundary, and tuples pickle cheapest.
Prepared = tuple[str, str, int, int, str, int, bytes]


_BATCH = TypeAdapter(list[NewEvent])
_STRICT_BATCH = TypeAdapter(list[NewEvent], config=ConfigDict(strict=True))
_PAYLOAD = TypeAdapter(AnyPayload)
# NewEvent and the payload models as TypedDict shapes: the same checks, no models built.
_SHAPED = batch_adapter(NewEvent, dict(PAYLOAD_TYPES))


def _invalid(e: ValidationError) -> InvalidEventError:
    first = e.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    return InvalidEventError(f"invalid event at {where}: {first['msg']}")


def validate_batch(raw: Sequence[dict[str, Any]]) -> list[NewEvent]:
    """Validate many events in one call; raise InvalidEventError naming the first bad one."""
    try:
        return _BATCH.validate_python(raw)
    except ValidationError as e:
        raise _invalid(e) from e


def canonical_payload(payload: Payload) -> bytes:
    """Canonical payload text: sorted keys, no nulls (`type` included: a payload read on its
    own, in a DuckDB export say, still says what it is)."""
    data = payload.model_dump(mode="json", exclude_none=True)
    return orjson.dumps(data, option=orjson.OPT_SORT_KEYS)


def prepare_events(events: Sequence[NewEvent]) -> list[Prepared]:
    out: list[Prepared] = [
        (
            e.stream,
            e.payload.type,
            e.payload.version,
            e.time_us,
            e.source,
            e.key,
            canonical_payload(e.payload),
        )
        for e in events
    ]
    return out


def prepare(raw: Sequence[dict[str, Any]]) -> list[Prepared]:
    """Validate raw event dicts strictly (no coercion, so the validated model holds exactly
    the dict's values) and serialise them without a model round trip: the fast path for
    ingestion. A payload given as a model instance is serialised from the model."""
    shaped = _prepare_shaped(raw)
    if shaped is not None:
        return shaped
    try:
        models = _STRICT_BATCH.validate_python(raw)
    except ValidationError as e:
        raise _invalid(e) from e
    out: list[Prepared] = []
    for r, m in zip(raw, models, strict=True):
        p = r["payload"]
        if isinstance(p, dict):
            if None in p.values():
                p = {k: v for k, v in p.items() if v is not None}
            body = orjson.dumps(p, option=orjson.OPT_SORT_KEYS)
        else:
            body = canonical_payload(m.payload)
        out.append((m.stream, m.payload.type, m.payload.version, m.time_us, m.source, m.key, body))
    return out


def _prepare_shaped(raw: Sequence[dict[str, Any]]) -> list[Prepared] | None:
    """`prepare` through the shapes (`advisor.core.shapes`) when every payload is a dict of a
    shaped type; None otherwise, or when one is invalid (the models then say why)."""
    if _SHAPED is None:
        return None
    adapter, shaped_types = _SHAPED
    for r in raw:
        p = r.get("payload") if isinstance(r, dict) else None
        kind = p.get("type") if isinstance(p, dict) else None
        if not isinstance(kind, str) or kind not in shaped_types:  # (a list is unhashable)
            return None
    try:
        adapter.validate_python(raw)
    except ValidationError:
        return None
    out: list[Prepared] = []
    for r in raw:
        p = r["payload"]
        if None in p.values():
            p = {k: v for k, v in p.items() if v is not None}
        version = PAYLOAD_TYPES[p["type"]].version
        body = orjson.dumps(p, option=orjson.OPT_SORT_KEYS)
        out.append((r["stream"], p["type"], version, r["time_us"], r["source"], r["key"], body))
    return out


def load_payload(type_: str, version: int, text: str | bytes) -> Payload:
    data: dict[str, Any] = orjson.loads(text)
    current = PAYLOAD_TYPES.get(type_)
    if current is None:
        raise InvalidEventError(f"unknown event type {type_!r}")
    while version < current.version:
        data = UPCASTERS[(type_, version)](data)
        version += 1
    data["type"] = type_  # the column is authoritative
    # The column names the model: its own validator, not the union's (same result, cheaper)
    result: Payload = current.__pydantic_validator__.validate_python(data)
    return result


_STORED_FIELDS: Final = frozenset(StoredEvent.model_fields)


def stored_event(
    seq: int,
    stream: str,
    type_: str,
    version: int,
    time_us: int,
    recorded_us: int,
    source: str,
    key: int,
    payload: Any,
) -> StoredEvent:
    """A `StoredEvent` of a stored row's values, unvalidated: what
    `StoredEvent.model_construct(...)` with every field makes, at a fraction of its cost (the
    store reads events by the million). The row's types are the table's."""
    event = StoredEvent.__new__(StoredEvent)
    _set = object.__setattr__
    _set(
        event,
        "__dict__",
        {
            "seq": seq,
            "stream": stream,
            "type": type_,
            "version": version,
            "time_us": time_us,
            "recorded_us": recorded_us,
            "source": source,
            "key": key,
            "payload": payload,
        },
    )
    _set(event, "__pydantic_fields_set__", set(_STORED_FIELDS))
    _set(event, "__pydantic_extra__", None)
    _set(event, "__pydantic_private__", None)
    return event
