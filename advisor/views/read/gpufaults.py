"""GPU faults (`gpu.fault` events) and the incidents they are linked to.

A fault is linked to a unit's runs when it happened on their host, between the first run's
start and the last run's end (with the kernel lines' margin either side, as a diagnosis reads
them), and

* it names a process of those runs (`pid`: the journal's `_PID` of one of their lines, or a
  `pid=N` a line prints) — linked by `pid`;
* else its GPU (NVML's index, or the PCI address of a kernel line mapped to an index by the
  host's NVML faults) is one NVML saw the unit's processes on in that window — by `gpu`;
* else, naming neither a process of another unit's nor a GPU it can be placed on, it is
  evidence about the host — by `host` (as a diagnosis reads such kernel lines).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from advisor.core.payloads import GpuFault, LogRecorded
from advisor.core.xids import lookup
from advisor.store import EventFilter, EventStore
from advisor.views.read.history import unit_gpus
from advisor.views.read.reading import KERNEL_MARGIN_US, run_log_events
from advisor.views.read.rows import RunView

Link = Literal["pid", "gpu", "host"]
_PRINTED_PID: Final = re.compile(r"\bpid=(\d{1,7})\b")
_PID_TEXT: Final = 200  # a line's pid is printed in its prefix


@dataclass(frozen=True, slots=True)
class FaultView:
    """One `gpu.fault` event as reports show it; `gpu` resolved from the PCI address where
    the event had none, `why` the link to the runs it was read for (None: not linked)."""

    seq: int
    time_us: int
    fault: GpuFault
    gpu: int | None
    why: Link | None = None

    def as_json(self) -> dict[str, Any]:
        f = self.fault
        entry = lookup(f.xid) if f.xid is not None else None
        return {
            "seq": self.seq,
            "time_us": self.time_us,
            "origin": f.origin,
            "kind": f.kind,
            "gpu": self.gpu,
            "uuid": f.uuid,
            "pci_bus": f.pci_bus,
            "xid": f.xid,
            "mnemonic": entry.mnemonic if entry else None,
            "meaning": entry.meaning if entry else None,
            "severity": f.severity,
            "action": f.action,
            "investigate": entry.investigate if entry else None,
            "pid": f.pid,
            "counter": f.counter,
            "value": f.value,
            "previous": f.previous,
            "text": f.text,
            "linked_by": self.why,
        }


def host_faults(
    store: EventStore, host: str | None, since_us: int | None = None, until_us: int | None = None
) -> list[FaultView]:
    """The GPU faults of `host` (None: of every host) between two times, in time order, each
    kernel fault's GPU resolved from its PCI address where NVML's faults of its host name both."""
    found = [
        (e.seq, e.time_us, e.payload)
        for e in store.read(EventFilter(type="gpu.fault", since_us=since_us, until_us=until_us))
        if isinstance(e.payload, GpuFault) and (host is None or e.payload.host == host)
    ]
    by_pci = {
        (p.host, p.pci_bus): p.gpu
        for _, _, p in found
        if p.pci_bus is not None and p.gpu is not None
    }
    return sorted(
        (
            FaultView(
                seq, t, p, p.gpu if p.gpu is not None else by_pci.get((p.host, p.pci_bus or ""))
            )
            for seq, t, p in found
        ),
        key=lambda v: (v.time_us, v.seq),
    )


def _pids(store: EventStore, runs: Sequence[RunView]) -> set[int]:
    """The processes of the runs: their lines' `_PID`s and the `pid=N` their prefixes print."""
    pids: set[int] = set()
    for run in runs:
        for event in run_log_events(store, run):
            p = event.payload
            if not isinstance(p, LogRecorded):
                continue
            if p.pid is not None and p.pid != 1:
                pids.add(p.pid)
            if p.message and "pid=" in p.message[:_PID_TEXT]:
                pids.update(int(m) for m in _PRINTED_PID.findall(p.message[:_PID_TEXT]))
    return pids


def runs_faults(store: EventStore, runs: Sequence[RunView]) -> list[FaultView]:
    """The GPU faults linked to `runs` (one unit's, on one host, in order), as the module's
    docstring says; empty without runs."""
    if not runs:
        return []
    host, unit = runs[0].host, runs[0].unit
    since = runs[0].started_us - KERNEL_MARGIN_US
    until = max(r.ended_us or r.last_us or r.started_us for r in runs) + KERNEL_MARGIN_US
    faults = host_faults(store, host, since, until)
    if not faults:
        return []
    pids = _pids(store, runs)
    gpus = set(unit_gpus(store, host, unit, since, until) or ())
    out = []
    for view in faults:
        pid = view.fault.pid
        if pid is not None and pid in pids:
            out.append(_linked(view, "pid"))
        elif view.gpu is not None and view.gpu in gpus:
            out.append(_linked(view, "gpu"))
        elif pid is None and view.gpu is None:
            out.append(_linked(view, "host"))
    return out


def _linked(view: FaultView, why: Link) -> FaultView:
    return FaultView(view.seq, view.time_us, view.fault, view.gpu, why)
