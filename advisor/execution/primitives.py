"""What every backend offers the action handlers (`advisor.execution.handlers`): a few
primitives on a unit, each implemented once per backend, and the values they pass around.

A step is carried out by its kind's handler in terms of these; a backend knows nothing of
action kinds. A change to a unit's configuration is a `ConfigEdit`: a manager that keeps the
configuration in drop-in files (systemd) plans the file first (`plan_config`, so the executor
can record it), then writes it, reloads and reads back what it loaded (`apply_config`); one
that keeps it in memory (the sim) makes the edit's call on itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from advisor.core.errors import AdvisorError, InputError
from advisor.core.steps import ActionStep
from advisor.core.units import is_unit_name, not_a_server
from advisor.execution.state import UnitSnapshot
from advisor.planning.bounds import check_step


class BackendError(AdvisorError):
    """An action could not be carried out."""


@dataclass(frozen=True)
class FileChange:
    """A drop-in a step writes (`text`), or removes (`text` None), and what it replaces."""

    path: Path
    text: str | None
    previous: str | None
    had_previous: bool


@dataclass(frozen=True)
class Expected:
    """A value a plan set, that the engine of the unit's next invocation must receive."""

    flag: str
    value: str
    where: str = ""  # the step that set it, for the message when it did not arrive


@dataclass(frozen=True)
class Subject:
    """The incident a `notify` step tells about, as its alert is labelled: the incident,
    its service and its failure label (None where the store does not know it)."""

    incident_id: str
    host: str
    unit: str | None = None
    label: str | None = None
    started_us: int | None = None
    fix: str | None = None  # the plan's headline fix (`headline_fix`), as people read it


@dataclass(frozen=True)
class Outcome:
    detail: str
    after: UnitSnapshot | None = None


class UnitManager(Protocol):
    """The calls an in-memory unit manager (the simulated node) takes for a configuration
    change."""

    def set_flag(self, unit: str, flag: str, value: str | int | float | bool | None) -> object: ...
    def set_unit_option(self, unit: str, option: str, value: str | float | int) -> object: ...
    def hold_restarts(self, unit: str) -> object: ...


@dataclass(frozen=True)
class ConfigEdit:
    """One change to a unit's configuration, in both forms a manager may need.

    `dropin`: the file's name in UNIT.d/; `text(path, current, before)`: its new text from
    what the file says now (None: no such file) and the unit as loaded; `loaded(after)`: what
    is wrong with what the manager loaded after the reload (None: as intended);
    `in_memory(manager, unit)`: the same change on an in-memory manager, in words. `stops`:
    the change takes effect with the unit stopped (a hold), so it is stopped once in place."""

    dropin: str
    text: Callable[[Path, str | None, UnitSnapshot], str]
    loaded: Callable[[UnitSnapshot], str | None]
    in_memory: Callable[[UnitManager, str], str]
    stops: bool = False


class Primitives(Protocol):
    """The operations a backend implements once; the handlers compose them."""

    def observe(self, unit: str) -> UnitSnapshot: ...

    def stop_unit(self, unit: str) -> Outcome:
        """Stop the unit and watch it stop (no process left); at once if already stopped."""

    def kill_unit(self, unit: str, pid: int | None) -> Outcome:
        """SIGKILL every process of the unit — with `pid`, only while that PID is still the
        unit's (a backend that cannot tell whose a PID is kills the unit's processes)."""

    def reset_failed(self, unit: str) -> Outcome: ...

    def restart_unit(
        self, unit: str, ready_bound_s: float | None, expect: Sequence[Expected] = ()
    ) -> Outcome:
        """Restart; done when the new invocation says it is ready within the bound (None:
        the backend's own) and its engine received every `expect`ed value (a backend that
        cannot look at the engine says so)."""

    def start_unit(self, unit: str) -> Outcome:
        """Start a unit advisor stopped, under its own Restart= (no readiness wait)."""

    def lift_hold(self, unit: str) -> str | None:
        """Remove advisor's hold before a start, in words; None when there was none to
        remove (or the start itself lifts it)."""

    def wait_gpu_free(self, unit: str, gpus: tuple[int, ...] | None, bound_s: float) -> Outcome:
        """Poll until the unit's GPU memory is free and stable; BackendError at the bound."""

    def notify(self, message: str, subject: Subject | None = None) -> Outcome:
        """Tell every `[notify]` target; `subject`: the incident it is about."""

    def plan_config(
        self, unit: str, before: UnitSnapshot | None, edit: ConfigEdit
    ) -> FileChange | None:
        """The file `edit` will write, nothing written yet; None where no file is kept."""

    def apply_config(self, unit: str, edit: ConfigEdit, change: FileChange | None) -> Outcome:
        """Make the change, reload, read back; undone (BackendError) if not loaded as meant."""


def unit_of(step: ActionStep) -> str:
    if step.unit is None:
        raise InputError(f"{step.kind} needs a unit and this action has none")
    if not is_unit_name(step.unit):
        raise InputError(f"{step.unit[:80]!r} is not a systemd unit name")
    refusal = not_a_server(step.unit)
    if refusal is not None:
        raise InputError(refusal)
    return step.unit


def acted_on(step: ActionStep) -> str:
    """The unit a step (not a notify) acts on, after the checks every backend makes."""
    check_step(step)
    return unit_of(step)
