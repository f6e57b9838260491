"""`wait_gpu_free`: poll the GPUs until a stopped unit's memory is back — free *and stable*.

The unit's GPUs are the step's: those its processes (or, for memory held by others, the
holders) were seen on when the plan was made. "Free" for one of them: no process of the unit
listed on it, and its memory in use under `FREE_FRACTION` (what is left is the driver's own
reservation) — memory another process still holds there is not free for the next start, which
is the very failure a premature restart meets. When the plan did not know the GPUs, every GPU
is watched for processes of the unit only (other GPUs may serve other models). Stable:
`STABLE_SAMPLES` such readings in a row. The bound is the step's (the p95 of this host's past
releases); polling ends as soon as memory is back, and a bound reached is a failed step —
never a sleep reported as success.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Final

from advisor.core.payloads import GpuSampled
from advisor.core.sampler import SamplerLike
from advisor.execution.primitives import BackendError

FREE_FRACTION: Final = 0.05
STABLE_SAMPLES: Final = 3


def _held(sample: GpuSampled, units: frozenset[str], whole_gpu: bool) -> int | None:
    """Bytes on this GPU that keep it from being free for the unit (its processes are filed
    under `units`); None when it is free."""
    own = sum(p.used_bytes or 0 for p in sample.processes or () if p.unit in units)
    if own or any(p.unit in units for p in sample.processes or ()):
        return own or sample.memory_used_bytes
    if whole_gpu and sample.memory_used_bytes > FREE_FRACTION * sample.memory_total_bytes:
        return sample.memory_used_bytes
    return None


def wait_gpu_free(
    sampler: SamplerLike,
    unit: str,
    gpus: Sequence[int] | None,
    bound_s: float,
    *,
    poll_s: float = 0.5,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    also: frozenset[str] = frozenset(),
) -> str:
    """Return how long it took; BackendError when the bound passes first. `also`: other
    units NVML files the unit's processes under (its container's scope)."""
    units = frozenset({unit}) | also
    started = clock()
    deadline = started + bound_s
    streak = 0
    last = ""
    while True:
        _, samples = sampler.sample()
        chosen = [s for s in samples if gpus is None or s.index in gpus]
        if not chosen:
            raise BackendError(
                f"{unit}: the GPU sampler sees none of GPUs {', '.join(map(str, gpus or ()))}"
            )
        held = {s.index: h for s in chosen if (h := _held(s, units, gpus is not None)) is not None}
        streak = 0 if held else streak + 1
        if held:
            last = ", ".join(f"GPU {i}: {b / 1024**3:.2f} GiB" for i, b in sorted(held.items()))
        if streak >= STABLE_SAMPLES:
            return (
                f"the unit's GPUs ({', '.join(str(s.index) for s in chosen)}) are free, "
                f"{STABLE_SAMPLES} samples in a row, after {clock() - started:.1f} s"
            )
        if clock() >= deadline:
            raise BackendError(f"{unit}: GPU memory not free after {bound_s:.0f} s ({last})")
        sleep(poll_s)
