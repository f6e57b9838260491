"""GPU health readings (`ingest.gpu_health`) → `gpu.fault` events, only on change: a counter
that grew (ECC errors, retired pages, remapped rows, NVLink errors), a hardware clock event
reason that appeared, and every Xid NVML's event API reported. The first reading of a GPU is
its baseline and says nothing (a counter that was already high is history, not news).

Severity and action: the Xid catalogue's for an Xid (`advisor.core.xids`); for a counter,
`_JUDGED` below.
"""

from __future__ import annotations

from typing import Any, Final

from advisor.core.records import clean_name, stable_key
from advisor.core.xids import Action, Severity, lookup
from ingest.gpu_health import HealthReading

# Counter name (its last part for NVLink's "nvlink.N.name") -> (severity, action) when it grows.
_JUDGED: Final[dict[str, tuple[Severity, Action]]] = {
    "ecc.volatile.corrected": ("info", "IGNORE"),
    "ecc.aggregate.corrected": ("info", "IGNORE"),
    "ecc.volatile.uncorrected": ("hardware", "RESET_GPU"),
    "ecc.aggregate.uncorrected": ("hardware", "RESET_GPU"),
    "retired_pages.sbe": ("hardware", "DRAIN_AND_RESET"),
    "retired_pages.dbe": ("hardware", "DRAIN_AND_RESET"),
    "remapped_rows.correctable": ("hardware", "DRAIN_AND_RESET"),
    "remapped_rows.uncorrectable": ("hardware", "DRAIN_AND_RESET"),
    "remapped_rows.pending": ("hardware", "DRAIN_AND_RESET"),
    "remapped_rows.failure": ("hardware", "CONTACT_SUPPORT"),
    "replay": ("info", "IGNORE"),
    "crc_flit": ("info", "IGNORE"),
    "crc_data": ("info", "IGNORE"),
    "recovery": ("hardware", "RESET_GPU"),
    "ecc_data": ("hardware", "RESET_GPU"),
}
# Clock event reasons worth an event when they appear (nvmlClocksEventReason*).
THROTTLE_REASONS: Final[dict[int, tuple[str, Severity, Action]]] = {
    0x08: ("hw_slowdown", "hardware", "CONTACT_SUPPORT"),
    0x20: ("sw_thermal_slowdown", "info", "IGNORE"),
    0x40: ("hw_thermal_slowdown", "hardware", "CONTACT_SUPPORT"),
    0x80: ("hw_power_brake_slowdown", "hardware", "CONTACT_SUPPORT"),
}


def health_source(host: str) -> str:
    return f"nvml-health:{host}"


def _kind(counter: str) -> str:
    head = counter.split(".", 1)[0]
    return head if head in ("ecc", "remapped_rows", "retired_pages", "nvlink") else "throttle"


class HealthTracker:
    """The last reading of each GPU of one host; `changes` turns a tick into fault events."""

    def __init__(self, host: str) -> None:
        self.host = host
        self._last: dict[int, HealthReading] = {}

    def changes(self, time_us: int, readings: list[HealthReading]) -> list[dict[str, Any]]:
        """The raw `gpu.fault` events of one tick (empty when nothing changed)."""
        out: list[dict[str, Any]] = []
        for r in readings:
            before = self._last.get(r.index)
            self._last[r.index] = r
            for seen in r.xids:
                entry = lookup(seen.xid)
                out.append(
                    self._event(time_us, r, "xid", entry.severity, entry.action, xid=seen.xid)
                )
            if before is None:
                continue
            out += self._counters(time_us, before, r)
            out += self._throttle(time_us, before, r)
        return out

    def _counters(
        self, time_us: int, before: HealthReading, r: HealthReading
    ) -> list[dict[str, Any]]:
        out = []
        for name, value in sorted(r.counters.items()):
            previous = before.counters.get(name)
            if previous is None or value <= previous:
                continue
            judged = _JUDGED.get(name) or _JUDGED.get(name.rsplit(".", 1)[-1])
            severity, action = judged or ("info", "IGNORE")
            out.append(
                self._event(
                    time_us,
                    r,
                    _kind(name),
                    severity,
                    action,
                    counter=name,
                    value=value,
                    previous=previous,
                )
            )
        return out

    def _throttle(
        self, time_us: int, before: HealthReading, r: HealthReading
    ) -> list[dict[str, Any]]:
        if r.throttle is None:
            return []
        new = r.throttle & ~(before.throttle or 0)
        return [
            self._event(
                time_us,
                r,
                "throttle",
                severity,
                action,
                counter=f"throttle.{name}",
                value=r.throttle,
                previous=before.throttle,
            )
            for bit, (name, severity, action) in THROTTLE_REASONS.items()
            if new & bit
        ]

    def _event(
        self, time_us: int, r: HealthReading, kind: str, severity: str, action: str, **more: Any
    ) -> dict[str, Any]:
        payload = {
            "type": "gpu.fault",
            "origin": "nvml",
            "kind": kind,
            "host": self.host,
            "gpu": r.index,
            "severity": severity,
            "action": action,
            **{k: v for k, v in (("uuid", r.uuid), ("pci_bus", r.pci_bus)) if v is not None},
            **more,
        }
        what = more.get("counter") or f"xid.{more.get('xid')}"
        return {
            "stream": f"{clean_name(self.host)}/gpu{r.index}",
            "time_us": time_us,
            "source": health_source(self.host),
            "key": stable_key(f"{time_us}/{r.index}/{what}".encode()),
            "payload": payload,
        }
