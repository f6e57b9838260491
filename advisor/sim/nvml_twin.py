"""NVML's twin on a simulated box: GPU samples read from the view the simulated driver keeps
(``advisor.sim.gpud``), through the same interface as ``ingest.nvml.NvmlSampler``, so the
advisor polls it where a real host has NVML (``advisor watch``'s GPU sampling, the systemd
backend's wait for GPU memory).

A view that is missing, unreadable or stale (not rewritten for ``stale_s`` seconds: the driver
is gone) raises ``GpuUnavailableError``, as a lost driver does under NVML.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from advisor.core.errors import GpuUnavailableError
from advisor.core.payloads import GpuSampled
from ingest.gpu_recording import parse_recording_line

DEFAULT_STALE_S = 3.0


class TwinSampler:
    """Samples the simulated GPUs of the view file ``view``, as ``host``'s."""

    def __init__(
        self,
        view: Path,
        host: str,
        *,
        stale_s: float = DEFAULT_STALE_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.view = view
        self.host = host
        self.stale_s = stale_s
        self.clock = clock
        self._open = False

    # -- lifecycle (as NvmlSampler's) --------------------------------------------------------
    @property
    def is_open(self) -> bool:
        return self._open

    def open(self) -> TwinSampler:
        """Check that the driver is there (raises ``GpuUnavailableError`` if not)."""
        self.read()
        self._open = True
        return self

    def close(self) -> None:
        self._open = False

    def __enter__(self) -> TwinSampler:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- sampling ----------------------------------------------------------------------------
    def read(self) -> tuple[int, list[GpuSampled]]:
        """The view as the driver last wrote it: (its time in µs, one sample per GPU)."""
        try:
            raw = self.view.read_bytes()
        except FileNotFoundError:
            raise GpuUnavailableError(
                f"no simulated GPU driver: {self.view} does not exist (is gpud running?)"
            ) from None
        except OSError as e:
            raise GpuUnavailableError(
                f"simulated GPU view {self.view} unreadable: {e.strerror or e}"
            ) from e
        try:
            written_us, samples = parse_recording_line(raw)
        except ValueError as e:
            raise GpuUnavailableError(f"simulated GPU view {self.view} unreadable: {e}") from e
        age = self.clock() - written_us / 1e6
        if age > self.stale_s:
            raise GpuUnavailableError(
                f"simulated GPU driver gone: {self.view} not updated for {age:.1f} s"
            )
        return written_us, samples

    def sample(self, time_us: int | None = None) -> tuple[int, list[GpuSampled]]:
        """One ``GpuSampled`` per GPU, stamped ``time_us`` (default now) and this host."""
        _, samples = self.read()
        when = int(self.clock() * 1_000_000) if time_us is None else time_us
        return when, [s.model_copy(update={"host": self.host}) for s in samples]

    def used_by(self, unit: str) -> int:
        """Bytes the processes of ``unit`` hold, summed over all GPUs."""
        _, samples = self.read()
        return sum(p.used_bytes or 0 for s in samples for p in s.processes or () if p.unit == unit)
