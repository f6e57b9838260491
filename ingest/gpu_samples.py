"""GPU samples as events, whatever their origin (live NVML, a recording, an nvidia-smi log).

A sample's identity is (host, time, GPU index), so the same sample seen twice — a recording
replayed after live sampling, two copies of a CSV log — is stored once.
"""

from __future__ import annotations

from typing import Any

from advisor.core.payloads import GpuSampled
from advisor.core.records import clean_name

MAX_GPU_INDEX = 255


def gpu_source(host: str) -> str:
    return f"gpu:{host}"


def gpu_key(time_us: int, index: int) -> int:
    return (time_us << 8) | index


def sample_event(time_us: int, sample: GpuSampled) -> dict[str, Any]:
    if not 0 <= sample.index <= MAX_GPU_INDEX:
        raise ValueError(f"GPU index {sample.index} out of range 0-{MAX_GPU_INDEX}")
    return {
        "stream": f"{clean_name(sample.host)}/gpu{sample.index}",
        "time_us": time_us,
        "source": gpu_source(sample.host),
        "key": gpu_key(time_us, sample.index),
        "payload": sample,
    }
