"""GPU fault events (`gpu.fault`) from the journal: an `NVRM: Xid (PCI:…): N, pid=…, …` kernel
line becomes, beside its `log.recorded` event, a fault event with the Xid catalogue's severity
and action (`advisor.core.xids`).

The line is hostile text: the Xid, the PCI address and the pid are read with bounded patterns
and range-checked, the rest is kept only as clipped text, never interpolated anywhere. The
fault's idempotency key is its line's, under its own source, so a line ingested twice gives
one fault.
"""

from __future__ import annotations

import re
from typing import Any, Final

from advisor.core.records import clean_name
from advisor.core.xids import MAX_XID, lookup

XID_SOURCE: Final = "journald:xid"
TEXT_CHARS: Final = 500
MAX_PID: Final = 2**22  # the kernel's largest pid_max

_XID: Final = re.compile(r"NVRM: Xid \(([^()]{0,64})\): (\d{1,5})\b,? ?(.{0,2000})", re.S)
_PCI: Final = re.compile(r"PCI:([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.[0-7])?$")
_PID: Final = re.compile(r"(?:^|, )pid=(\d{1,10})(?:,|$)")


def xid_fault(payload: dict[str, Any]) -> dict[str, Any] | None:
    """The `gpu.fault` payload of a kernel `log.recorded` payload that reports an Xid; None for
    any other line, or an Xid out of range."""
    message = payload.get("message")
    if not isinstance(message, str) or "NVRM: Xid" not in message:
        return None
    m = _XID.search(message)
    if m is None:
        return None
    where, code_text, rest = m.groups()
    code = int(code_text)
    if not 1 <= code <= MAX_XID:
        return None
    entry = lookup(code)
    fault: dict[str, Any] = {
        "type": "gpu.fault",
        "origin": "kernel",
        "kind": "xid",
        "host": payload["host"],
        "xid": code,
        "severity": entry.severity,
        "action": entry.action,
    }
    pci = _PCI.match(where.strip())
    if pci is not None:
        fault["pci_bus"] = pci.group(1).lower()
    pid = _PID.search(rest)
    if pid is not None and 1 <= int(pid.group(1)) <= MAX_PID:
        fault["pid"] = int(pid.group(1))
    text = " ".join(rest.split())[:TEXT_CHARS]
    if text:
        fault["text"] = text
    return fault


def with_faults(raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`raw` events, each kernel line reporting an Xid followed by its fault event (`raw`
    itself, not a copy, when there is none: the common case costs one pass over the streams)."""
    found: list[tuple[int, dict[str, Any]]] = []
    for n, event in enumerate(raw):
        stream = event.get("stream")
        if stream.__class__ is not str or not stream.endswith("/kernel"):
            continue
        payload = event.get("payload")
        if not isinstance(payload, dict) or payload.get("type") != "log.recorded":
            continue
        fault = xid_fault(payload)
        if fault is not None:
            found.append((n, _fault_event(event, fault)))
    if not found:
        return raw
    out: list[dict[str, Any]] = []
    start = 0
    for n, fault_event in found:
        out += raw[start : n + 1]
        out.append(fault_event)
        start = n + 1
    out += raw[start:]
    return out


def _fault_event(line: dict[str, Any], fault: dict[str, Any]) -> dict[str, Any]:
    """The raw `gpu.fault` event of a kernel line's event: its time, its key, its own source."""
    return {
        "stream": f"{clean_name(fault['host'])}/kernel",
        "time_us": line["time_us"],
        "source": XID_SOURCE,
        "key": line["key"],
        "payload": fault,
    }
