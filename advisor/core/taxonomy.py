"""The failure taxonomy: the one place that knows the labels advisor gives a run.

Each label is one `LabelSpec` in `TAXONOMY`: whether it names a failure, how a catalogued
message with that label ranks among the rules (its tier and confidence cap; an out-of-memory
message becomes one label per phase it may hit), the remedy that acts on the unit whatever
engine it runs (named; `advisor.planning.recommend` has the functions), and what a person is
told when no remedy computes a value. docs/taxonomy.md describes each label; the rules
(`rules/*.toml`), the catalogue (`rules/catalog/*.toml`) and the engines' remedies
(`advisor.core.engines`) give them. A new label is one entry here plus the rules that give it
(docs/extending.md). No other module spells a label: they name the constants below or read
`TAXONOMY`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Literal, get_args

__all__ = [
    "CUDA_GRAPH_OOM",
    "FAILURE_LABELS",
    "GPU_HARDWARE_FAULT",
    "GPU_MEMORY_HELD",
    "HEALTHY",
    "KV_CACHE_OOM",
    "LABELS",
    "MODEL_LABELS",
    "NCCL_ERROR",
    "NOT_FAILURES",
    "OOM",
    "OTHER_CRASH",
    "PHASES",
    "RUNTIME_OOM",
    "SAMPLER_WARMUP_OOM",
    "TAXONOMY",
    "UNKNOWN",
    "WEDGED_STOP",
    "WEIGHTS_LOAD_OOM",
    "CatalogLabel",
    "FailureLabel",
    "LabelSpec",
    "OomWhen",
    "Phase",
    "RuleLabel",
    "is_failure",
]

# The start-up phases a run goes through, in order; the phase of a label is one of them.
Phase = Literal[
    "starting",
    "weights_loading",
    "memory_profiling",
    "kv_cache_allocation",
    "cuda_graph_capture",
    "sampler_warmup",
    "ready",
    "shutdown",
]
PHASES: Final = get_args(Phase)

SAMPLER_WARMUP_OOM: Final = "sampler_warmup_oom"
KV_CACHE_OOM: Final = "kv_cache_oom"
WEIGHTS_LOAD_OOM: Final = "weights_load_oom"
CUDA_GRAPH_OOM: Final = "cuda_graph_oom"
RUNTIME_OOM: Final = "runtime_oom"
GPU_MEMORY_HELD: Final = "gpu_memory_held"
WEDGED_STOP: Final = "wedged_stop"
NCCL_ERROR: Final = "nccl_error"
GPU_HARDWARE_FAULT: Final = "gpu_hardware_fault"
OTHER_CRASH: Final = "other_crash"
HEALTHY: Final = "healthy"  # the run came up and nothing failed
UNKNOWN: Final = "unknown"  # no failure and no success shown, or too little confidence
OOM: Final = "oom"  # a catalogued message's label: out of memory, its phase says which


@dataclass(frozen=True)
class OomWhen:
    """An out-of-memory message means this label when these rule conditions hold (the
    phase at the evidence line, or after readiness); `cap` bounds the catalogue rule's
    confidence, ranking the variants as the hand-written OOM rules do."""

    suffix: str
    cap: float
    conditions: Mapping[str, Any]


@dataclass(frozen=True)
class LabelSpec:
    """One label of the taxonomy."""

    name: str
    means: str  # one line: what it says happened
    failure: bool = True
    oom: tuple[OomWhen, ...] = ()
    # How a catalogued message with this label ranks: its rule tier and extra conditions,
    # and a cap on its confidence.
    catalogue: Mapping[str, Any] = field(default_factory=dict)
    cap: float | None = None
    unit_remedy: str | None = None  # the remedy acting on the unit, whatever the engine
    # A label's causal evidence in any engine's words (a regular expression, searched in the
    # run's lines): the learned model may not give the label to a run where no line has it
    # and no rule gave it (`advisor.diagnosis.classify.lacking_evidence`).
    shown_by: str | None = None
    advice: str | None = None  # what a person should do when no remedy computes a value
    expected: str = "the server says it is ready"  # after the plan's restart


# A line that says GPU memory ran out or does not suffice.
MEMORY_RAN_OUT: Final = (
    r"(?i)out of (?:\w+ ){0,2}memory|OutOfMemory|OUT_OF_MEMORY|ALLOC_FAILED|\bOOM\b|ran out of|"
    r"(?:not enough|insufficient|exceeds?|more than the available|no) (?:\w+ ){0,3}memory|"
    r"memory (?:exhausted|is full|ran out)|no memory left|"
    r"KV ?cache (?:capacity|is needed|cannot hold|does not fit|is too small)|stored in KV cache|"
    r"Available KV cache memory: -|larger than the profiled value|cudaMalloc failed|"
    r"(?:failed|unable) to allocate \S* ?buffer|memory in use|"
    r"needs? [\d.]+ ?[GM]i?B.{0,60}(?:only|but) [\d.]+ ?[GM]i?B"
)


def _oom(suffix: str, cap: float, **conditions: Any) -> OomWhen:
    return OomWhen(suffix, cap, MappingProxyType(conditions))


_SPECS: Final = (
    LabelSpec(
        SAMPLER_WARMUP_OOM,
        "out of memory in the sampler's warm-up, after the KV cache took its share",
        oom=(_oom("sampler", 0.92, phases=["sampler_warmup"]),),
        shown_by=MEMORY_RAN_OUT,
        expected="the warm-up completes and the server says it is ready",
    ),
    LabelSpec(
        KV_CACHE_OOM,
        "the KV cache does not fit: too little memory left, or too long a context",
        oom=(_oom("kv", 0.88, phases=["kv_cache_allocation"]),),
        shown_by=MEMORY_RAN_OUT,
        expected="KV cache allocated, the server says it is ready",
    ),
    LabelSpec(
        WEIGHTS_LOAD_OOM,
        "out of memory loading the model's weights",
        oom=(_oom("weights", 0.92, phases=["weights_loading"]),),
        shown_by=MEMORY_RAN_OUT,
    ),
    LabelSpec(
        CUDA_GRAPH_OOM,
        "out of memory capturing CUDA graphs",
        oom=(_oom("graph", 0.92, phases=["cuda_graph_capture"]),),
        shown_by=MEMORY_RAN_OUT,
    ),
    LabelSpec(
        RUNTIME_OOM,
        "out of memory while serving",
        oom=(
            _oom("runtime", 0.93, after_ready=True, after_stop=False),
            _oom("serving", 0.88, phases=["ready"]),
        ),
        shown_by=MEMORY_RAN_OUT,
    ),
    LabelSpec(
        GPU_MEMORY_HELD,
        "another process holds the GPU memory the server needs",
        unit_remedy="held",
        shown_by=MEMORY_RAN_OUT
        + r"|less than desired|left-over process|Process \d+ has|memory (?:profiling|usage)",
    ),
    LabelSpec(
        WEDGED_STOP,
        "the stop timed out: the server did not exit and was killed",
        # systemd's and Docker's word that a stop timed out is weaker than the engine's own
        # word on why it failed earlier in the run (as for the hand-written stop rules)
        cap=0.86,
        unit_remedy="wedged",
        # (systemd's stop and its timeouts, as the run's events, show it too)
        shown_by=r"blocked for more than \d+ seconds|^\s*Active: deactivating|refused to die|"
        r"did not (?:stop|exit)|[Tt]imed out|[Ss]topping|still around|stop-sig",
    ),
    LabelSpec(
        NCCL_ERROR,
        "a collective (NCCL) failed between the server's GPUs",
        advice="NCCL failed: check the interconnect and NCCL_* settings before restarting",
        shown_by=r"NCCL|nccl|[Gg]loo|ProcessGroup|c10d|[Cc]ollective|all_?reduce|all_?gather|"
        r"DistBackendError|[Ww]atchdog|[Dd]istributed|rendezvous|NVLink|RCCL|[Bb]arrier|"
        r"[Ss]ocket|[Cc]onnection (?:reset|refused|closed)",
    ),
    LabelSpec(
        GPU_HARDWARE_FAULT,
        "the GPU reported a hardware fault",
        advice="the GPU reported a hardware fault: drain the host and check the GPU "
        "(Xid, ECC) before restarting anything on it",
        shown_by=r"Xid|NVRM|\bECC\b|[Ee]cc error|fallen off|GPU is lost|[Uu]ncorrectable|"
        r"row remap|retired page|GSP|[Hh]ardware|PCIe|NVLink|[Tt]hermal|not responding|"
        r"cudaErrorUnknown|unknown error|GPU \d+ .{0,40}(?:error|fault)",
    ),
    LabelSpec(
        OTHER_CRASH,
        "a clear fatal error that fits no other label",
        # a catalogued crash message (most are relays: "Scheduler hit an exception") counts
        # only when nothing says more
        catalogue=MappingProxyType({"tier": "fallback"}),
        advice="a crash with no automatic remedy: read the evidence",
    ),
    LabelSpec(UNKNOWN, "no failure and no success shown, or too little confidence", False),
    LabelSpec(
        HEALTHY,
        "the run came up and nothing failed",
        False,
        # a catalogued readiness line means health only for a run that did not die
        catalogue=MappingProxyType({"tier": "healthy", "died": False}),
    ),
)
TAXONOMY: Final[Mapping[str, LabelSpec]] = MappingProxyType({s.name: s for s in _SPECS})
FAILURE_LABELS: Final = tuple(s.name for s in _SPECS if s.failure)
LABELS: Final = (*FAILURE_LABELS, UNKNOWN, HEALTHY)
NOT_FAILURES: Final = frozenset(s.name for s in _SPECS if not s.failure)
# The labels that say GPU memory ran out: each needs a line of the run that says so.
OUT_OF_MEMORY_LABELS: Final = frozenset(s.name for s in _SPECS if s.oom)
MODEL_LABELS: Final = (*FAILURE_LABELS, HEALTHY)  # what the learned model may say

# The label types, made from the registry (a type checker sees plain strings; pydantic
# validates against the registry's names).
if TYPE_CHECKING:
    FailureLabel = str
    RuleLabel = str  # a label a rule may give: a failure, or healthy
    CatalogLabel = str  # a label a catalogued message may say: a rule's, or oom
else:
    FailureLabel = Literal[FAILURE_LABELS]
    RuleLabel = Literal[(*FAILURE_LABELS, HEALTHY)]
    CatalogLabel = Literal[(*FAILURE_LABELS, HEALTHY, OOM)]


def is_failure(label: str | None) -> bool:
    """Whether `label` names a failure (not healthy, unknown or none)."""
    spec = TAXONOMY.get(label) if label is not None else None
    return spec is not None and spec.failure
