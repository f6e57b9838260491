"""Building the backend a command acts through, from the settings the CLI read."""

from __future__ import annotations

from pathlib import Path

from advisor.errors import GpuUnavailableError
from advisor.executor.bus import SystemdBus
from advisor.executor.readiness import JournalReadiness
from advisor.executor.systemd import SystemdBackend
from advisor.settings import this_host
from ingest.nvml import SamplerLike


def gpu_sampler(host: str, twin: Path | None = None) -> tuple[SamplerLike | None, str]:
    """NVML (or, for a simulated node, its twin file); (None, why) when there is none."""
    try:
        if twin is not None:
            from advisor.sim.nvml_twin import TwinSampler

            sampler: SamplerLike = TwinSampler(twin, host)
        else:
            from ingest.nvml import NvmlSampler

            sampler = NvmlSampler(host).open()
    except GpuUnavailableError as e:
        return None, str(e)
    return sampler, ""


def systemd_backend(root: Path, *, gpu_twin: Path | None = None, bus_address: str | None = None,
                    journal_dir: Path | None = None, host: str | None = None) -> SystemdBackend:
    host = host or this_host()
    sampler, why = gpu_sampler(host, gpu_twin)
    return SystemdBackend(bus=SystemdBus(bus_address), root=root,
                          readiness=JournalReadiness(journal_dir), gpus=sampler,
                          no_gpus_why=why or "no GPU sampler", host=host)
