"""`set_flag`: one server flag changed in the unit's ExecStart (advisor's drop-in rewrites the
command with the flag set), read back from what systemd loaded.

Made for the command the log showed: skipped when the flag already has the value; stale when
it has another value than the plan was made for (someone changed it).
"""

from __future__ import annotations

from pathlib import Path

from advisor.core.events import ActionStep
from advisor.execution.dropins import ADVISOR_DROPIN, advisor_dropin, flag_value, with_flag
from advisor.execution.handlers.base import RUN, Context, Verdict, moved
from advisor.execution.handlers.config import ConfigHandler
from advisor.execution.primitives import BackendError, ConfigEdit, UnitManager
from advisor.execution.state import ExecCommand, UnitSnapshot


class SetFlag(ConfigHandler):
    kind = "set_flag"

    def guard(self, step: ActionStep, now: UnitSnapshot, ctx: Context) -> Verdict:
        return moved(now, ctx) or _judge(step, now)

    def edit(self, step: ActionStep, unit: str) -> ConfigEdit:
        flag, value = step.flag, str(step.value)
        assert flag is not None

        def text(path: Path, current: str | None, before: UnitSnapshot) -> str:
            dropin = advisor_dropin(path, current)
            if len(before.exec_start) != 1:
                raise BackendError(
                    f"{unit} has {len(before.exec_start)} ExecStart= commands; "
                    "advisor changes a flag only in a unit with one"
                )
            command = before.exec_start[0]
            argv = with_flag(command.argv, flag, value)
            return dropin.with_exec_start(ExecCommand(command.path, argv, command.flags)).render()

        def loaded(after: UnitSnapshot) -> str | None:
            if len(after.exec_start) != 1:
                return f"{len(after.exec_start)} ExecStart= commands"
            real = flag_value(after.exec_start[0].argv, flag)
            if real != value:
                return f"{flag} {real} in ExecStart (another drop-in sorts after advisor's)"
            return None

        def in_memory(manager: UnitManager, unit: str) -> str:
            manager.set_flag(unit, flag, value)
            return f"{unit} will start with {flag} {step.value}"

        return ConfigEdit(ADVISOR_DROPIN, text, loaded, in_memory)

    def describe(self, step: ActionStep) -> str:
        return f"set {step.flag} {step.value} on {step.unit or 'this host'}"


def _judge(step: ActionStep, now: UnitSnapshot) -> Verdict:
    if len(now.exec_start) != 1 or step.flag is None:
        return RUN  # the backend refuses these with the reason
    current = flag_value(now.exec_start[0].argv, step.flag)
    if current == str(step.value):
        return Verdict("skip", f"{step.flag} is already {step.value}")
    if step.from_value is not None and current is not None and current != str(step.from_value):
        return Verdict(
            "stale", f"{step.flag} is now {current}; the plan was made for {step.from_value}"
        )
    return RUN
