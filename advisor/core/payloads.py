"""The payloads of observed and derived facts: log lines, GPU samples, diagnoses, incidents,
and the store's own bookkeeping. The base `Payload` is here; action payloads are in
`advisor.core.actions`.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from advisor.core.taxonomy import LABELS
from advisor.core.xids import Action, Severity

MAX_KEY = 2**63 - 1
MAX_WHY = 2000  # characters of an operator's reason for a correction


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
    `content` (version 2) names the lines judged (`advisor.views.fold.keys.run_content`): the
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


class LabelCorrected(Payload):
    """A person says what incident `incident_id` really was (`advisor label`): `label` (one
    of the taxonomy's labels) in place of `replaces` (the label the incident had when they
    said it, None for none), by whom (`human:<user>`) and why. The diagnosis stays as it
    was; the latest correction of an incident is the operator's label `explain` shows and
    `advisor model train --store` learns from."""

    type: Literal["label.corrected"] = "label.corrected"
    incident_id: str = Field(min_length=1, max_length=1024)
    label: str
    by: str = Field(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")
    why: str = Field(default="", max_length=MAX_WHY)
    replaces: str | None = None

    @field_validator("label")
    @classmethod
    def _known_label(cls, label: str) -> str:
        if label not in LABELS:
            raise ValueError(f"not a label: {label!r} (see docs/taxonomy.md)")
        return label


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


class LinesHeld(Payload):
    """A central store's stand-in for a run of a host's events that the host kept
    (`advisor.fleet.selection`: routine serving lines, GPU samples between the fleet's):
    host seqs `first_seq`..`last_seq`, all of them, and the host's chain hash before them
    (`from_hash`); the event's origin holds the hash after them. So each host's chain is still
    checked across the gap, and the kept events, fetched later, can be checked against it."""

    type: Literal["ship.held"] = "ship.held"
    first_seq: int = Field(ge=1, le=MAX_KEY)
    last_seq: int = Field(ge=1, le=MAX_KEY)
    from_hash: str = Field(pattern=r"^[0-9a-f]{64}$")
    first_time_us: int
    last_time_us: int
    # how many of the kept events each stream had (HOST/UNIT, HOST/gpuN, ...)
    streams: dict[str, int] = Field(default_factory=dict)


class PipelineSkipped(Payload):
    """An event the fold could not use (`stage` fold: `seq` is that event), or a run the
    diagnoser could not judge (`stage` diagnosis: `seq` is the run's last event, `run_id`
    the run, now labelled unknown): skipped, so that what follows is folded and diagnosed."""

    type: Literal["pipeline.skipped"] = "pipeline.skipped"
    stage: Literal["fold", "diagnosis"]
    seq: int = Field(ge=1, le=MAX_KEY)
    reason: str = Field(max_length=300)
    run_id: str | None = None


GpuFaultKind = Literal["xid", "ecc", "remapped_rows", "retired_pages", "throttle", "nvlink"]


class GpuFault(Payload):
    """A GPU health event (docs/gpu-health.md): an Xid the driver reported (`origin` kernel: an
    `NVRM: Xid` line of the journal; `origin` nvml: NVML's event API), or a health counter NVML
    reads that grew (ECC errors, retired pages, remapped rows, NVLink errors) or clock
    throttle reasons that appeared. `severity` and `action` are the Xid catalogue's
    (`advisor.core.xids`) for an Xid, the sampler's judgement for a counter."""

    type: Literal["gpu.fault"] = "gpu.fault"
    origin: Literal["kernel", "nvml"]
    kind: GpuFaultKind
    host: str = Field(min_length=1, max_length=256)
    gpu: int | None = Field(default=None, ge=0, le=1023)  # NVML's index, when known
    uuid: str | None = Field(default=None, max_length=128)
    pci_bus: str | None = Field(default=None, max_length=32)  # "0000:3b:00" (domain:bus:device)
    xid: int | None = Field(default=None, ge=1, le=1023)
    pid: int | None = Field(default=None, ge=1, le=2**22)
    text: str | None = Field(default=None, max_length=1000)
    severity: Severity
    action: Action
    # A counter's name ("ecc.volatile.uncorrected", "nvlink.2.replay", "throttle"), its value
    # now and the value before (None the first time it is seen).
    counter: str | None = Field(default=None, max_length=80)
    value: int | None = Field(default=None, ge=0, le=MAX_KEY)
    previous: int | None = Field(default=None, ge=0, le=MAX_KEY)
