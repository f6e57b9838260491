"""Event payloads: immutable, versioned facts, validated before they reach the store.

A payload type is never edited once shipped: a change is a new version plus an upcaster in
``UPCASTERS`` that turns the stored older payload into the current shape on read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any, ClassVar, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from advisor.core.errors import InvalidEventError

MAX_KEY = 2**63 - 1


class Payload(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    version: ClassVar[int] = 1


class LogRecorded(Payload):
    """One log line, from journald or from a plain text log."""

    type: Literal["log.recorded"] = "log.recorded"
    origin: Literal["journald", "text"]
    # None when journald printed the value as null (>= 4 KiB in `-o json`) or the entry had none.
    message: str | None = None
    message_truncated: bool | None = None
    # The raw bytes, base64, only when `message` had to be decoded lossily (invalid UTF-8).
    # NUL and other control characters are kept in `message` itself (escaped in the JSON).
    message_b64: str | None = None
    priority: int | None = None
    pid: int | None = None
    comm: str | None = None
    identifier: str | None = None
    unit: str | None = None
    host: str | None = None
    boot_id: str | None = None
    invocation_id: str | None = None
    cursor: str | None = None
    monotonic_us: int | None = None
    message_id: str | None = None
    transport: str | None = None
    # Lifecycle fields systemd attaches (EXIT_CODE, EXIT_STATUS, UNIT_RESULT, N_RESTARTS, ...).
    fields: dict[str, str] | None = None
    # Text logs: where the line came from.
    path: str | None = None
    line_no: int | None = None


class GpuProcess(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    pid: int
    used_bytes: int | None = None
    unit: str | None = None
    name: str | None = None


class GpuSampled(Payload):
    """One GPU at one instant, from live NVML, a recording of it, or an nvidia-smi CSV log."""

    type: Literal["gpu.sampled"] = "gpu.sampled"
    origin: Literal["nvml", "nvidia-smi"]
    host: str
    index: int = Field(ge=0)
    uuid: str | None = None
    name: str | None = None
    memory_total_bytes: int = Field(ge=0)
    memory_used_bytes: int = Field(ge=0)
    memory_free_bytes: int = Field(ge=0)
    utilization_gpu_pct: int | None = None
    utilization_memory_pct: int | None = None
    temperature_c: int | None = None
    power_w: float | None = None
    # None: the source did not list processes (an nvidia-smi --query-gpu log).
    processes: tuple[GpuProcess, ...] | None = None


class EvidenceLine(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    seq: int
    text: str


class CandidateLabel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    label: str
    confidence: float
    source: Literal["rules", "model"]
    rule: str | None = None


class RunClassified(Payload):
    """Diagnosis of one service run (healthy ones too), from the evidence through `through_seq`.
    `content` (version 2) names the lines judged (`advisor.views.projections.run_content`): the
    label holds for the run while its lines are those; None (version 1) for any."""

    version: ClassVar[int] = 2
    type: Literal["run.classified"] = "run.classified"
    run_id: str
    host: str
    unit: str
    label: str
    confidence: float
    phase: str | None = None
    through_seq: int
    content: str | None = None


class IncidentOpened(Payload):
    """A failed run that is not the recurrence of an open incident starts an incident."""

    type: Literal["incident.opened"] = "incident.opened"
    incident_id: str
    host: str
    unit: str
    run_id: str
    config_key: str


class IncidentClassified(Payload):
    """What the incident is, with the facts and evidence lines the diagnosis had."""

    type: Literal["incident.classified"] = "incident.classified"
    incident_id: str
    run_id: str
    label: str
    confidence: float
    phase: str | None = None
    facts: dict[str, str | int | float | bool | None]
    evidence: tuple[EvidenceLine, ...]
    candidates: tuple[CandidateLabel, ...]
    through_seq: int
    model: str | None = None


class IncidentRecurred(Payload):
    """Another run of the unit failed the same way with the same config (a restart loop)."""

    type: Literal["incident.recurred"] = "incident.recurred"
    incident_id: str
    run_id: str
    runs: int = Field(ge=2)


class IncidentResolved(Payload):
    """A later run of the unit came up healthy."""

    type: Literal["incident.resolved"] = "incident.resolved"
    incident_id: str
    run_id: str


ActionKind = Literal["stop", "kill", "wait_gpu_free", "set_flag", "set_unit_option", "restart",
                     "reset_failed", "hold_restarts", "notify"]


class ActionStep(BaseModel):
    """One step of a plan, as `recommend` computes it, with the numbers behind it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: ActionKind
    unit: str | None = None
    flag: str | None = None
    value: int | float | str | None = None
    option: str | None = None
    seconds: float | None = None
    pid: int | None = None
    why: str
    arithmetic: tuple[str, ...] = ()
    expected: str | None = None
    alternative: bool = False   # instead of the set_flag before it, not as well
    # What the plan was made for, so the executor can tell a stale step (version 2): the
    # invocation of the run it is about, and the value a set_flag changes (as the log said).
    invocation_id: str | None = None
    from_value: int | float | str | None = None
    gpus: tuple[int, ...] | None = None   # wait_gpu_free: the GPUs the unit used


class ActionProposed(ActionStep, Payload):
    """A step of a plan for an incident, proposed. Nothing runs until an `action.approved`
    names it."""

    version: ClassVar[int] = 2
    type: Literal["action.proposed"] = "action.proposed"
    action_id: str
    plan_id: str
    step: int = Field(ge=0)
    incident_id: str | None = None
    host: str


class ActionApproved(Payload):
    type: Literal["action.approved"] = "action.approved"
    action_id: str
    by: str          # "human:<user>" or "policy:<file>"


class ActionRejected(Payload):
    type: Literal["action.rejected"] = "action.rejected"
    action_id: str
    by: str
    why: str


UnitStateValue = str | int | bool | None


class ActionStarted(Payload):
    """The executor begins a step. Appended before anything is done; a step runs only if this
    executor's `action.started` is the one stored (version 2: who, what it saw, and for a
    drop-in the file, the text it is about to write and the text it replaces)."""

    version: ClassVar[int] = 2
    type: Literal["action.started"] = "action.started"
    action_id: str
    backend: str
    executor: str | None = None
    before: dict[str, UnitStateValue] | None = None
    dropin: str | None = None
    written_text: str | None = None
    previous_text: str | None = None
    had_previous: bool | None = None


class ActionSucceeded(Payload):
    type: Literal["action.succeeded"] = "action.succeeded"
    version: ClassVar[int] = 2
    action_id: str
    detail: str
    # For set_flag / set_unit_option on systemd: the drop-in written and where its previous
    # content was kept (version 1: a copy's path; version 2 keeps the text in action.started).
    dropin: str | None = None
    previous: str | None = None
    after: dict[str, UnitStateValue] | None = None   # the unit as systemd showed it after


class ActionFailed(Payload):
    type: Literal["action.failed"] = "action.failed"
    version: ClassVar[int] = 2
    action_id: str
    error: str
    after: dict[str, UnitStateValue] | None = None


class ActionSkipped(Payload):
    """A step not run: it would change nothing (`stale` false: the plan goes on), or the unit is
    no longer in the state the plan was made for (`stale` true: the plan stops)."""

    type: Literal["action.skipped"] = "action.skipped"
    action_id: str
    why: str
    stale: bool = False
    after: dict[str, UnitStateValue] | None = None


class ActionRolledBack(Payload):
    type: Literal["action.rolled_back"] = "action.rolled_back"
    action_id: str
    detail: str


class ChainAnchor(BaseModel):
    """Where a chain resumes after events before it were retained: the last retained
    event's sequence number (a host's own, for a shipped host) and its hash (hex)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    seq: int = Field(ge=1)
    hash: str = Field(pattern=r"^[0-9a-f]{64}$")


class StoreRetained(Payload):
    """Old events were exported to Parquet and their partition detached from the store
    (`advisor retention`). The anchors let `advisor verify` start where they end."""

    type: Literal["store.retained"] = "store.retained"
    partition: str
    first_seq: int = Field(ge=1)
    events: int = Field(ge=0)
    recorded_before_us: int
    exported_to: str
    files: int = Field(ge=0)
    anchor: ChainAnchor
    hosts: dict[str, ChainAnchor] = Field(default_factory=dict)


class PipelineSkipped(Payload):
    """An event the fold could not use (`stage` fold: `seq` is that event), or a run the
    diagnoser could not judge (`stage` diagnosis: `seq` is the run's last event, `run_id`
    the run, now labelled unknown): skipped, so that what follows is folded and diagnosed."""

    type: Literal["pipeline.skipped"] = "pipeline.skipped"
    stage: Literal["fold", "diagnosis"]
    seq: int = Field(ge=1, le=MAX_KEY)
    reason: str = Field(max_length=300)
    run_id: str | None = None


AnyPayload = Annotated[LogRecorded | GpuSampled | RunClassified | IncidentOpened
                       | IncidentClassified | IncidentRecurred | IncidentResolved
                       | ActionProposed | ActionApproved | ActionRejected | ActionStarted
                       | ActionSucceeded | ActionFailed | ActionSkipped | ActionRolledBack
                       | StoreRetained | PipelineSkipped,
                       Field(discriminator="type")]
PAYLOAD_TYPES: dict[str, type[Payload]] = {
    "log.recorded": LogRecorded, "gpu.sampled": GpuSampled, "run.classified": RunClassified,
    "incident.opened": IncidentOpened, "incident.classified": IncidentClassified,
    "incident.recurred": IncidentRecurred, "incident.resolved": IncidentResolved,
    "action.proposed": ActionProposed, "action.approved": ActionApproved,
    "action.rejected": ActionRejected, "action.started": ActionStarted,
    "action.succeeded": ActionSucceeded, "action.failed": ActionFailed,
    "action.skipped": ActionSkipped, "action.rolled_back": ActionRolledBack,
    "store.retained": StoreRetained, "pipeline.skipped": PipelineSkipped}
ACTION_EVENT_TYPES: tuple[str, ...] = tuple(t for t in PAYLOAD_TYPES if t.startswith("action."))

def _unchanged(data: dict[str, Any]) -> dict[str, Any]:
    """Version 2 only added optional fields: a version 1 payload is a valid version 2."""
    return data


UPCASTERS: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {
    ("action.proposed", 1): _unchanged, ("action.started", 1): _unchanged,
    ("action.succeeded", 1): _unchanged, ("action.failed", 1): _unchanged,
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
    out: list[Prepared] = [(e.stream, e.payload.type, e.payload.version, e.time_us, e.source, e.key,
             canonical_payload(e.payload)) for e in events]
    return out


def prepare(raw: Sequence[dict[str, Any]]) -> list[Prepared]:
    """Validate raw event dicts strictly (no coercion, so the validated model holds exactly
    the dict's values) and serialise them without a model round trip: the fast path for
    ingestion. A payload given as a model instance is serialised from the model."""
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
        out.append((m.stream, m.payload.type, m.payload.version, m.time_us, m.source, m.key,
                    body))
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
    result: Payload = _PAYLOAD.validate_python(data)
    return result
