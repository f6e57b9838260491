"""One handler per action kind, in a registry keyed by kind.

A handler (`base.Handler`) holds everything its kind needs — guard, prepare, perform, the
read-back of what it changed, description — written in terms of the primitives every
backend offers (`advisor.execution.primitives`). Backends know no action kinds; the guards
(`advisor.execution.guards`), the dry run and the previews dispatch through `handler_for`.

A new action kind is its entry in the registry of kinds (`advisor/core/kinds.py`) and its
handler here: a module of this package (found by `_discover`, not listed), plus a new
primitive if the kind needs one no backend offers yet (docs/extending.md).
`tests/execution/test_action_kinds.py` checks that the registry and the handlers match,
one to one.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, cast

from advisor.core.steps import ActionStep
from advisor.execution.handlers.base import Handler
from advisor.execution.primitives import (
    BackendError,
    Expected,
    FileChange,
    Outcome,
    Primitives,
    Subject,
    acted_on,
    unit_of,
)
from advisor.execution.state import UnitSnapshot
from advisor.planning.bounds import check_step

_NOT_HANDLERS = frozenset({"base", "config"})


def _discover() -> tuple[Handler, ...]:
    """Every handler of this package's modules (a new kind's module is found, not listed)."""
    found: list[Handler] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name in _NOT_HANDLERS:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        found += [
            cls()
            for cls in vars(module).values()
            if isinstance(cls, type)
            and issubclass(cls, Handler)
            and cls.__module__ == module.__name__
        ]
    return tuple(found)


ALL_HANDLERS: tuple[Handler, ...] = _discover()
HANDLERS: Mapping[str, Handler] = MappingProxyType({h.kind: h for h in ALL_HANDLERS})


def handler_for(kind: str) -> Handler:
    try:
        return HANDLERS[kind]
    except KeyError:
        raise BackendError(f"{kind!r}: not an action advisor takes") from None


def describe(step: ActionStep) -> str:
    """What a step does, in a few words (`set --max-num-seqs 256 on U`)."""
    return handler_for(step.kind).describe(step)


def prepare_step(m: Primitives, step: ActionStep, before: UnitSnapshot | None) -> FileChange | None:
    """The checks every backend makes, then the file the step will write (None: none)."""
    check_step(step)
    handler = handler_for(step.kind)
    if not handler.touches_unit:
        return None
    return handler.prepare(m, step, unit_of(step), before)


class _Expecting:
    """A backend's primitives whose restart also checks that the engine received
    `expect` (the values the plan's earlier steps set)."""

    def __init__(self, m: Primitives, expect: Sequence[Expected]) -> None:
        self._m = m
        self._expect = tuple(expect)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._m, name)

    def restart_unit(
        self, unit: str, ready_bound_s: float | None, expect: Sequence[Expected] = ()
    ) -> Outcome:
        return self._m.restart_unit(unit, ready_bound_s, (*self._expect, *expect))


class _Telling:
    """A backend's primitives whose notify tells about `subject` (the step's incident)."""

    def __init__(self, m: Primitives, subject: Subject) -> None:
        self._m = m
        self._subject = subject

    def __getattr__(self, name: str) -> Any:
        return getattr(self._m, name)

    def notify(self, message: str, subject: Subject | None = None) -> Outcome:
        return self._m.notify(message, subject or self._subject)


def perform_step(
    m: Primitives,
    step: ActionStep,
    change: FileChange | None,
    expect: Sequence[Expected] = (),
    subject: Subject | None = None,
) -> Outcome:
    """Carry out a step on a backend, after the checks every backend makes (`expect`: what
    the unit's engine must have received when a restart counts; `subject`: the incident a
    notice is about)."""
    handler = handler_for(step.kind)
    unit = acted_on(step) if handler.touches_unit else step.unit or ""
    on = cast(Primitives, _Expecting(m, expect)) if expect else m
    if subject is not None:
        on = cast(Primitives, _Telling(on, subject))
    return handler.perform(on, step, unit, change)


__all__ = [
    "ALL_HANDLERS",
    "HANDLERS",
    "Handler",
    "base",
    "describe",
    "handler_for",
    "perform_step",
    "prepare_step",
]
