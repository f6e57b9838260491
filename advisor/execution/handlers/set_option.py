"""`set_unit_option`: one unit option (TimeoutStopSec=, KillMode=, Restart=…) set in advisor's
drop-in, read back from what systemd loaded. Only a change that changes something runs (a
shorter TimeoutStopSec= than the unit's real one, another KillMode=…); otherwise skipped.
"""

from __future__ import annotations

from pathlib import Path

from advisor.core.kinds import SET_UNIT_OPTION
from advisor.core.steps import ActionStep
from advisor.execution.dropins import ADVISOR_DROPIN, advisor_dropin
from advisor.execution.handlers.base import RUN, Context, Verdict
from advisor.execution.handlers.config import ConfigHandler
from advisor.execution.primitives import ConfigEdit, UnitManager
from advisor.execution.state import INFINITY_US, UnitSnapshot
from advisor.planning.bounds import timeout_seconds


class SetUnitOption(ConfigHandler):
    kind = SET_UNIT_OPTION

    def guard(self, step: ActionStep, now: UnitSnapshot, ctx: Context) -> Verdict:
        value = str(step.value)
        if step.option == "TimeoutStopSec":
            wanted = timeout_seconds(value)
            real = now.timeout_stop_s
            if wanted is not None and real is not None and real <= wanted:
                return Verdict(
                    "skip", f"TimeoutStopSec is already {real:g} s, no longer than {value}"
                )
            if wanted is None and now.timeout_stop_us >= INFINITY_US:
                return Verdict("skip", "TimeoutStopSec is already infinity")
        elif step.option == "KillMode" and now.kill_mode == value:
            return Verdict("skip", f"KillMode is already {value}")
        elif step.option == "Restart" and now.restart == value:
            return Verdict("skip", f"Restart is already {value}")
        return RUN

    def edit(self, step: ActionStep, unit: str) -> ConfigEdit:
        option, value = step.option, str(step.value)
        assert option is not None

        def text(path: Path, current: str | None, before: UnitSnapshot) -> str:
            return advisor_dropin(path, current).with_option(option, value).render()

        def in_memory(manager: UnitManager, unit: str) -> str:
            manager.set_unit_option(unit, option, value)
            return f"{unit}: {option}={step.value}"

        return ConfigEdit(
            ADVISOR_DROPIN, text, lambda after: _loaded(option, value, after), in_memory
        )

    def describe(self, step: ActionStep) -> str:
        return f"set {step.option}={step.value} on {step.unit or 'this host'}"


def _loaded(option: str, expected: str, after: UnitSnapshot) -> str | None:
    """What is wrong with the option as systemd loaded it; None when it is `expected`."""
    if option == "TimeoutStopSec":
        seconds = timeout_seconds(expected)
        real = after.timeout_stop_s
        if seconds != real and not (
            seconds is not None and real is not None and abs(seconds - real) < 1e-6
        ):
            return f"TimeoutStopUSec={after.timeout_stop_us}"
        return None
    real_value = {"KillMode": after.kill_mode, "Restart": after.restart}.get(option, expected)
    return None if real_value == expected else f"{option}={real_value}"
