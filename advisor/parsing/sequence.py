"""Lines in order → service runs, each with its phases, config, lifecycle and tracebacks.

A run is one start of a unit until its end. Boundaries come from journald's invocation id
where the input has one, else from systemd's `Starting…`/`Started…` lines, else from the
server printing its start-up banner again after the previous run ended (docker logs of a
restarted container). Lines that belong to no unit (kernel messages, a paste without
context) join the run in progress.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from advisor.parsing.facts import PHASE_ORDER
from advisor.parsing.parsed import Parsed, parse
from advisor.parsing.runfold import (
    Boundary,
    RunFold,
    ended_badly,
    says_died,
    starts_new_run,
)
from advisor.parsing.tracebacks import Traceback, stitch

__all__ = [
    "Boundary",
    "Parsed",
    "Run",
    "ended_badly",
    "is_serving",
    "parse",
    "says_died",
    "segment",
    "single_run",
    "starts_new_run",
]


@dataclass(slots=True, kw_only=True)
class Run(RunFold):
    """One run: positions of its lines in the parsed input, and what they add up to (its
    `RunFold`, marked by position)."""

    unit: str | None
    invocation_id: str | None
    indexes: list[int] = field(default_factory=list)
    tracebacks: list[Traceback] = field(default_factory=list)
    died: bool = False

    def phase_before(self, position: int) -> str | None:
        """The furthest startup phase reached at or before `position` (`starting` when the
        run's start was seen but no phase after it)."""
        best: str | None = "starting" if self.started else None
        for i in self.indexes:
            if i > position:
                break
            phase = self.phase_at.get(i)
            if (
                phase is not None
                and phase != "shutdown"
                and (best is None or PHASE_ORDER[phase] > PHASE_ORDER[best])
            ):
                best = phase
        return best

    def last_phase(self) -> str | None:
        return self.phase_before(self.indexes[-1]) if self.indexes else None

    @property
    def started(self) -> bool:
        """Did the input show this run's start (systemd's job lines or the server's banner)?"""
        return "start" in self.events or "started" in self.events or bool(self.config)


def _status_header(parsed: Sequence[Parsed]) -> list[int]:
    """Positions of a leading `systemctl status` header block (it describes the unit's state
    now, so it belongs with the last run, not the first)."""
    if not parsed or parsed[0].split.identifier != "systemctl":
        return []
    header = []
    for i, p in enumerate(parsed):
        if i and p.split.identifier is not None:
            break
        header.append(i)
    return header


_KERNEL_PID = re.compile(r"(?:\bpid=|Killed process )([0-9]{1,10})\b")


def segment(parsed: Sequence[Parsed]) -> list[Run]:
    """Cut the input into runs, per unit, in order of their first line. A line without a
    unit (a paste) joins the run of the line before it. A kernel line joins the run of the
    process it names (`pid=N`, `Killed process N`); failing that, with several units in the
    input, every inference server's run still going — it is evidence about the host, not
    about one service."""
    runs: list[Run] = []
    current: dict[str | None, Run] = {}
    by_pid: dict[int, Run] = {}
    last: Run | None = None
    header = _status_header(parsed)
    order = [*range(len(header), len(parsed)), *header]
    for i in order:
        p = parsed[i]
        unit = p.line.unit
        if p.engine == "kernel" and unit is None and len(current) > 1:
            m = _KERNEL_PID.search(p.body)
            owner = by_pid.get(int(m.group(1))) if m else None
            targets = (
                [owner]
                if owner is not None
                else [r for r in current.values() if not r.ended and r.engine is not None]
            )
            if not targets and last is not None:
                targets = [last]
            for target in {id(r): r for r in targets}.values():
                target.indexes.append(i)
                target.absorb(i, p)
            continue
        run = current.get(unit) if unit is not None or last is None else last
        if i in header and last is not None:
            run = last
        elif run is None or (run.indexes and starts_new_run(run, p)):
            run = Run(unit=unit, invocation_id=p.line.invocation_id)
            runs.append(run)
        if run.invocation_id is None and p.line.invocation_id is not None:
            run.invocation_id = p.line.invocation_id
        if run.unit is None and unit is not None:
            run.unit = unit
        current[run.unit] = run
        if unit is None:
            current[None] = run
        for pid in (p.split.pid, p.line.pid):
            if pid is not None and pid != 1:
                by_pid[pid] = run
        run.indexes.append(i)
        run.absorb(i, p)
        last = run
    for run in runs:
        run.indexes.sort()
        _finish(run, parsed)
    return runs


def single_run(parsed: Sequence[Parsed], unit: str | None, invocation_id: str | None) -> Run:
    """All of `parsed` as one run (its boundaries were decided already)."""
    run = Run(unit=unit, invocation_id=invocation_id, indexes=list(range(len(parsed))))
    for i, p in enumerate(parsed):
        run.absorb(i, p)
    _finish(run, parsed)
    return run


def _finish(run: Run, parsed: Sequence[Parsed]) -> None:
    """What needs all of the run's lines: its tracebacks, and whether it died."""
    bodies = [parsed[i].body for i in run.indexes]
    writers = [parsed[i].writer for i in run.indexes]
    records = [parsed[i].split.logger for i in run.indexes]
    run.tracebacks = stitch(bodies, writers, records)
    for tb in run.tracebacks:  # positions inside the run → positions in the input
        tb.indexes = [run.indexes[j] for j in tb.indexes]
        tb.exceptions = [run.indexes[j] for j in tb.exceptions]
    run.died = _died(run, parsed)


def _died(run: Run, parsed: Sequence[Parsed]) -> bool:
    """Did the run end in failure? By text and sequence, not by exit status alone."""
    if ended_badly(run.event_facts, run.events):
        return True
    stop = run.stop_at
    for i in run.indexes:
        if (stop is None or i < stop) and not parsed[i].facts.noise and says_died(parsed[i].body):
            return True
    if not run.ended and run.tracebacks:
        # A paste that ends in a traceback: the process died with it (unless it went on
        # serving requests afterwards: then it was one request's error).
        last = run.tracebacks[-1]
        if last.exceptions and (stop is None or last.indexes[0] < stop):
            after = [parsed[i] for i in run.indexes if i > last.exceptions[-1]]
            if len(after) <= 12 and not any(
                p.facts.noise or p.split.level in ("INFO", "DEBUG") for p in after
            ):
                return True
    return False


def is_serving(run: Run, parsed: Sequence[Parsed]) -> bool:
    """Did the run serve requests (access-log, request and throughput lines) and not die?"""
    return not run.died and sum(1 for i in run.indexes if parsed[i].facts.noise) >= 3
