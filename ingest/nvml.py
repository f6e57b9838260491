"""Live GPU sampling through NVML and the processes holding GPU memory (units from
``ingest.cgroup``; recordings of samples are ``ingest.gpu_recording``).

* ``NvmlSampler`` initialises NVML once, keeps the device handles and turns each tick into one
  ``GpuSampled`` per GPU. Process lists take the driver's global lock (and cost milliseconds a
  GPU), so they can be fetched only every Nth tick (``process_every``).
* ``sampling_loop`` ticks on a fixed schedule; ``measure_sample_cost`` times ``sample()`` (both
  in ``ingest.sampling``).

Library code here never prints; failures to reach NVML are ``GpuUnavailableError``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from pydantic import ValidationError

from advisor.core.errors import GpuUnavailableError
from advisor.core.host import this_host
from advisor.core.payloads import GpuProcess, GpuSampled
from ingest.cgroup import comm_for_pid, unit_for_pid
from ingest.gpu_health import HealthReading, XidEvents, XidSeen, pci_bus, read_health
from ingest.gpu_health_changes import HealthTracker

__all__ = [
    "NvmlSampler",
]


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
# Health readings (ECC, rows, NVLink, …: ingest.gpu_health) on every Nth tick only.
HEALTH_EVERY = 10

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
    __slots__ = ("handle", "index", "name", "pci_bus", "uuid")

    def __init__(self, index: int, handle: Any, name: str | None, uuid: str | None) -> None:
        self.index = index
        self.handle = handle
        self.name = name
        self.uuid = uuid
        self.pci_bus: str | None = None  # read with the first health reading

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
        health_every: int = HEALTH_EVERY,
    ) -> None:
        for name, every in (("process_every", process_every), ("health_every", health_every)):
            if isinstance(every, bool) or not isinstance(every, int):
                raise TypeError(f"{name} must be an int")
            if every < 1:
                raise ValueError(f"{name} must be >= 1")
        self.health_every = health_every
        self._health_calls = 0
        self.host: str = host if host is not None else this_host()
        self.proc_root = proc_root
        self.process_every = process_every
        self._nvml: Any = nvml
        self._devices: list[_Device] = []
        self._open = False
        self._ticks = 0
        self._driver: str | None = None
        self._xids: XidEvents | None = None
        self._tracker = HealthTracker(self.host)

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
        if self._xids is not None:
            self._xids.close()
            self._xids = None
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

    def driver_version(self) -> str | None:
        """The NVIDIA driver's version (for the agent's heartbeat), None where NVML has none;
        asked once and kept (the driver does not change under a running NVML)."""
        if not self._open:
            return None
        if self._driver is None:
            ask = getattr(self._nvml, "nvmlSystemGetDriverVersion", None)
            got = self._optional("the driver", ask) if ask is not None else None
            self._driver = _as_text(got) or ""
        return self._driver or None

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

    # -- health (ingest.gpu_health: the calls; ingest.gpu_health_changes: what is a fault) ----

    def health(self) -> list[HealthReading]:
        """Every GPU's health counters now, with the Xids NVML's event API reported since."""
        if not self._open:
            raise RuntimeError("NvmlSampler.health() called before open()")
        nvml = self._nvml
        if self._xids is None:
            self._xids = XidEvents(nvml, [d.handle for d in self._devices])
        xids: dict[int, list[XidSeen]] = {}
        for index, xid in self._xids.drain():
            xids.setdefault(index, []).append(XidSeen(xid=xid))
        readings = []
        for d in self._devices:
            label = d.label()
            if d.pci_bus is None and hasattr(nvml, "nvmlDeviceGetPciInfo"):
                info = self._optional(label, nvml.nvmlDeviceGetPciInfo, d.handle)
                d.pci_bus = None if info is None else pci_bus(info.busId)
            counters = read_health(nvml, self._optional, label, d.handle)
            readings.append(
                HealthReading(
                    index=d.index,
                    uuid=d.uuid,
                    pci_bus=d.pci_bus,
                    xids=tuple(xids.get(d.index, ())),
                    **counters,
                )
            )
        return readings

    def faults(self, time_us: int) -> list[dict[str, Any]]:
        """The `gpu.fault` events of this tick's health reading — what changed since the last —
        on every `health_every`th call (a GPU with NVLink costs a hundred NVML calls a reading;
        Xids wait in NVML's event queue meanwhile); none on the others."""
        self._health_calls += 1
        if (self._health_calls - 1) % self.health_every:
            return []
        return self._tracker.changes(time_us, self.health())
