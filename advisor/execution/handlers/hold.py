"""`hold_restarts`: no automatic restart while the plan changes the unit — advisor's hold
drop-in (Restart=no), read back, then the unit stopped. The plan's restart lifts it.

Made for the failing unit: stale when the unit's current invocation came up ready since
(someone fixed it); skipped when the hold is in place and the unit stopped.
"""

from __future__ import annotations

from pathlib import Path

from advisor.core.kinds import HOLD_RESTARTS
from advisor.core.steps import ActionStep
from advisor.execution.dropins import HOLD_DROPIN, hold_text
from advisor.execution.handlers.base import RUN, Context, Verdict, inv, moved
from advisor.execution.handlers.config import ConfigHandler
from advisor.execution.primitives import ConfigEdit, UnitManager
from advisor.execution.state import UnitSnapshot


def _text(path: Path, current: str | None, before: UnitSnapshot) -> str:
    return hold_text()


def _loaded(after: UnitSnapshot) -> str | None:
    if after.restart == "no":
        return None
    return f"Restart={after.restart} (a later drop-in overrides the hold)"


def _in_memory(manager: UnitManager, unit: str) -> str:
    manager.hold_restarts(unit)
    return f"restarts of {unit} held"


class HoldRestarts(ConfigHandler):
    kind = HOLD_RESTARTS

    def guard(self, step: ActionStep, now: UnitSnapshot, ctx: Context) -> Verdict:
        if now.invocation_id and now.invocation_id in ctx.ready_invocations:
            return Verdict(
                "stale",
                f"invocation {inv(now.invocation_id)} came up ready after the plan was made",
            )
        if now.held and now.stopped:
            return Verdict("skip", f"already held and stopped ({now.describe()})")
        return moved(now, ctx) or RUN

    def edit(self, step: ActionStep, unit: str) -> ConfigEdit:
        return ConfigEdit(HOLD_DROPIN, _text, _loaded, _in_memory, stops=True)

    def describe(self, step: ActionStep) -> str:
        return f"hold restarts of {step.unit or 'this host'}"
