"""Building the backend a command acts through, from the settings the CLI read."""

from __future__ import annotations

from pathlib import Path

from advisor.core.errors import GpuUnavailableError
from advisor.core.host import this_host
from advisor.core.payloads import GpuSampled
from advisor.core.sampler import SamplerLike
from advisor.execution.bus import SystemdBus
from advisor.execution.notices import Notices
from advisor.execution.readiness import JournalReadiness
from advisor.execution.systemd import SystemdBackend


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


class LazySampler:
    """Opens NVML (or the twin) on the first sample: a command that never waits for GPU
    memory (a rollback, a dry run) never touches the driver. Without a GPU, each sample
    raises GpuUnavailableError, which fails the step that needed it."""

    def __init__(self, host: str, twin: Path | None) -> None:
        self.host = host
        self.twin = twin
        self._sampler: SamplerLike | None = None

    def sample(self, time_us: int | None = None) -> tuple[int, list[GpuSampled]]:
        if self._sampler is None:
            sampler, why = gpu_sampler(self.host, self.twin)
            if sampler is None:
                raise GpuUnavailableError(f"cannot poll GPU memory: {why}")
            self._sampler = sampler
        return self._sampler.sample(time_us)


def systemd_backend(
    root: Path,
    *,
    gpu_twin: Path | None = None,
    bus_address: str | None = None,
    journal_dir: Path | None = None,
    host: str | None = None,
    notices: Notices | None = None,
) -> SystemdBackend:
    host = host or this_host()
    return SystemdBackend(
        bus=SystemdBus(bus_address),
        root=root,
        readiness=JournalReadiness(journal_dir),
        gpus=LazySampler(host, gpu_twin),
        host=host,
        notices=notices,
    )
