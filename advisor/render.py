"""Turn events and reports into lines for a terminal or for scripts (JSON)."""

from __future__ import annotations

import re
from typing import Any

from advisor.events import (
    GpuSampled,
    IncidentClassified,
    IncidentOpened,
    IncidentRecurred,
    IncidentResolved,
    LogRecorded,
    RunClassified,
    StoredEvent,
)
from advisor.timefmt import format_us

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
MIB = 1024 * 1024


def safe_text(text: str) -> str:
    """Log text is hostile: drop colour codes and escape every other control character, so
    that nothing from a log can drive the terminal."""
    text = _ANSI.sub("", text).replace("\n", "\\n").replace("\t", " ")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def summary(event: StoredEvent) -> str:
    p = event.payload
    if isinstance(p, LogRecorded):
        if p.message is None:
            return "[message not stored: over 4 KiB in journalctl -o json]" \
                if p.message_truncated else "[no message]"
        return safe_text(p.message)
    if isinstance(p, GpuSampled):
        parts = [f"gpu{p.index} {p.memory_used_bytes // MIB}/{p.memory_total_bytes // MIB} MiB"]
        if p.utilization_gpu_pct is not None:
            parts.append(f"util {p.utilization_gpu_pct}%")
        if p.temperature_c is not None:
            parts.append(f"{p.temperature_c}C")
        if p.power_w is not None:
            parts.append(f"{p.power_w:.0f}W")
        if p.processes:
            parts.append("procs " + ",".join(
                f"{q.pid}{'(' + safe_text(q.unit) + ')' if q.unit else ''}" for q in p.processes))
        return " ".join(parts)
    if isinstance(p, IncidentClassified | RunClassified):
        what = p.incident_id if isinstance(p, IncidentClassified) else p.run_id
        return safe_text(f"{what} {p.label} {p.confidence:.2f} phase={p.phase}")
    if isinstance(p, IncidentOpened | IncidentRecurred | IncidentResolved):
        extra = f" runs={p.runs}" if isinstance(p, IncidentRecurred) else ""
        return safe_text(f"{p.incident_id} run={p.run_id}{extra}")
    return ""


def event_line(event: StoredEvent) -> str:
    return (f"{event.seq:>8}  {format_us(event.time_us)}  {safe_text(event.stream)}  "
            f"{event.type}  {summary(event)}")


def event_json(event: StoredEvent) -> dict[str, Any]:
    return {"seq": event.seq, "stream": event.stream, "type": event.type,
            "schema_version": event.version, "time_us": event.time_us,
            "time": format_us(event.time_us), "recorded_time_us": event.recorded_us,
            "source": event.source, "idem_key": event.key,
            "payload": event.payload.model_dump(mode="json", exclude_none=True)}
