"""The run fold: which run a line is about, and what each line adds to its run.

One definition for both readers of a log: `sequence.segment` (a file, `advisor classify`)
and the projector's `runs` rows (stored events). A line's place in its run is a `mark`:
its position in the input for the one, its time for the other.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from advisor.core.engines import ALL
from advisor.parsing.facts import merge_config
from advisor.parsing.parsed import Parsed
from advisor.parsing.phases import PHASE_ORDER

END_EVENTS: Final = frozenset(
    {"exit", "failed", "deactivated", "stopped", "restart_scheduled", "start_failed", "start_limit"}
)
# The engines whose lines name them (their prefixes, or a mention): their lines are a run's
# own lines and start a run (the registry's, `advisor.core.engines`).
APP_ENGINES: Final = frozenset(e.name for e in ALL if e.recognition.mentions)
EVENT_FACTS: Final = ("exit_code", "exit_signal", "unit_result", "stop_timed_out")
# Lines that say the server process or its engine died, whatever the exit status says.
_DEATH_CUES: Final = (
    "died unexpectedly",
    "EngineCore encountered a fatal error",
    "EngineDeadError",
    "Engine core initialization failed",
    "EngineCore failed to start",
    "WorkerProc failed",
    "Engine process failed to start",
    "Background loop has errored",
    "Background loop is not running",
    "engine core exited unexpectedly",
    "Received sigquit from a child",
    "Initialization failed",
    "Shard complete standard error output",
    "Error: Warmup",
    "Error: Shard",
    "Application startup failed",
    "Fatal Python error",
    "Scheduler hit an exception",
    # vLLM 0.5 – 0.7's launcher, when the engine died under a running server (logger.fatal;
    # uvicorn's orderly shutdown lines follow it): "MQLLMEngine is already dead, …",
    # "AsyncLLMEngine has failed, terminating server process"
    "terminating server process",
    "Webserver Crashed",  # TGI's launcher, when its router process failed
    # A Rust program's main thread panicking ends it (the router of TGI, vllm.rs,
    # candle-vllm, mistral.rs); a C++ exception nobody caught aborts it (llama.cpp).
    "thread 'main' panicked at",
    "terminate called after throwing an instance of",
)
# Levels at which a server logs only what ends it (Python's logger.fatal is CRITICAL).
_FATAL_LEVELS: Final = frozenset({"CRITICAL", "FATAL"})
_CLEAN_SIGNALS: Final = frozenset({"TERM", "INT", "HUP", "PIPE"})
_BANNER_CUES: Final = (
    "API server version",
    "non-default args:",
    "args: Namespace(",
    "vLLM server version",
    "server_args=ServerArgs(",
    "Args {",
)


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
    if invocation is not None and run.invocation_id is not None and invocation != run.invocation_id:
        return True
    if invocation is not None:
        return False
    if p.facts.event in ("start", "started") and p.engine == "systemd":
        return run.ended or run.has_app_lines
    if p.engine in APP_ENGINES and any(c in p.body for c in _BANNER_CUES):
        return run.ended or run.ready or run.has_phases
    return False


def says_died(body: str) -> bool:
    """Does the line say the server or its engine died (whatever the exit status)?"""
    return any(cue in body for cue in _DEATH_CUES)


def line_says_died(p: Parsed) -> bool:
    """`says_died`, or a line of the server's own at a fatal level: whatever orderly
    shutdown lines follow, the run ended in failure."""
    return says_died(p.body) or (p.split.level in _FATAL_LEVELS and p.engine in APP_ENGINES)


def ended_badly(event_facts: dict[str, Any], events: Iterable[str]) -> bool:
    """Did systemd's lifecycle lines say the run failed?"""
    if any(e in ("failed", "start_failed", "oom_kill", "start_limit") for e in events):
        return True
    if event_facts.get("exit_code") not in (None, 0):
        return True
    return event_facts.get("exit_signal") not in (None, *_CLEAN_SIGNALS)


@dataclass(slots=True)
class RunFold:
    """What a run's lines add up to, one line at a time (`absorb`)."""

    engine: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    phases: list[str] = field(default_factory=list)  # in the order first reached
    phase_at: dict[int, str] = field(default_factory=dict)  # mark → phase reached
    best_phase: str | None = None  # the furthest startup phase reached (not `shutdown`)
    events: dict[str, int] = field(default_factory=dict)  # first mark of each event
    event_facts: dict[str, Any] = field(default_factory=dict)  # exit code, result, restarts
    ready_at: int | None = None
    stop_at: int | None = None
    ended_at: int | None = None  # the first end event's mark
    said_died: bool = False  # a line before the stop said the server died
    facts_dropped: int = 0  # numbers its lines stated outside their domain

    @property
    def ended(self) -> bool:
        return self.ended_at is not None

    @property
    def has_app_lines(self) -> bool:
        return bool(self.phases) or self.engine is not None

    @property
    def ready(self) -> bool:
        return self.ready_at is not None

    @property
    def has_phases(self) -> bool:
        return bool(self.phases)

    def absorb(self, at: int, p: Parsed) -> None:
        """Add line `p`, at mark `at`, to the run."""
        f = p.facts
        if p.engine in APP_ENGINES and self.engine is None:
            self.engine = p.engine
        self.facts_dropped += f.dropped
        merge_config(self.config, f)
        if f.phase is not None:
            self._phase(at, f.phase)
        if f.event is not None:
            self._event(at, f.event, f.facts)
        if self.stop_at is None and not f.noise and line_says_died(p):
            self.said_died = True

    def _phase(self, at: int, phase: str) -> None:
        self.phase_at[at] = phase
        if phase not in self.phases:
            self.phases.append(phase)
        if phase != "shutdown" and (
            self.best_phase is None or PHASE_ORDER[phase] > PHASE_ORDER[self.best_phase]
        ):
            self.best_phase = phase
        if phase == "ready" and self.ready_at is None:
            self.ready_at = at
        if phase == "shutdown" and self.stop_at is None:
            self.stop_at = at

    def _event(self, at: int, event: str, facts: dict[str, Any]) -> None:
        self.events.setdefault(event, at)
        if event == "stop_requested" and self.stop_at is None:
            self.stop_at = at
        if event in END_EVENTS and self.ended_at is None:
            self.ended_at = at
        for key in EVENT_FACTS:
            if key in facts:
                self.event_facts.setdefault(key, facts[key])
        if "restart_count" in facts:
            self.event_facts["restart_count"] = max(
                facts["restart_count"], self.event_facts.get("restart_count", 0)
            )
