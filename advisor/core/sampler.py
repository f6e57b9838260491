"""What the stages that wait on GPU memory need of a GPU reader: one call that samples every
GPU. NVML (`ingest.nvml`) and the simulator's twin implement it; execution only sees this."""

from __future__ import annotations

from typing import Protocol

from advisor.core.payloads import GpuSampled


class SamplerLike(Protocol):
    def sample(self, time_us: int | None = None) -> tuple[int, list[GpuSampled]]: ...
