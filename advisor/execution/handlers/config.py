"""The handlers that change a unit's configuration: each says what its `ConfigEdit` is; the
backend plans it (the drop-in, recorded before anything is written) and applies it (written,
reloaded, read back)."""

from __future__ import annotations

from advisor.core.steps import ActionStep
from advisor.execution.handlers.base import Handler
from advisor.execution.primitives import ConfigEdit, FileChange, Outcome, Primitives
from advisor.execution.state import UnitSnapshot


class ConfigHandler(Handler):
    def edit(self, step: ActionStep, unit: str) -> ConfigEdit:
        raise NotImplementedError

    def prepare(
        self, m: Primitives, step: ActionStep, unit: str, before: UnitSnapshot | None
    ) -> FileChange | None:
        return m.plan_config(unit, before, self.edit(step, unit))

    def perform(
        self, m: Primitives, step: ActionStep, unit: str, change: FileChange | None
    ) -> Outcome:
        return m.apply_config(unit, self.edit(step, unit), change)
