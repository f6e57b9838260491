"""The words for GPU faults (`gpu.fault`, docs/gpu-health.md) in reports: the post-mortem's
"GPU faults" section and timeline entries, the console's incident page."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor.core.timefmt import format_us

if TYPE_CHECKING:
    from advisor.views.read.gpufaults import FaultView


def where(gpu: int | None, pci_bus: str | None) -> str:
    """The GPU a fault hit, as far as it is known."""
    if gpu is not None:
        return f"GPU {gpu}"
    return f"PCI {pci_bus}" if pci_bus else "an unknown GPU"


def fault_title(fault: dict[str, Any]) -> str:
    """One line naming a fault (an `as_json` dict): what, where, how bad, what to do."""
    on = where(fault["gpu"], fault["pci_bus"])
    if fault["xid"] is not None:
        what = f"Xid {fault['xid']}" + (f" {fault['mnemonic']}" if fault["mnemonic"] else "")
    else:
        before = "?" if fault["previous"] is None else str(fault["previous"])
        what = f"{fault['counter'] or fault['kind']} {before} → {fault['value']}"
    return f"{what} on {on} ({fault['severity']}, {fault['action']})"


def report_faults(views: list[FaultView]) -> list[dict[str, Any]]:
    """The faults as the report keeps them: their JSON with the time and a title."""
    out = []
    for view in views:
        d = view.as_json()
        out.append({"time": format_us(view.time_us), "title": fault_title(d), **d})
    return out


def fault_lines(faults: list[dict[str, Any]]) -> list[str]:
    """The report's faults as text lines: time, title, meaning, the line's own text."""
    lines = []
    for f in faults:
        lines.append(f"{f['time']}  {f['title']}  [linked by {f['linked_by']}]")
        if f["meaning"]:
            lines.append(f"    {f['meaning']}")
        if f["text"]:
            lines.append(f"    {f['text']}")
    return lines
