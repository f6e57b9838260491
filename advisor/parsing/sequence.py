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

from advisor.parsing.parsed import Parsed
from advisor.parsing.phases import PHASE_ORDER
from advisor.parsing.runfold import (
    RunFold,
    ended_badly,
    line_says_died,
    starts_new_run,
)
from advisor.parsing.tracebacks import Stitcher, Traceback

__all__ = [
    "Run",
    "RunCutter",
    "is_serving",
    "segment",
    "settle",
    "single_run",
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
    lines: int = 0  # how many lines joined it (`indexes` may keep only some of them)

    def phase_before(self, position: int) -> str | None:
        """The furthest startup phase reached at or before `position` (`starting` when the
        run's start was seen but no phase after it)."""
        best: str | None = "starting" if self.started else None
        for i in sorted(self.phase_at):
            if i > position:
                break
            phase = self.phase_at[i]
            if phase != "shutdown" and (best is None or PHASE_ORDER[phase] > PHASE_ORDER[best]):
                best = phase
        return best

    def last_phase(self) -> str | None:
        return self.phase_before(self.indexes[-1]) if self.indexes else None

    @property
    def started(self) -> bool:
        """Did the input show this run's start (systemd's job lines or the server's banner)?"""
        return "start" in self.events or "started" in self.events or bool(self.config)


_KERNEL_PID = re.compile(r"(?:\bpid=|Killed process )([0-9]{1,10})\b")


class RunCutter:
    """`segment`'s cut, one line at a time (`add`, then `finish`), for inputs of any length.

    A leading `systemctl status` header block describes the unit's state now, so it belongs
    with the last run: it is held back and placed by `finish`. A run that no line can join
    any more (a new run of its unit took its place) is listed by `take_displaced`; once the
    caller `release`s it, kernel lines naming its processes no longer join it."""

    def __init__(self) -> None:
        self.runs: list[Run] = []
        self.current: dict[str | None, Run] = {}
        self.by_pid: dict[int, Run] = {}
        self.last: Run | None = None
        self._header: list[tuple[int, Parsed]] = []
        self._in_header = False
        self._prompt = False
        self._left: list[Run] = []  # runs that lost their place in `current` or as `last`
        self._displaced: list[Run] = []
        self._released: set[int] = set()

    def add(self, i: int, p: Parsed) -> list[Run]:
        """Place line `i`; the runs it joins (none while a status header is held back)."""
        if i == 0 and p.body.startswith(("$ ", "# ")):
            self._prompt = True  # the shell prompt `systemctl status` was typed at
        opens = (i == 0 or (i == 1 and self._prompt)) and p.split.identifier == "systemctl"
        if opens:
            self._in_header = True
        if self._in_header:
            if opens or p.split.identifier is None:
                self._header.append((i, p))
                return []
            self._in_header = False
        targets = self._place(i, p, in_header=False)
        self._note_displaced()
        return targets

    def finish(self) -> list[tuple[int, Parsed, list[Run]]]:
        """Place the held-back header lines: (position, line, runs it joins) of each."""
        placed = [(i, p, self._place(i, p, in_header=True)) for i, p in self._header]
        self._header = []
        return placed

    def take_displaced(self) -> list[Run]:
        out, self._displaced = self._displaced, []
        return out

    def release(self, run: Run) -> None:
        self._released.add(id(run))

    def _note_displaced(self) -> None:
        for run in self._left:
            gone = run is not self.last and all(run is not r for r in self.current.values())
            if gone and all(run is not r for r in self._displaced):
                self._displaced.append(run)
        self._left = []

    def _set(self, key: str | None, run: Run) -> None:
        old = self.current.get(key)
        if old is not None and old is not run:
            self._left.append(old)
        self.current[key] = run

    def _kernel_targets(self, p: Parsed) -> list[Run]:
        m = _KERNEL_PID.search(p.body)
        owner = self.by_pid.get(int(m.group(1))) if m else None
        targets = (
            [owner]
            if owner is not None
            else [r for r in self.current.values() if not r.ended and r.engine is not None]
        )
        if not targets and self.last is not None:
            targets = [self.last]
        unique = {id(r): r for r in targets}
        return [r for key, r in unique.items() if key not in self._released]

    def _place(self, i: int, p: Parsed, *, in_header: bool) -> list[Run]:
        unit = p.line.unit
        if p.engine == "kernel" and unit is None and len(self.current) > 1:
            targets = self._kernel_targets(p)
            for target in targets:
                target.lines += 1
                target.absorb(i, p)
            return targets
        last = self.last
        run = self.current.get(unit) if unit is not None or last is None else last
        if in_header and last is not None:
            run = last
        elif run is None or (run.lines and starts_new_run(run, p)):
            run = Run(unit=unit, invocation_id=p.line.invocation_id)
            self.runs.append(run)
        if run.invocation_id is None and p.line.invocation_id is not None:
            run.invocation_id = p.line.invocation_id
        if run.unit is None and unit is not None:
            run.unit = unit
        self._set(run.unit, run)
        if unit is None:
            self._set(None, run)
        for pid in (p.split.pid, p.line.pid):
            if pid is not None and pid != 1:
                self.by_pid[pid] = run
        run.lines += 1
        run.absorb(i, p)
        if last is not None and last is not run:
            self._left.append(last)
        self.last = run
        return [run]


def segment(parsed: Sequence[Parsed]) -> list[Run]:
    """Cut the input into runs, per unit, in order of their first line. A line without a
    unit (a paste) joins the run of the line before it. A kernel line joins the run of the
    process it names (`pid=N`, `Killed process N`); failing that, with several units in the
    input, every inference server's run still going — it is evidence about the host, not
    about one service."""
    cutter = RunCutter()
    for i, p in enumerate(parsed):
        for run in cutter.add(i, p):
            run.indexes.append(i)
    for i, _p, targets in cutter.finish():
        for run in targets:
            run.indexes.append(i)
    for run in cutter.runs:
        run.indexes.sort()
        _finish(run, parsed)
    return cutter.runs


def single_run(parsed: Sequence[Parsed], unit: str | None, invocation_id: str | None) -> Run:
    """All of `parsed` as one run (its boundaries were decided already)."""
    run = Run(unit=unit, invocation_id=invocation_id, indexes=list(range(len(parsed))))
    for i, p in enumerate(parsed):
        run.absorb(i, p)
    _finish(run, parsed)
    return run


def _finish(run: Run, parsed: Sequence[Parsed]) -> None:
    """What needs all of the run's lines: its tracebacks, and whether it died."""
    stitcher = Stitcher()
    for i in run.indexes:
        p = parsed[i]
        stitcher.feed(i, p.body, p.writer, p.split.logger)
    settle(run, parsed, stitcher.finish())


def settle(run: Run, parsed: Sequence[Parsed], tracebacks: list[Traceback]) -> None:
    """Give the run its tracebacks (positions in the input) and decide whether it died."""
    run.tracebacks = tracebacks
    run.died = _died(run, parsed)


def _died(run: Run, parsed: Sequence[Parsed]) -> bool:
    """Did the run end in failure? By text and sequence, not by exit status alone."""
    if ended_badly(run.event_facts, run.events):
        return True
    stop = run.stop_at
    for i in run.indexes:
        if (stop is None or i < stop) and not parsed[i].facts.noise and line_says_died(parsed[i]):
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
