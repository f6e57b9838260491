"""Live GPU sampling through NVML and the processes holding GPU memory (units from
``ingest.cgroup``; recordings of samples are ``ingest.gpu_recording``).

* ``NvmlSampler`` initialises NVML once, keeps the device handles and turns each tick into one
  ``GpuSampled`` per GPU. Process lists take the driver's global lock (DOMAIN 6.4), so they can be
  fetched only every Nth tick (``process_every``).
* ``sampling_loop`` ticks on a fixed schedule; ``measure_sample_cost`` times ``sample()``.

Library code here never prints; failures to reach NVML are ``GpuUnavailableError``.
"""

from __future__ import annotations

import contextlib
import math
import socket
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

from pydantic import ValidationError

from advisor.core.errors import GpuUnavailableError
from advisor.core.events import GpuProcess, GpuSampled
from advisor.core.sampler import SamplerLike
from ingest.cgroup import comm_for_pid, unit_for_pid

__all__ = ["NvmlSampler", "SamplerLike", "measure_sample_cost", "sampling_loop"]


# NVML errors that mean NVML, the driver or the GPU itself is gone: the sample cannot continue.
_FATAL_ERRORS = (
    "NVMLError_GpuIsLost",
    "NVMLError_Uninitialized",
    "NVMLError_DriverNotLoaded",
    "NVMLError_LibraryNotFound",
    "NVMLError_LibRmVersionMismatch",
    "NVMLError_ResetRequired",
)

# Compute first: a PID in both lists keeps its compute entry (unless that has no memory figure).
_PROCESS_CALLS = ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses")


# --------------------------------------------------------------------------------------------
# NVML sampler


def _error_text(e: BaseException) -> str:
    try:
        text = str(e)
    except Exception:  # NVMLError.__str__ may call into the library
        text = ""
    text = " ".join(text.split())
    return text or type(e).__name__


def _is_error(nvml: Any, e: BaseException, *names: str) -> bool:
    for name in names:
        cls = getattr(nvml, name, None)
        if isinstance(cls, type) and isinstance(e, cls):
            return True
    return False


def _init_failure_message(nvml: Any, e: BaseException) -> str:
    text = _error_text(e)
    if _is_error(nvml, e, "NVMLError_LibraryNotFound"):
        return f"no NVIDIA driver: {text} (is the NVIDIA driver installed?)"
    if _is_error(nvml, e, "NVMLError_DriverNotLoaded"):
        return f"NVIDIA driver not loaded: {text} (is the nvidia kernel module loaded?)"
    if _is_error(nvml, e, "NVMLError_LibRmVersionMismatch"):
        return (
            f"NVIDIA driver/library version mismatch: {text} "
            "(driver upgraded without a reboot? reboot or reload the nvidia kernel module)"
        )
    if _is_error(nvml, e, "NVMLError_NoPermission"):
        return f"no permission to use NVML: {text} (check access to /dev/nvidia*)"
    if isinstance(e, OSError):
        return f"cannot load the NVML library: {text}"
    return f"NVML initialisation failed: {text}"


def _as_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    text = str(value).replace("\x00", "")
    return text or None


class _Device:
    __slots__ = ("handle", "index", "name", "uuid")

    def __init__(self, index: int, handle: Any, name: str | None, uuid: str | None) -> None:
        self.index = index
        self.handle = handle
        self.name = name
        self.uuid = uuid

    def label(self) -> str:
        return f"GPU {self.index}" + (f" ({self.uuid})" if self.uuid else "")


class NvmlSampler:
    """Samples every GPU NVML sees; NVML is initialised once in ``open()`` and kept.

    ``nvml`` is the ``pynvml`` module (nvidia-ml-py) or anything with the same functions.
    A metric NVML cannot give for a GPU (NotSupported, NoPermission, ...) is None in the sample;
    a lost GPU or a vanished driver raises ``GpuUnavailableError``. A GPU whose memory information
    cannot be read in a tick is left out of that tick (memory is required in ``GpuSampled``).
    """

    def __init__(
        self,
        host: str | None = None,
        nvml: Any = None,
        proc_root: Path = Path("/proc"),
        *,
        process_every: int = 1,
    ) -> None:
        if isinstance(process_every, bool) or not isinstance(process_every, int):
            raise TypeError("process_every must be an int")
        if process_every < 1:
            raise ValueError("process_every must be >= 1")
        self.host: str = host if host is not None else socket.gethostname()
        self.proc_root = proc_root
        self.process_every = process_every
        self._nvml: Any = nvml
        self._devices: list[_Device] = []
        self._open = False
        self._ticks = 0

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return self._open

    @property
    def device_count(self) -> int:
        return len(self._devices)

    def open(self) -> NvmlSampler:
        """Initialise NVML and fetch device handles, names and UUIDs. Idempotent."""
        if self._open:
            return self
        if self._nvml is None:
            try:
                import pynvml
            except ImportError as e:
                raise GpuUnavailableError(
                    f"NVML bindings not installed: {_error_text(e)} (pip install nvidia-ml-py)"
                ) from e
            self._nvml = pynvml
        nvml = self._nvml
        try:
            nvml.nvmlInit()
        except (nvml.NVMLError, OSError) as e:
            raise GpuUnavailableError(_init_failure_message(nvml, e)) from e
        try:
            self._devices = self._discover()
        except BaseException:
            self._shutdown_quietly()
            raise
        self._open = True
        self._ticks = 0
        return self

    def _discover(self) -> list[_Device]:
        nvml = self._nvml
        try:
            count = int(nvml.nvmlDeviceGetCount())
        except nvml.NVMLError as e:
            raise GpuUnavailableError(f"NVML cannot count GPUs: {_error_text(e)}") from e
        if count <= 0:
            raise GpuUnavailableError("NVML found no GPU")
        devices: list[_Device] = []
        skipped: list[str] = []
        for index in range(count):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
            except nvml.NVMLError as e:
                if _is_error(nvml, e, *_FATAL_ERRORS):
                    raise GpuUnavailableError(f"GPU {index} unavailable: {_error_text(e)}") from e
                skipped.append(f"GPU {index}: {_error_text(e)}")
                continue
            name = _as_text(self._optional(f"GPU {index}", nvml.nvmlDeviceGetName, handle))
            uuid = _as_text(self._optional(f"GPU {index}", nvml.nvmlDeviceGetUUID, handle))
            devices.append(_Device(index, handle, name, uuid))
        if not devices:
            raise GpuUnavailableError(
                f"NVML found {count} GPU(s) but none is usable ({'; '.join(skipped)})"
            )
        return devices

    def close(self) -> None:
        """Shut NVML down (NVML is reference-counted: one shutdown per successful open)."""
        if not self._open:
            return
        self._open = False
        self._devices = []
        self._shutdown_quietly()

    def _shutdown_quietly(self) -> None:
        nvml = self._nvml
        # Nothing useful to do if shutdown fails: the handle is abandoned either way.
        with contextlib.suppress(nvml.NVMLError, OSError):
            nvml.nvmlShutdown()

    def __enter__(self) -> NvmlSampler:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- sampling ----------------------------------------------------------------------------

    def _optional(self, label: str, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)``, or None if NVML cannot give this metric; raise if NVML or the GPU is gone.

        ``label`` names the GPU in the error message.
        """
        nvml = self._nvml
        try:
            return fn(*args)
        except nvml.NVMLError as e:
            if _is_error(nvml, e, *_FATAL_ERRORS):
                raise GpuUnavailableError(f"{label}: {_error_text(e)}") from e
            return None

    def sample(self, time_us: int | None = None) -> tuple[int, list[GpuSampled]]:
        """One ``GpuSampled`` per GPU, with the time of the sample (µs since the epoch)."""
        if not self._open:
            raise RuntimeError("NvmlSampler.sample() called before open()")
        if time_us is None:
            time_us = time.time_ns() // 1000
        with_processes = self._ticks % self.process_every == 0
        self._ticks += 1
        samples: list[GpuSampled] = []
        for device in self._devices:
            sampled = self._sample_device(device, with_processes)
            if sampled is not None:
                samples.append(sampled)
        return time_us, samples

    def _sample_device(self, device: _Device, with_processes: bool) -> GpuSampled | None:
        nvml = self._nvml
        h = device.handle
        label = device.label()
        mem = self._optional(label, nvml.nvmlDeviceGetMemoryInfo, h)
        if mem is None:
            return None
        util = self._optional(label, nvml.nvmlDeviceGetUtilizationRates, h)
        sensor = getattr(nvml, "NVML_TEMPERATURE_GPU", 0)
        temp_fn = getattr(nvml, "nvmlDeviceGetTemperature", None) or nvml.nvmlDeviceGetTemperatureV
        temperature = self._optional(label, temp_fn, h, sensor)
        power_mw = self._optional(label, nvml.nvmlDeviceGetPowerUsage, h)
        processes = self._processes(device) if with_processes else None
        try:
            return GpuSampled(
                origin="nvml",
                host=self.host,
                index=device.index,
                uuid=device.uuid,
                name=device.name,
                memory_total_bytes=int(mem.total),
                memory_used_bytes=int(mem.used),
                memory_free_bytes=int(mem.free),
                utilization_gpu_pct=None if util is None else int(util.gpu),
                utilization_memory_pct=None if util is None else int(util.memory),
                temperature_c=None if temperature is None else int(temperature),
                power_w=None if power_mw is None else int(power_mw) / 1000.0,
                processes=processes,
            )
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise GpuUnavailableError(
                f"{label}: NVML returned an invalid value ({where}: {first['msg']})"
            ) from e

    def _processes(self, device: _Device) -> tuple[GpuProcess, ...] | None:
        nvml = self._nvml
        label = device.label()
        lists = []
        for fn_name in _PROCESS_CALLS:
            fn = getattr(nvml, fn_name, None)
            if fn is None:
                continue
            got = self._optional(label, fn, device.handle)
            if got is not None:
                lists.append(got)
        if not lists:
            return None
        used_by_pid: dict[int, int | None] = {}
        for entries in lists:
            for entry in entries:
                pid = int(entry.pid)
                used_raw = getattr(entry, "usedGpuMemory", None)
                used = None if used_raw is None else int(used_raw)
                if used is not None and used < 0:
                    used = None
                if pid not in used_by_pid or used_by_pid[pid] is None:
                    used_by_pid[pid] = used
        return tuple(
            GpuProcess(
                pid=pid,
                used_bytes=used,
                unit=unit_for_pid(pid, self.proc_root),
                name=comm_for_pid(pid, self.proc_root),
            )
            for pid, used in used_by_pid.items()
        )


# --------------------------------------------------------------------------------------------
# Sampling loop and cost


def sampling_loop(
    sampler: SamplerLike,
    interval_s: float,
    *,
    count: int | None = None,
    duration_s: float | None = None,
    stop: threading.Event | None = None,
    on_tick: Callable[[int, list[GpuSampled]], None],
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Sample every ``interval_s`` seconds on a fixed schedule; return the number of ticks.

    Tick k is due at ``start + k * interval_s`` (no drift). When a tick overruns past later
    slots, those slots are skipped and the loop waits for the next slot still ahead. Stops after
    ``count`` ticks, when the next slot would be at or past ``duration_s`` from the start, or as
    soon as ``stop`` is set (also while waiting). Errors from the sampler or ``on_tick`` propagate.
    """
    if not (isinstance(interval_s, int | float) and math.isfinite(interval_s) and interval_s > 0):
        raise ValueError("interval_s must be a positive finite number")
    if count is not None and count < 0:
        raise ValueError("count must be >= 0")
    if duration_s is not None and (math.isnan(duration_s) or duration_s < 0):
        raise ValueError("duration_s must be >= 0")
    event = stop if stop is not None else threading.Event()
    start = clock()
    slot = 0
    ticks = 0
    while True:
        if count is not None and ticks >= count:
            break
        due = slot * interval_s
        if duration_s is not None and due >= duration_s:
            break
        if event.is_set():
            break
        delay = start + due - clock()
        if delay > 0:
            if event.wait(delay):
                break
            continue  # re-check: a wait may end early, and count/duration/stop still apply
        time_us, samples = sampler.sample()
        on_tick(time_us, samples)
        ticks += 1
        elapsed = clock() - start
        slot = max(slot + 1, math.ceil(elapsed / interval_s))
    return ticks


def _p95(values: Iterable[float]) -> float:
    ordered = sorted(values)
    rank = max(1, math.ceil(0.95 * len(ordered)))  # nearest-rank percentile
    return ordered[rank - 1]


def measure_sample_cost(sampler: SamplerLike, n: int) -> dict[str, float | int]:
    """Call ``sampler.sample()`` n times; wall and CPU time per call in milliseconds.

    CPU time is ``time.process_time`` (all threads of this process, user + system); its
    resolution can be coarse, so use a large n.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError("n must be a positive int")
    wall: list[float] = []
    cpu: list[float] = []
    gpus = 0
    for _ in range(n):
        c0 = time.process_time_ns()
        w0 = time.perf_counter_ns()
        _, samples = sampler.sample()
        w1 = time.perf_counter_ns()
        c1 = time.process_time_ns()
        wall.append((w1 - w0) / 1e6)
        cpu.append((c1 - c0) / 1e6)
        gpus = len(samples)
    return {
        "n": n,
        "gpus": gpus,
        "wall_ms_mean": sum(wall) / n,
        "wall_ms_p95": _p95(wall),
        "wall_ms_max": max(wall),
        "cpu_ms_mean": sum(cpu) / n,
        "cpu_ms_p95": _p95(cpu),
    }
