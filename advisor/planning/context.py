"""What a plan is computed from besides the diagnosis: the context the store knows (samples,
history, the host), and the log's numbers, range-checked."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final


@dataclass(frozen=True)
class Holder:
    """A process NVML says holds memory on the unit's GPUs."""

    pid: int
    used_bytes: int | None
    unit: str | None


@dataclass(frozen=True)
class PlanContext:
    """What the store knows beyond the log: samples, history, the host."""

    unit: str | None = None
    free_before_bytes: int | None = None  # free GPU memory just before the failing phase
    gpu_total_bytes: int | None = None
    release_p95_s: float | None = None  # p95 of this host's memory release after a kill
    holders: tuple[Holder, ...] = ()
    idle_gpus: int | None = None
    invocation_id: str | None = None  # the run the plan is about (journald's id)
    gpus: tuple[int, ...] | None = None  # the GPUs the unit's processes were seen on
    ready_bound_s: float | None = None  # how long a restart may take to be ready


# Numbers read from a log, range-checked where they are used: (low, high) for the facts a plan
# computes with. A value outside is treated as not stated.
_FACT_RANGES: Final = {
    "max_num_seqs": (1, 1 << 20),
    "dummy_requests": (1, 1 << 20),
    "vocab_size": (2, 1 << 24),
    "max_model_len": (16, 1 << 26),
    "kv_cache_tokens": (1, 1 << 34),
    "estimated_max_model_len": (1, 1 << 34),
    "max_batch_prefill_tokens": (1, 1 << 26),
    "tensor_parallel_size": (1, 1024),
    "gpu_memory_utilization": (0.01, 1.0),
    "tried_to_allocate_gib": (0.0, 1 << 20),
    "free_gib": (0.0, 1 << 20),
    "total_capacity_gib": (0.01, 1 << 20),
    "kv_cache_needed_gib": (0.0, 1 << 20),
    "available_kv_cache_gib": (-(1 << 20), 1 << 20),
    "restart_count": (0, 1 << 31),
}


def checked_facts(facts: Mapping[str, Any]) -> dict[str, Any]:
    """`facts` with every number outside its sane range (a negative count, an absurd size,
    a bool where a number belongs) replaced by None."""
    out = dict(facts)
    for key, (low, high) in _FACT_RANGES.items():
        value = out.get(key)
        if value is None:
            continue
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not (low <= value <= high)
            or value != value
        ):
            out[key] = None
    return out
