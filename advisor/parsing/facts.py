"""Typed facts from one line: config, memory numbers, phase reached, lifecycle step.

`read_facts(body, engine)` looks at a line without its wrappers (see `lines.split_line`)
and says what the line states, exactly as stated: sizes are converted to GiB exactly
(``782.00 MiB`` is 782/1024 GiB), thousands separators removed, nothing estimated.
Cheap substring checks come before any regular expression, because most lines of a
serving log (requests, throughput) state nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from advisor.parsing.patterns import ALIAS as _ALIAS
from advisor.parsing.patterns import CONFIG_CUES as _CONFIG_CUES
from advisor.parsing.patterns import FLAG as _FLAG
from advisor.parsing.patterns import FLAG_ALIAS as _FLAG_ALIAS
from advisor.parsing.patterns import KEYVAL as _KEYVAL
from advisor.parsing.patterns import NUMBERS as _NUMBERS
from advisor.parsing.patterns import SERVE as _SERVE
from advisor.parsing.phases import phase_of
from advisor.parsing.values import (
    CONFIG_FACTS,
    DROPPED,
    read_value,
)

# The names of the facts and their values' reading live in `values`, the phases in `phases`;
# importers of this module find them here too.
__all__ = [
    "LineFacts",
    "merge_config",
    "read_facts",
    "states_nothing",
]


@dataclass(slots=True)
class LineFacts:
    """What one line states. `event` is a lifecycle step, `phase` a startup phase reached."""

    facts: dict[str, Any] = field(default_factory=dict)
    phase: str | None = None
    event: str | None = None
    # The engine's own config line states the resolved values (dtype, quantization after
    # auto-detection); they replace what the arguments said.
    resolved: bool = False
    # A per-request or throughput line: what it says (a prompt!) is not evidence.
    noise: bool = False
    # Numbers the line stated outside their domain (see NUMBER_DOMAINS): dropped, counted.
    dropped: int = 0


def _state(result: LineFacts, key: str, raw: str) -> None:
    """Keep what `raw` states as fact `key` unless the line stated it already; count a
    number outside its domain."""
    if key in result.facts:
        return
    value = read_value(key, raw)
    if value is DROPPED:
        result.dropped += 1
    elif value is not None:
        result.facts[key] = value


def _config(body: str, result: LineFacts) -> None:
    out = result.facts
    if any(cue in body for cue in _CONFIG_CUES):
        for alias, raw in _KEYVAL.findall(body):
            if raw not in _ALIAS:  # `EngineArgs(model=model)`: source code, not a value
                _state(result, _ALIAS[alias], raw)
    if " --" in body or " -tp" in body or " -q " in body:
        for flag, raw in _FLAG.findall(body):
            _state(result, _FLAG_ALIAS[flag], raw)
        m = _SERVE.search(body)
        if m and "model" not in out:
            out["model"] = m.group(1)


# ------------------------------------------------------------------ numbers in messages
def _numbers(body: str, result: LineFacts) -> None:
    for pattern in _NUMBERS:
        if pattern.cue in body:
            m = pattern.regex.search(body)
            if m:
                for key, raw in m.groupdict().items():
                    if raw is not None:
                        _state(result, key, raw)


# ------------------------------------------------------------------ systemd lifecycle
_EXIT = re.compile(r"(?:[Mm]ain|[Cc]ontrol) process exited, code=(\w+), status=(\d+)/([\w/-]+)")
_RESULT = re.compile(r"Failed with result '([\w-]+)'")
_RESTART = re.compile(r"restart counter is at (\d+)")
_SIGNALS: Final = {
    "1": "HUP",
    "2": "INT",
    "6": "ABRT",
    "7": "BUS",
    "9": "KILL",
    "11": "SEGV",
    "15": "TERM",
}


def _systemd(body: str, result: LineFacts) -> str | None:
    """The lifecycle step a PID-1 message announces (and its numbers)."""
    out = result.facts
    if body.startswith(("Starting ", "Started ")) and not body.startswith("Started server"):
        return "start" if body.startswith("Starting") else "started"
    if body.startswith("Stopping "):
        return "stop_requested"
    if body.startswith("Stopped ") or body.startswith("Timed out stopping"):
        if body.startswith("Timed out"):
            out["stop_timed_out"] = True
        return "stopped"
    if "Failed to start" in body:
        return "start_failed"
    if "stopping timed out. Terminating" in body or "stopping timed out. Killing" in body:
        out["stop_timed_out"] = True  # systemd before v230: `UNIT stopping timed out.`
        return "stop_timeout"
    if (
        "timed out. Killing" in body
        or "timed out. Skipping SIGKILL" in body
        or "timed out. Aborting" in body
    ):
        if "stop-sigterm" in body or "final-sigterm" in body or "stop-post" in body:
            out["stop_timed_out"] = True
            return "stop_timeout"
        return "start_timeout"
    if "with signal SIGKILL" in body:
        return "sigkill"
    if "Processes still around after" in body:
        return "still_around"
    m = _EXIT.search(body)
    if m:
        code, status, name = m.groups()
        if "ontrol process" in body:
            return "control_exit"
        if code == "exited":
            _state(result, "exit_code", status)
        else:
            out["exit_signal"] = name if not name.isdigit() else _SIGNALS.get(status, status)
        return "exit"
    m = _RESULT.search(body)
    if m:
        out["unit_result"] = m.group(1)
        return "failed"
    if body.startswith("Unit ") and body.endswith(" entered failed state."):
        return "failed"  # systemd before v236
    if body.endswith(": Deactivated successfully.") or body.endswith(": Succeeded."):
        return "deactivated"
    m = _RESTART.search(body)
    if m:
        _state(result, "restart_count", m.group(1))
        return "restart_scheduled"
    if "Start request repeated too quickly" in body:
        return "start_limit"
    if "Found left-over process" in body:
        return "leftover"
    if "killed by the OOM killer" in body or "systemd-oomd killed" in body:
        return "oom_kill"
    return None


Reader = Callable[[str, LineFacts], None]


# systemd's sub-states of a unit asked to stop, in its words
_STOPPING: Final = ("stop-sigterm", "stop", "final-sigterm")  # not an action kind
_ACTIVE = re.compile(r"^Active: (\w+)(?: \(([\w-]+)\))?(?: \(Result: ([\w-]+)\))?")
_MAIN_PID = re.compile(
    r"^Main PID: \d+ \(code=(\w+), (?:status=(\d+)/([\w/-]+)|signal=([A-Z0-9]+))\)"
)


def _status_header(body: str, line: LineFacts) -> str | None:
    """`systemctl status` header lines: the unit's state and its main process's end."""
    out = line.facts
    m = _ACTIVE.match(body)
    if m:
        state, sub, result = m.groups()
        if result:
            out["unit_result"] = result
        if state == "deactivating" and sub in _STOPPING:
            return "stop_pending"
        if state == "deactivating" and sub in ("stop-sigkill", "final-sigkill"):
            out["stop_timed_out"] = True
            return "stop_timeout"
        if state == "failed" or (state == "activating" and sub == "auto-restart"):
            return "failed"
        return None
    m = _MAIN_PID.match(body)
    if m:
        code, status, name, signal = m.groups()
        if signal is not None:  # `(code=killed, signal=KILL)`
            out["exit_signal"] = signal
            return "exit"
        if code == "exited":
            _state(line, "exit_code", status)
        else:
            out["exit_signal"] = _SIGNALS.get(status, name)
        return "exit"
    return None


# The bulk of a serving log: per-request lines and throughput stats, which state nothing.
_REQUEST_PREFIXES: Final = (
    "Received request ",
    "Added request ",
    "Finished request ",
    "Aborted request ",
    "Engine 000: Avg prompt throughput",
    "Avg prompt throughput",
    "Prefill batch.",
    "Decode batch.",
    "Receive: obj=",
)  # SGLang's, with the request's prompt
_ACCESS_LOG = re.compile(r'^[\d.:\[\]a-f]+:\d+ - "[A-Z]+ ')


def states_nothing(body: str) -> bool:
    """Is the line (without its wrappers) one of a serving log's routine lines: a request's,
    an access log's, a throughput line's? They state no fact, phase or event."""
    return bool(
        body.startswith(_REQUEST_PREFIXES)
        or _ACCESS_LOG.match(body)
        or "{parameters=GenerateParameters" in body  # TGI's per-request span
    )


def read_facts(body: str, engine: str | None) -> LineFacts:
    """Everything one line (without its wrappers) states."""
    if states_nothing(body):
        return LineFacts(noise=True)
    result = LineFacts()
    if engine is None and body.lstrip().startswith(("Active: ", "Main PID: ")):
        result.event = _status_header(body.lstrip(), result)
        return result
    if engine == "systemd":
        result.event = _systemd(body, result)
        if result.event is None:
            _config(body, result)  # `systemctl status` shows the command line
        return result
    if engine == "kernel":
        _numbers(body, result)
        return result
    _numbers(body, result)
    _config(body, result)
    result.phase = phase_of(body, engine)
    result.resolved = "with config:" in body
    return result


def merge_config(config: dict[str, Any], line: LineFacts) -> None:
    """Add a line's config facts to a run's: first stated wins, resolved values replace."""
    for key, value in line.facts.items():
        if key in CONFIG_FACTS:
            if line.resolved:
                config[key] = value
            else:
                config.setdefault(key, value)
