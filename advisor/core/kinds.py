"""The action kinds: the one place that knows the closed vocabulary of what advisor may do.

Each kind is one `KindSpec` in `KINDS`: what it does, whether it changes the unit (a policy's
cooldown counts it), whether it changes one of the unit's settings (what the unit was like
before is kept, a rollback can undo it, a restart checks the engine received it), whether it
acts on a unit at all, and how a person sees it. Its handler (`advisor/execution/handlers/`)
carries it out; docs/actions.md describes it. A new kind is one entry here plus its handler
(docs/extending.md). No other module spells a kind: they name the constants below or read
`KINDS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, Literal

__all__ = [
    "CHANGES_UNIT",
    "HOLD_RESTARTS",
    "KILL",
    "KINDS",
    "NOTIFY",
    "RESET_FAILED",
    "RESTART",
    "SETTING_KINDS",
    "SET_FLAG",
    "SET_UNIT_OPTION",
    "STOP",
    "WAIT_GPU_FREE",
    "ActionKind",
    "KindSpec",
]

STOP: Final = "stop"
KILL: Final = "kill"
WAIT_GPU_FREE: Final = "wait_gpu_free"
SET_FLAG: Final = "set_flag"
SET_UNIT_OPTION: Final = "set_unit_option"
RESTART: Final = "restart"
RESET_FAILED: Final = "reset_failed"
HOLD_RESTARTS: Final = "hold_restarts"
NOTIFY: Final = "notify"


@dataclass(frozen=True)
class KindSpec:
    """One action kind."""

    name: str
    does: str  # one line, as a person reads it
    changes_unit: bool = True  # a change to the unit (a policy's cooldown counts it)
    setting: bool = False  # changes a setting of the unit: kept as found, can be rolled back
    on_unit: bool = True  # acts on a unit (read before and after); notify need not


_SPECS: Final = (
    KindSpec(STOP, "stop a unit (another one, holding GPU memory)"),
    KindSpec(KILL, "SIGKILL the unit's whole control group"),
    KindSpec(WAIT_GPU_FREE, "wait, bounded, until the unit's GPUs have the memory free", False),
    KindSpec(SET_FLAG, "set an engine flag where the unit's value lives", setting=True),
    KindSpec(SET_UNIT_OPTION, "set a unit option in a drop-in", setting=True),
    KindSpec(RESTART, "restart the unit and wait until it is ready"),
    KindSpec(RESET_FAILED, "clear the unit's failed state and start-limit counter", False),
    KindSpec(HOLD_RESTARTS, "hold systemd's restarts while the plan runs"),
    KindSpec(NOTIFY, "tell a person; change nothing", False, on_unit=False),
)
KINDS: Final[Mapping[str, KindSpec]] = MappingProxyType({s.name: s for s in _SPECS})
CHANGES_UNIT: Final = frozenset(s.name for s in _SPECS if s.changes_unit)
SETTING_KINDS: Final = tuple(s.name for s in _SPECS if s.setting)

# The type of a kind, made from the registry (a type checker sees a plain string; pydantic
# validates against the registry's names).
if TYPE_CHECKING:
    ActionKind = str
else:
    ActionKind = Literal[tuple(KINDS)]
