"""Lines in order → service runs, each with its phases, config, lifecycle and tracebacks.

A run is one start of a unit until its end. Boundaries come from journald's invocation id
where the input has one, else from systemd's `Starting…`/`Started…` lines, else from the
server printing its start-up banner again after the previous run ended (docker logs of a
restarted container). Lines that belong to no unit (kernel messages, a paste without
context) join the run in progress.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from advisor.parsing.facts import PHASE_ORDER, LineFacts, engine_hint, merge_config, read_facts
from advisor.parsing.lines import LogLine, Split, clean_text, split_line
from advisor.parsing.tracebacks import Traceback, stitch

_END_EVENTS: Final = frozenset({"exit", "failed", "deactivated", "stopped", "restart_scheduled",
                                "start_failed", "start_limit"})
# Lines that say the server process or its engine died, whatever the exit status says.
_DEATH_CUES: Final = (
    "died unexpectedly", "EngineCore encountered a fatal error", "EngineDeadError",
    "Engine core initialization failed", "EngineCore failed to start", "WorkerProc failed",
    "Engine process failed to start", "Background loop has errored",
    "Background loop is not running",
    "engine core exited unexpectedly", "Received sigquit from a child", "Initialization failed",
    "Shard complete standard error output", "Error: Warmup", "Error: Shard",
    "Application startup failed", "Fatal Python error", "Scheduler hit an exception")
_CLEAN_SIGNALS: Final = frozenset({"TERM", "INT", "HUP", "PIPE"})
_BANNER_CUES: Final = ("API server version", "non-default args:", "args: Namespace(",
                       "vLLM server version", "server_args=ServerArgs(", "Args {")


@dataclass(frozen=True, slots=True)
class Parsed:
    line: LogLine
    split: Split
    facts: LineFacts
    engine: str | None

    @property
    def body(self) -> str:
        return self.split.body

    @property
    def writer(self) -> object:
        s = self.split
        if s.pid is not None:
            return s.pid
        # SGLang's [time TP0] heads a record whose further lines carry no prefix.
        if s.process is not None and self.engine == "vllm":
            return s.process
        return self.line.pid


def parse(lines: Iterable[LogLine]) -> list[Parsed]:
    out = []
    for line in lines:
        split = split_line(clean_text(line.text), journal_identifier=line.identifier,
                           transport=line.transport)
        engine = split.engine
        if engine is None and line.pid == 1 and line.identifier == "systemd":
            engine = "systemd"
        facts = read_facts(split.body, engine)
        if engine is None:
            engine = engine_hint(split.body) if ("vllm" in split.body.lower()
                                                 or "text_generation" in split.body
                                                 or "sglang" in split.body) else None
        out.append(Parsed(line, split, facts, engine))
    return out


@dataclass(slots=True)
class Run:
    """One run: positions of its lines in the parsed input, and what they add up to."""

    unit: str | None
    invocation_id: str | None
    indexes: list[int] = field(default_factory=list)
    tracebacks: list[Traceback] = field(default_factory=list)
    engine: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    events: dict[str, int] = field(default_factory=dict)      # first position of each event
    event_facts: dict[str, Any] = field(default_factory=dict)  # exit code, result, restarts
    phase_at: dict[int, str] = field(default_factory=dict)     # position → phase reached
    ready_at: int | None = None
    stop_at: int | None = None
    died: bool = False
    facts_dropped: int = 0   # numbers its lines stated outside their domain

    def phase_before(self, position: int) -> str | None:
        """The furthest startup phase reached at or before `position` (`starting` when the
        run's start was seen but no phase after it)."""
        best: str | None = "starting" if self.started else None
        for i in self.indexes:
            if i > position:
                break
            phase = self.phase_at.get(i)
            if phase is not None and phase != "shutdown" and (
                    best is None or PHASE_ORDER[phase] > PHASE_ORDER[best]):
                best = phase
        return best

    def last_phase(self) -> str | None:
        return self.phase_before(self.indexes[-1]) if self.indexes else None

    @property
    def ended(self) -> bool:
        return any(e in self.events for e in _END_EVENTS)

    @property
    def started(self) -> bool:
        """Did the input show this run's start (systemd's job lines or the server's banner)?"""
        return "start" in self.events or "started" in self.events or bool(self.config)

    @property
    def has_app_lines(self) -> bool:
        return bool(self.phase_at) or self.engine is not None

    @property
    def ready(self) -> bool:
        return self.ready_at is not None

    @property
    def has_phases(self) -> bool:
        return bool(self.phase_at)


class Boundary(Protocol):
    """What deciding whether a line starts a new run needs to know of the current run."""

    @property
    def invocation_id(self) -> str | None: ...
    @property
    def ended(self) -> bool: ...
    @property
    def has_app_lines(self) -> bool: ...
    @property
    def ready(self) -> bool: ...
    @property
    def has_phases(self) -> bool: ...


def starts_new_run(run: Boundary, p: Parsed) -> bool:
    """Does line `p` begin a new run after `run`, which already has lines?"""
    invocation = p.line.invocation_id
    if invocation is not None and run.invocation_id is not None \
            and invocation != run.invocation_id:
        return True
    if invocation is not None:
        return False
    if p.facts.event in ("start", "started") and p.engine == "systemd":
        return run.ended or run.has_app_lines
    if p.engine in ("vllm", "sglang", "tgi") and any(c in p.body for c in _BANNER_CUES):
        return run.ended or run.ready or run.has_phases
    return False


def says_died(body: str) -> bool:
    """Does the line say the server or its engine died (whatever the exit status)?"""
    return any(cue in body for cue in _DEATH_CUES)


def ended_badly(event_facts: dict[str, Any], events: Iterable[str]) -> bool:
    """Did systemd's lifecycle lines say the run failed?"""
    if any(e in ("failed", "start_failed", "oom_kill", "start_limit") for e in events):
        return True
    if event_facts.get("exit_code") not in (None, 0):
        return True
    return event_facts.get("exit_signal") not in (None, *_CLEAN_SIGNALS)


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
            targets = [owner] if owner is not None else [
                r for r in current.values() if not r.ended and r.engine is not None]
            if not targets and last is not None:
                targets = [last]
            for target in {id(r): r for r in targets}.values():
                target.indexes.append(i)
                _absorb(target, i, p)
            continue
        run = current.get(unit) if unit is not None or last is None else last
        if i in header and last is not None:
            run = last
        elif run is None or (run.indexes and starts_new_run(run, p)):
            run = Run(unit, p.line.invocation_id)
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
        _absorb(run, i, p)
        last = run
    for run in runs:
        run.indexes.sort()
        _finish(run, parsed)
    return runs


def single_run(parsed: Sequence[Parsed], unit: str | None,
               invocation_id: str | None) -> Run:
    """All of `parsed` as one run (its boundaries were decided already)."""
    run = Run(unit, invocation_id, list(range(len(parsed))))
    for i, p in enumerate(parsed):
        _absorb(run, i, p)
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
        if (stop is None or i < stop) and not parsed[i].facts.noise \
                and says_died(parsed[i].body):
            return True
    if not run.ended and run.tracebacks:
        # A paste that ends in a traceback: the process died with it (unless it went on
        # serving requests afterwards: then it was one request's error).
        last = run.tracebacks[-1]
        if last.exceptions and (stop is None or last.indexes[0] < stop):
            after = [parsed[i] for i in run.indexes if i > last.exceptions[-1]]
            if len(after) <= 12 and not any(p.facts.noise or p.split.level in ("INFO", "DEBUG")
                                            for p in after):
                return True
    return False


def is_serving(run: Run, parsed: Sequence[Parsed]) -> bool:
    """Did the run serve requests (access-log, request and throughput lines) and not die?"""
    return not run.died and sum(1 for i in run.indexes if parsed[i].facts.noise) >= 3


def _absorb(run: Run, i: int, p: Parsed) -> None:
    f = p.facts
    if p.engine in ("vllm", "sglang", "tgi") and run.engine is None:
        run.engine = p.engine
    run.facts_dropped += f.dropped
    merge_config(run.config, f)
    if f.phase is not None:
        run.phase_at[i] = f.phase
        if f.phase == "ready" and run.ready_at is None:
            run.ready_at = i
        if f.phase == "shutdown" and run.stop_at is None:
            run.stop_at = i
    if f.event is not None:
        run.events.setdefault(f.event, i)
        if f.event == "stop_requested" and run.stop_at is None:
            run.stop_at = i
        for key in ("exit_code", "exit_signal", "unit_result", "stop_timed_out"):
            if key in f.facts:
                run.event_facts.setdefault(key, f.facts[key])
        if "restart_count" in f.facts:
            run.event_facts["restart_count"] = max(
                f.facts["restart_count"], run.event_facts.get("restart_count", 0))
