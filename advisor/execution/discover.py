"""Which units on this host are inference servers, from systemd's own state and their logs.

A service unit in any state — running, activating (auto-restart) in a crash loop, failed,
inactive but loaded — is an inference server when its ExecStart command, as systemd holds it
(D-Bus: the exact argv, variables unexpanded), runs an engine of the registry
(`advisor.core.engines`): directly or after a launcher, in a `docker run` / `podman run`
whose image is the engine, in a shell's `-c` string, or through a wrapper script (read from
its file). A crash-looping unit has no main process most of the time, so what runs now cannot
tell; what systemd would start can. A unit none of those shows — a wrapper that cannot be
read, a command advisor does not follow — is one when it logs an engine's own start-up lines.

`InferenceServers` is `advisor watch`'s journal selection: it keeps the entries about those
units (and the kernel's lines), re-discovers every few seconds, and looks a unit up the moment
an entry about a unit it does not know arrives, so a unit created or crash-looping later is
followed from its first line.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from advisor.core.engines import ALL
from advisor.core.units import is_unit_name
from advisor.execution.bus import SERVICE, BusError, SystemdBus
from advisor.execution.locate import engine_of
from advisor.execution.state import ExecCommand, UnitSnapshot


def engine_of_argv(argv: Sequence[str], path: str | None = None) -> str | None:
    """The engine (`vllm`, `sglang`, `tgi`, `llamacpp`) a command runs — itself, after a
    launcher, in a container, in a shell's `-c` string or through a wrapper script — else
    None. `path` is ExecStart's executable where it differs from argv[0] (`@path argv0 …`)."""
    if not argv:
        return None
    command = ExecCommand(path or argv[0], tuple(argv))
    found = engine_of(UnitSnapshot("?", exec_start=(command,)))
    return None if found is None else found.name


def engine_of_exec_start(commands: Iterable[Sequence[Any]]) -> str | None:
    """The engine of a unit from its ExecStart property: a list of (path, argv, …)."""
    for command in commands:
        path, argv = command[0], command[1]
        if isinstance(path, str) and isinstance(argv, list | tuple):
            found = engine_of_argv([str(a) for a in argv] or [path], path)
            if found is not None:
                return found
    return None


def engine_of_line(message: str) -> str | None:
    """The engine whose own log line `message` is (its start-up lines name it), else None:
    a unit that logs them runs an engine, however its command starts it."""
    for engine in ALL:
        if any(cue in message for cue in engine.recognition.log_cues):
            return engine.name
    return None


# ------------------------------------------------------------------ systemd


@dataclass(frozen=True)
class Found:
    """An inference server's unit: its name, engine and state (`activating/auto-restart`)."""

    unit: str
    engine: str
    state: str = ""

    def describe(self) -> str:
        return f"{self.unit} ({self.engine}{', ' + self.state if self.state else ''})"


def _exec_start(bus: SystemdBus, path: str) -> list[Any]:
    body = bus.call(path, "org.freedesktop.DBus.Properties", "Get", "ss", SERVICE, "ExecStart")
    value = body[0] if body else []
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        value = value[1]  # a variant: (signature, value)
    return list(value) if isinstance(value, list) else []


def _engine(bus: SystemdBus, path: str) -> str | None:
    """The engine of the unit at `path`; None also when systemd refuses to say (an error
    reply about that unit). A connection failure is raised (BusError without a name)."""
    try:
        return engine_of_exec_start(_exec_start(bus, path))
    except BusError as e:
        if e.name is None:
            raise
        return None


def _services(bus: SystemdBus) -> list[tuple[str, str, str]]:
    """Every service unit systemd has loaded, in any state: (name, state, object path)."""
    listed = bus.manager("ListUnitsByPatterns", "asas", [], ["*.service"])[0]
    return [(str(u[0]), f"{u[3]}/{u[4]}", str(u[6])) for u in listed if is_unit_name(str(u[0]))]


def inference_units(bus: SystemdBus) -> list[Found]:
    """The service units, in any state, whose ExecStart is an inference server."""
    found = []
    for name, state, path in _services(bus):
        engine = _engine(bus, path)
        if engine is not None:
            found.append(Found(name, engine, state))
    return sorted(found, key=lambda f: f.unit)


_UNKNOWN: Final = object()


class InferenceServers:
    """The entries `advisor watch` keeps without `--unit`: those about inference servers'
    units (PID 1's `UNIT=` messages and the units' own lines: the unit `entry_event` put in
    the payload) and the kernel's lines.

    What each service unit is, is kept by name. Every `every_s` the loaded services are
    listed (one call) and the new names looked up (one property read each); every
    `full_every_s`, and right after PID 1 logs a reload, every loaded one is read again (a
    reload is what changes an ExecStart). An entry about a service not known yet is looked
    up (loading the unit, as `systemctl status` does) before it is kept or dropped."""

    name: Final = "<inference servers>+kernel"

    def __init__(
        self,
        bus: SystemdBus,
        *,
        every_s: float = 5.0,
        full_every_s: float = 60.0,
        on_change: Callable[[list[Found]], None] | None = None,
        on_error: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.bus = bus
        self.every_s = every_s
        self.full_every_s = full_every_s
        self.on_change = on_change
        self.on_error = on_error
        self._clock = clock
        self._engines: dict[str, str | None] = {}
        self._states: dict[str, str] = {}
        self._next = 0.0
        self._next_full = 0.0
        self._failing = False
        self._retry_at = 0.0
        self._reported: list[Found] = []
        self._logged: set[str] = set()  # units found by their log lines, not their command

    @property
    def watched(self) -> list[Found]:
        return sorted(
            (
                Found(u, e, self._states.get(u, ""))
                for u, e in self._engines.items()
                if e is not None
            ),
            key=lambda f: f.unit,
        )

    def keep(self, event: Mapping[str, Any]) -> bool:
        payload = event["payload"]
        if payload.get("transport") == "kernel":
            return True
        if payload.get("pid") == 1 and str(payload.get("message", "")).startswith("Reloading"):
            self._next = self._next_full = 0.0  # daemon-reload: ExecStart may have changed
            self.tick()
        unit = payload.get("unit")
        if not isinstance(unit, str):
            return False
        engine = self._engines.get(unit, _UNKNOWN)
        if engine is _UNKNOWN:
            engine = self._look_up(unit)
        if engine is None and unit.endswith(".service"):
            engine = self._from_line(unit, payload.get("message"))
        return engine is not None

    def _from_line(self, unit: str, message: object) -> str | None:
        """A unit whose command named no engine, logging an engine's own line: an engine."""
        if not isinstance(message, str):
            return None
        engine = engine_of_line(message)
        if engine is not None:
            self._remember(unit, engine)
            self._logged.add(unit)
            self._changed()
        return engine

    def tick(self) -> None:
        """Re-discover when it is time (called often; cheap when it is not)."""
        now = self._clock()
        if now < self._next:
            return
        self._next = now + self.every_s
        full = now >= self._next_full
        if full:
            self._next_full = now + self.full_every_s
        self.refresh(full=full)

    def refresh(self, *, full: bool = True) -> None:
        """List the loaded services and read the ExecStart of the new ones (`full`: of all;
        the names no longer loaded are then forgotten, and looked up again if they log)."""
        try:
            services = _services(self.bus)
            known = {} if full else dict(self._engines)
            for name, _, path in services:
                if name not in known:
                    known[name] = _engine(self.bus, path)
                if known[name] is None and name in self._logged:
                    known[name] = self._engines.get(name)  # its log lines said so
        except BusError as e:
            self._failed(e)
            return
        self._recovered()
        self._engines = known
        self._states = {name: state for name, state, _ in services}
        self._changed()

    def _look_up(self, unit: str) -> str | None:
        if not unit.endswith(".service") or not is_unit_name(unit):
            self._remember(unit, None)
            return None
        if self._failing and self._clock() < self._retry_at:
            return None  # systemd did not answer a moment ago: not asked for every entry
        try:
            engine = _engine(self.bus, self.bus.unit_path(unit))
        except BusError as e:
            self._failed(e)
            return None
        self._recovered()
        self._remember(unit, engine)
        if engine is not None:
            self._changed()
        return engine

    def _remember(self, unit: str, engine: str | None) -> None:
        if len(self._engines) >= 100_000:  # bounded, whatever the journal names
            self._engines.clear()
        self._engines[unit] = engine

    def _changed(self) -> None:
        watched = self.watched
        if [(f.unit, f.engine) for f in watched] != [(f.unit, f.engine) for f in self._reported]:
            self._reported = watched
            if self.on_change is not None:
                self.on_change(watched)

    def _failed(self, error: BaseException) -> None:
        self._retry_at = self._clock() + self.every_s
        if not self._failing and self.on_error is not None:
            self.on_error(f"systemd did not answer ({error}); retrying every {self.every_s:g} s")
        self._failing = True

    def _recovered(self) -> None:
        self._failing = False
