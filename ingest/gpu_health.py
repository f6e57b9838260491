"""GPU health through NVML: the thin seam. Every pynvml call of the health readings is here,
and nothing else: what one GPU's counters read now (`read_health`), and the Xid critical
errors NVML's event API reported since the last look (`XidEvents`). Which of these are faults
is `ingest.gpu_health_changes`' to say.

Tested on recordings of what NVML answered (`parse_health_line`: JSON lines, one per tick,
``{"time_us": …, "host": "…", "health": [<HealthReading>…]}``, bounded like the GPU sample
recordings); no GPU machine was at hand, so the recordings under tests/fixtures are written by
hand (docs/gpu-health.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, Final

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from advisor.core.payloads import MAX_KEY
from ingest.gpu_recording import MAX_LINE_BYTES, _check_shape, _one_line

# The NVML constants the seam uses (pynvml's values), so a fake module need not define them.
CORRECTED, UNCORRECTED = 0, 1  # nvmlMemoryErrorType_t
VOLATILE, AGGREGATE = 0, 1  # nvmlEccCounterType_t
SBE_CAUSE, DBE_CAUSE = 0, 1  # nvmlPageRetirementCause_t
XID_CRITICAL_ERROR: Final = 8  # nvmlEventTypeXidCriticalError
NVLINK_COUNTERS: Final = {0: "replay", 1: "recovery", 2: "crc_flit", 3: "crc_data", 4: "ecc_data"}
MAX_LINKS: Final = 36  # NVML_NVLINK_MAX_LINKS
_ROWS: Final = ("correctable", "uncorrectable", "pending", "failure")  # nvmlDeviceGetRemappedRows
FEATURE_ENABLED: Final = 1


class XidSeen(BaseModel):
    """One Xid critical error NVML's event API reported for a GPU."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    xid: int = Field(ge=1, le=1023)


class HealthReading(BaseModel):
    """One GPU's health counters at one tick; a counter NVML cannot give is left out."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    index: int = Field(ge=0, le=255)
    uuid: str | None = Field(default=None, max_length=128)
    pci_bus: str | None = Field(default=None, max_length=32)
    counters: dict[str, int] = Field(default_factory=dict)  # name -> value (see _COUNTERS)
    throttle: int | None = Field(default=None, ge=0, le=MAX_KEY)  # clock event reasons mask
    xids: tuple[XidSeen, ...] = ()


class _HealthLine(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    time_us: int = Field(ge=0, le=MAX_KEY)
    host: str = Field(min_length=1, max_length=256)
    health: list[HealthReading]


def pci_bus(raw: Any) -> str | None:
    """NVML's `busId` ("00000000:3B:00.0") as the kernel prints it ("0000:3b:00")."""
    text = raw.decode("ascii", "replace") if isinstance(raw, bytes) else str(raw)
    parts = text.strip("\x00 ").lower().split(":")
    if len(parts) != 3:
        return None
    domain, bus, device = parts[0][-4:], parts[1], parts[2].split(".")[0]
    return f"{domain}:{bus}:{device}"


Optional = Callable[..., Any]  # NvmlSampler._optional: fn(*args) or None when not supported


def read_health(nvml: Any, call: Optional, label: str, handle: Any) -> dict[str, Any]:
    """One GPU's counters (the `HealthReading` fields but the identity and Xids), through
    `optional` (`NvmlSampler._optional`: None for what the GPU cannot give, raises when NVML
    or the GPU is gone). A function this pynvml lacks counts as not supported."""

    def optional(label: str, name: str, *args: Any) -> Any:
        fn = getattr(nvml, name, None)
        return None if fn is None else call(label, fn, *args)

    counters: dict[str, int] = {}
    for kind, kind_name in ((VOLATILE, "volatile"), (AGGREGATE, "aggregate")):
        for error, error_name in ((CORRECTED, "corrected"), (UNCORRECTED, "uncorrected")):
            got = optional(label, "nvmlDeviceGetTotalEccErrors", handle, error, kind)
            if got is not None:
                counters[f"ecc.{kind_name}.{error_name}"] = int(got)
    for cause, name in ((SBE_CAUSE, "sbe"), (DBE_CAUSE, "dbe")):
        pages = optional(label, "nvmlDeviceGetRetiredPages", handle, cause)
        if pages is not None:
            counters[f"retired_pages.{name}"] = len(pages)
    rows = optional(label, "nvmlDeviceGetRemappedRows", handle)
    if rows is not None:
        for name, value in zip(_ROWS, rows, strict=False):
            counters[f"remapped_rows.{name}"] = int(value)
    counters.update(_nvlink(optional, label, handle))
    reasons = "nvmlDeviceGetCurrentClocksEventReasons"  # its older name: …ThrottleReasons
    if getattr(nvml, reasons, None) is None:
        reasons = "nvmlDeviceGetCurrentClocksThrottleReasons"
    throttle = optional(label, reasons, handle)
    return {"counters": counters, "throttle": None if throttle is None else int(throttle)}


def _nvlink(optional: Callable[..., Any], label: str, handle: Any) -> dict[str, int]:
    """The error counters of the GPU's active NVLinks (none on a GPU without NVLink)."""
    out: dict[str, int] = {}
    for link in range(MAX_LINKS):
        state = optional(label, "nvmlDeviceGetNvLinkState", handle, link)
        if state is None:
            break  # no such link: the links are numbered from 0
        if int(state) != FEATURE_ENABLED:
            continue
        for counter, name in NVLINK_COUNTERS.items():
            got = optional(label, "nvmlDeviceGetNvLinkErrorCounter", handle, link, counter)
            if got is not None:
                out[f"nvlink.{link}.{name}"] = int(got)
    return out


class XidEvents:
    """NVML's event API for Xid critical errors: one event set, every GPU registered on it
    (a GPU that cannot be registered is left out), read without waiting."""

    def __init__(self, nvml: Any, handles: list[Any]) -> None:
        self._nvml = nvml
        self._set: Any = None
        self.registered: list[Any] = []
        if getattr(nvml, "nvmlEventSetCreate", None) is None:
            return
        try:
            self._set = nvml.nvmlEventSetCreate()
        except nvml.NVMLError:
            return
        for handle in handles:
            with contextlib.suppress(nvml.NVMLError):
                nvml.nvmlDeviceRegisterEvents(handle, XID_CRITICAL_ERROR, self._set)
                self.registered.append(handle)

    def drain(self, limit: int = 64) -> list[tuple[int, int]]:
        """(GPU index, Xid) of each Xid reported since the last call, at most `limit`."""
        nvml = self._nvml
        out: list[tuple[int, int]] = []
        if self._set is None or not self.registered:
            return out
        for _ in range(limit):
            try:
                data = nvml.nvmlEventSetWait_v2(self._set, 0)
            except nvml.NVMLError:  # NVMLError_Timeout: nothing more (or the set is gone)
                break
            if int(data.eventType) != XID_CRITICAL_ERROR or not 1 <= int(data.eventData) <= 1023:
                continue
            try:
                index = int(nvml.nvmlDeviceGetIndex(data.device))
            except nvml.NVMLError:
                continue
            out.append((index, int(data.eventData)))
        return out

    def close(self) -> None:
        if self._set is not None:
            with contextlib.suppress(self._nvml.NVMLError):
                self._nvml.nvmlEventSetFree(self._set)
            self._set = None


def health_line(time_us: int, host: str, readings: list[HealthReading]) -> bytes:
    """One recording line for one tick's readings."""
    data = {
        "time_us": time_us,
        "host": host,
        "health": [r.model_dump(mode="json", exclude_defaults=True) for r in readings],
    }
    _check_shape(data)
    return orjson.dumps(data) + b"\n"


def parse_health_line(line: bytes | str) -> tuple[int, str, list[HealthReading]]:
    """(time, host, readings) of one recording line; ValueError with a one-line reason."""
    if len(line) > MAX_LINE_BYTES:
        raise ValueError(f"recording line longer than {MAX_LINE_BYTES} bytes")
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError as e:
        raise ValueError(f"invalid JSON: {_one_line(str(e))}") from e
    if not isinstance(data, dict):
        raise ValueError("a health recording line must be a JSON object")
    _check_shape(data)
    try:
        parsed = _HealthLine.model_validate_json(orjson.dumps(data), strict=True)
    except ValidationError as e:
        first = e.errors()[0]
        where = _one_line(".".join(str(p) for p in first["loc"]) or "line")
        raise ValueError(f"invalid health line at {where}: {_one_line(first['msg'])}") from e
    return parsed.time_us, parsed.host, parsed.health
