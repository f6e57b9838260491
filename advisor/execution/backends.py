"""Where actions take effect, behind one small interface: `observe` a unit, `prepare` the file a
step will write (nothing done yet, so the executor can record it first), `perform` the step,
`restore` a file a step changed. The systemd backend (`advisor.execution.systemd`) talks to
systemd's D-Bus API; the sim backend (`advisor.sim.backend`) drives the simulated node;
`DryRunBackend` does nothing and says what it would do.

Every backend checks the values again before it acts (`dropins.check_flag` / `check_option`,
`advisor.planning.bounds`), because a backend is the last place before the operating system.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from advisor.core.errors import AdvisorError, InputError
from advisor.core.events import ActionStep
from advisor.core.units import is_unit_name
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
class Outcome:
    detail: str
    after: UnitSnapshot | None = None


class Backend(Protocol):
    name: str

    @property
    def host(self) -> str | None:
        """The host whose plans this backend may carry out (None: any, it changes nothing)."""

    def observe(self, unit: str) -> UnitSnapshot | None: ...
    def prepare(self, step: ActionStep, before: UnitSnapshot | None) -> FileChange | None: ...
    def perform(self, step: ActionStep, before: UnitSnapshot | None,
                change: FileChange | None) -> Outcome: ...
    def restore(self, change: FileChange) -> Outcome: ...
    def release_hold(self, unit: str) -> str | None: ...


def unit_of(step: ActionStep) -> str:
    if step.unit is None:
        raise InputError(f"{step.kind} needs a unit and this action has none")
    if not is_unit_name(step.unit):
        raise InputError(f"{step.unit[:80]!r} is not a systemd unit name")
    return step.unit


def acted_on(step: ActionStep) -> str:
    """The unit a step (not a notify) acts on, after the checks every backend makes."""
    check_step(step)
    return unit_of(step)


def describe(step: ActionStep) -> str:
    """What a step does, in a few words (`set --max-num-seqs 256 on U`)."""
    unit = step.unit or "this host"
    if step.kind == "set_flag":
        return f"set {step.flag} {step.value} on {unit}"
    if step.kind == "set_unit_option":
        return f"set {step.option}={step.value} on {unit}"
    if step.kind == "wait_gpu_free":
        return f"wait up to {step.seconds or 30:.0f} s for {unit}'s GPU memory"
    if step.kind == "hold_restarts":
        return f"hold restarts of {unit}"
    if step.kind == "notify":
        return f"notify: {step.why}"
    return f"{step.kind.replace('_', '-')} {unit}"


@dataclass
class DryRunBackend:
    """Does nothing, records what it would have done: tests, and previews."""

    done: list[str] = field(default_factory=list)
    name: str = "dry-run"
    host: str | None = None

    def observe(self, unit: str) -> UnitSnapshot | None:
        return None

    def release_hold(self, unit: str) -> str | None:
        return None

    def prepare(self, step: ActionStep, before: UnitSnapshot | None) -> FileChange | None:
        check_step(step)
        return None

    def perform(self, step: ActionStep, before: UnitSnapshot | None,
                change: FileChange | None) -> Outcome:
        if step.kind != "notify":
            unit_of(step)
        what = describe(step)
        self.done.append(what)
        return Outcome(f"dry run: would {what}")

    def restore(self, change: FileChange) -> Outcome:
        self.done.append(f"restore {change.path}")
        return Outcome(f"dry run: would restore {change.path}")
