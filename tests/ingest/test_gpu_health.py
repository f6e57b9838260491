"""The NVML health seam (ingest.gpu_health) and what it turns into events
(ingest.gpu_health_changes), tested on a recording of what NVML answered: no GPU machine was
available to this work, so tests/fixtures/nvml-health.hand-written.jsonl is written by hand in
the recording format (docs/gpu-health.md), not recorded. A fake pynvml replays it tick by tick,
raising the real pynvml exception classes, and keeps the list of calls the seam made."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from advisor.core.payloads import GpuFault
from advisor.store import EventFilter, EventStore
from ingest.gpu import sample_live
from ingest.gpu_health import HealthReading, health_line, parse_health_line
from ingest.gpu_health_changes import HealthTracker
from ingest.nvml import NvmlSampler

RECORDING = Path(__file__).parents[1] / "fixtures" / "nvml-health.hand-written.jsonl"
TICKS = [parse_health_line(line) for line in RECORDING.read_bytes().splitlines()]
NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED


def _error(code: int) -> pynvml.NVMLError:
    return pynvml.NVMLError(code)


class ReplayNvml:
    """pynvml's functions, answering from the recording's current tick; `calls` lists them."""

    NVMLError = pynvml.NVMLError

    def __init__(self, ticks: list[tuple[int, str, list[HealthReading]]]) -> None:
        self.ticks = ticks
        self.tick = 0
        self.calls: list[tuple[Any, ...]] = []
        self.pending_xids: list[tuple[int, int]] = []

    def advance(self) -> None:
        self.tick += 1

    def _gpu(self, handle: int) -> HealthReading:
        return self.ticks[self.tick][2][handle]

    def _counter(self, handle: int, name: str) -> int:
        value = self._gpu(handle).counters.get(name)
        if value is None:
            raise _error(NOT_SUPPORTED)
        return value

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("nvml"):
            raise AttributeError(name)

        def call(*args: Any) -> Any:
            self.calls.append((name, *args))
            return getattr(self, "_" + name)(*args)

        return call

    # -- identity and samples
    def _nvmlInit(self) -> None: ...
    def _nvmlShutdown(self) -> None: ...
    def _nvmlDeviceGetCount(self) -> int:
        return len(self.ticks[0][2])

    def _nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def _nvmlDeviceGetName(self, h: int) -> str:
        return "NVIDIA H100 80GB HBM3"

    def _nvmlDeviceGetUUID(self, h: int) -> str | None:
        return self._gpu(h).uuid

    def _nvmlDeviceGetMemoryInfo(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(total=80 << 30, used=1 << 30, free=79 << 30)

    def _nvmlDeviceGetUtilizationRates(self, h: int, *_: Any) -> Any:
        raise _error(NOT_SUPPORTED)

    _nvmlDeviceGetTemperature = _nvmlDeviceGetUtilizationRates
    _nvmlDeviceGetPowerUsage = _nvmlDeviceGetUtilizationRates
    _nvmlDeviceGetComputeRunningProcesses = _nvmlDeviceGetUtilizationRates
    _nvmlDeviceGetGraphicsRunningProcesses = _nvmlDeviceGetUtilizationRates

    # -- health
    def _nvmlDeviceGetPciInfo(self, h: int) -> SimpleNamespace:
        domain, bus, device = (self._gpu(h).pci_bus or "").split(":")
        return SimpleNamespace(busId=f"0000{domain}:{bus.upper()}:{device}.0".encode())

    def _nvmlDeviceGetTotalEccErrors(self, h: int, error: int, kind: int) -> int:
        name = f"ecc.{('volatile', 'aggregate')[kind]}.{('corrected', 'uncorrected')[error]}"
        return self._counter(h, name)

    def _nvmlDeviceGetRetiredPages(self, h: int, cause: int) -> list[int]:
        return [0x1000] * self._counter(h, f"retired_pages.{('sbe', 'dbe')[cause]}")

    def _nvmlDeviceGetRemappedRows(self, h: int) -> tuple[int, ...]:
        names = ("correctable", "uncorrectable", "pending", "failure")
        return tuple(self._counter(h, f"remapped_rows.{n}") for n in names)

    def _nvmlDeviceGetNvLinkState(self, h: int, link: int) -> int:
        self._counter(h, f"nvlink.{link}.replay")  # NotSupported past the last link
        return pynvml.NVML_FEATURE_ENABLED

    def _nvmlDeviceGetNvLinkErrorCounter(self, h: int, link: int, counter: int) -> int:
        names = ("replay", "recovery", "crc_flit", "crc_data", "ecc_data")
        return self._counter(h, f"nvlink.{link}.{names[counter]}")

    def _nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        throttle = self._gpu(h).throttle
        if throttle is None:
            raise _error(NOT_SUPPORTED)
        return throttle

    def _nvmlEventSetCreate(self) -> str:
        return "set"

    def _nvmlDeviceRegisterEvents(self, h: int, types: int, event_set: str) -> None: ...

    def _nvmlEventSetWait_v2(self, event_set: str, timeout_ms: int) -> SimpleNamespace:
        if not self.pending_xids:
            for r in self.ticks[self.tick][2]:
                self.pending_xids += [(r.index, x.xid) for x in r.xids]
            self.pending_xids.append((-1, -1))  # the end of this tick's events
        handle, xid = self.pending_xids.pop(0)
        if handle < 0:
            raise _error(pynvml.NVML_ERROR_TIMEOUT)
        return SimpleNamespace(
            eventType=pynvml.nvmlEventTypeXidCriticalError, eventData=xid, device=handle
        )

    def _nvmlDeviceGetIndex(self, h: int) -> int:
        return h

    def _nvmlEventSetFree(self, event_set: str) -> None: ...


def test_the_seam_reads_back_the_recording_with_these_calls() -> None:
    nvml = ReplayNvml(TICKS)
    sampler = NvmlSampler(host="gpu01", nvml=nvml).open()
    for n, (time_us, host, recorded) in enumerate(TICKS):
        nvml.tick = n
        assert sampler.health() == recorded
        # A reading written back is the recorded line, byte for byte (bar key order).
        assert parse_health_line(health_line(time_us, host, sampler.health()))[2] == recorded
    nvml.calls.clear()
    sampler.health()
    gpu1 = [c for c in nvml.calls if c[1:2] == (1,)]
    assert gpu1 == [
        ("nvmlDeviceGetTotalEccErrors", 1, 0, 0),
        ("nvmlDeviceGetTotalEccErrors", 1, 1, 0),
        ("nvmlDeviceGetTotalEccErrors", 1, 0, 1),
        ("nvmlDeviceGetTotalEccErrors", 1, 1, 1),
        ("nvmlDeviceGetRetiredPages", 1, 0),
        ("nvmlDeviceGetRetiredPages", 1, 1),
        ("nvmlDeviceGetRemappedRows", 1),
        ("nvmlDeviceGetNvLinkState", 1, 0),  # NotSupported: no NVLink on this GPU
        ("nvmlDeviceGetCurrentClocksEventReasons", 1),
    ]
    assert ("nvmlEventSetWait_v2", "set", 0) in nvml.calls  # never blocks the sampler
    sampler.close()
    assert nvml.calls[-2:] == [("nvmlEventSetFree", "set"), ("nvmlShutdown",)]


def test_faults_only_on_change() -> None:
    tracker = HealthTracker("gpu01")
    events = [tracker.changes(t, readings) for t, _, readings in TICKS]
    assert events[0] == [] and events[2] == []  # the baseline; then nothing new
    got = sorted(
        (e["payload"]["gpu"], e["payload"]["kind"], e["payload"].get("counter"),
         e["payload"].get("xid"), e["payload"]["severity"], e["payload"]["action"])
        for e in events[1]
    )  # fmt: skip
    assert got == [
        (0, "throttle", "throttle.hw_slowdown", None, "hardware", "CONTACT_SUPPORT"),
        (1, "ecc", "ecc.aggregate.uncorrected", None, "hardware", "RESET_GPU"),
        (1, "ecc", "ecc.volatile.uncorrected", None, "hardware", "RESET_GPU"),
        (1, "remapped_rows", "remapped_rows.pending", None, "hardware", "DRAIN_AND_RESET"),
        (1, "remapped_rows", "remapped_rows.uncorrectable", None, "hardware", "DRAIN_AND_RESET"),
        (1, "xid", None, 48, "hardware", "RESET_GPU"),
    ]
    ecc = next(e for e in events[1] if e["payload"].get("counter") == "ecc.volatile.uncorrected")
    assert (ecc["payload"]["previous"], ecc["payload"]["value"]) == (0, 2)
    assert ecc["stream"] == "gpu01/gpu1" and ecc["payload"]["pci_bus"] == "0000:3b:00"


def test_live_sampling_stores_the_faults_once(
    sqlite_url: str, opener: Callable[[str], EventStore]
) -> None:
    nvml = ReplayNvml(TICKS)
    store = opener(sqlite_url)
    with NvmlSampler(host="gpu01", nvml=nvml, health_every=1) as sampler:
        report = sample_live(
            store, sampler, interval_s=0.001, count=3, on_tick=lambda *_: nvml.advance()
        )
    faults = [e.payload for e in store.read(EventFilter(type="gpu.fault"))]
    assert all(isinstance(f, GpuFault) and f.origin == "nvml" for f in faults)
    assert len(faults) == 6 and report.appended == 6 + 2 * 3


@pytest.mark.parametrize(
    "line",
    [
        b"[]",
        b'{"time_us": 1, "host": "h", "health": [{"index": 999}]}',
        b'{"time_us": 1, "host": "h", "health": [{"index": 0, "xids": [{"xid": 5000}]}]}',
        b'{"time_us": 1, "host": "h", "health": [{"index": 0, "counters": {"x": "1"}}]}',
        b'{"time_us": 1, "host": "h", "health": [], "more": 1}',
    ],
)
def test_hostile_recording_lines_are_refused(line: bytes) -> None:
    with pytest.raises(ValueError):
        parse_health_line(line)


def test_health_is_read_every_nth_tick_only() -> None:
    nvml = ReplayNvml(TICKS)
    with NvmlSampler(host="gpu01", nvml=nvml, health_every=2) as sampler:
        read = []
        for n in range(3):
            nvml.tick = n
            before = len(nvml.calls)
            sampler.faults(TICKS[n][0])
            read.append(any(c[0] == "nvmlDeviceGetRemappedRows" for c in nvml.calls[before:]))
    assert read == [True, False, True]
    with pytest.raises(ValueError, match="health_every"):
        NvmlSampler(host="h", nvml=nvml, health_every=0)
