"""`set_flag`: one engine flag set where its value lives (`advisor.execution.locate`) — a word
of ExecStart= or of its shell string (advisor's drop-in replaces the command), a variable the
unit provides (advisor's environment file overrides it), or added where the engine's
arguments end — and read back from what systemd loaded.

Made for the command the log showed: skipped when the flag already has the value; stale when
it has another value than the plan was made for (someone changed it). Refused, with nothing
written, when the value lives where advisor does not write (a wrapper script, a file it
sources…): the refusal names the file, the setting and the value to set by hand.
"""

from __future__ import annotations

from pathlib import Path

from advisor.core.kinds import SET_FLAG
from advisor.core.steps import ActionStep
from advisor.execution.dropins import (
    ADVISOR_DROPIN,
    ADVISOR_ENV,
    HOLD_DROPIN,
    LEGACY_DROPINS,
    advisor_dropin,
)
from advisor.execution.handlers.base import RUN, Context, Verdict, moved
from advisor.execution.handlers.config import ConfigHandler
from advisor.execution.locate import Refusal, Resolution, resolve, same_value
from advisor.execution.primitives import BackendError, ConfigEdit, UnitManager
from advisor.execution.specifiers import exec_change, raw_exec
from advisor.execution.state import UnitSnapshot


class SetFlag(ConfigHandler):
    kind = SET_FLAG

    def guard(self, step: ActionStep, now: UnitSnapshot, ctx: Context) -> Verdict:
        return moved(now, ctx) or _judge(step, now)

    def edit(self, step: ActionStep, unit: str) -> ConfigEdit:
        flag, value = step.flag, str(step.value)
        assert flag is not None

        def text(path: Path, current: str | None, before: UnitSnapshot) -> str:
            dropin = advisor_dropin(path, current)
            written = raw_exec(before)  # ExecStart as written, when it has specifiers
            found = resolve(written.as_unit(before) if written else before, flag, value)
            if found.refused is not None:
                raise Refusal(refusal(step, found))
            if not found.changes:
                raise BackendError(f"{unit}: setting {flag} {value} would change nothing")
            if found.argv is not None:
                command, line = exec_change(before, found.argv, written)
                dropin = dropin.with_exec_start(command, line)
            if found.variables:
                dropin = dropin.with_variables(found.variables, str(path.with_name(ADVISOR_ENV)))
            return dropin.render()

        def loaded(after: UnitSnapshot) -> str | None:
            try:
                now = resolve(after, flag)
            except Refusal as e:
                return str(e)
            if not same_value(now.current, value):
                later = _after_advisor(after)
                also = (
                    f" (a drop-in that sorts after advisor's: {', '.join(later)})" if later else ""
                )
                return f"{flag} {now.current} in force, set in {now.where}{also}"
            return None

        def in_memory(manager: UnitManager, unit: str) -> str:
            manager.set_flag(unit, flag, value)
            return f"{unit} will start with {flag} {step.value}"

        return ConfigEdit(ADVISOR_DROPIN, text, loaded, in_memory)

    def describe(self, step: ActionStep) -> str:
        return f"set {step.flag} {step.value} on {step.unit or 'this host'}"


def _after_advisor(unit: UnitSnapshot) -> list[str]:
    """The unit's drop-ins that sort after advisor's (its hold aside): they win over it."""
    return [
        p
        for p in unit.drop_in_paths
        if Path(p).name > ADVISOR_DROPIN and Path(p).name not in (HOLD_DROPIN, *LEGACY_DROPINS)
    ]


def refusal(step: ActionStep, found: Resolution) -> str:
    """Why advisor changes nothing, and what to change by hand: the place, the setting, the
    value and its arithmetic."""
    how = f" ({'; '.join(step.arithmetic)})" if step.arithmetic else ""
    return (
        f"{found.unit} runs {found.runs}; {found.refused}: nothing was changed. Set "
        f"{step.flag} to {step.value} there{how}, then `systemctl restart {found.unit}`"
    )


def _judge(step: ActionStep, now: UnitSnapshot) -> Verdict:
    if step.flag is None:
        return RUN  # the backend refuses it with the reason
    try:
        found = resolve(now, step.flag)
    except Refusal:
        return RUN  # prepare refuses with the reason, before anything is written
    current = found.current
    if same_value(current, str(step.value)):
        return Verdict("skip", f"{step.flag} is already {step.value} ({found.where})")
    if (
        step.from_value is not None
        and current is not None
        and not same_value(current, str(step.from_value))
    ):
        return Verdict(
            "stale",
            f"{step.flag} is now {current} ({found.where}); the plan was made for "
            f"{step.from_value}",
        )
    return RUN
