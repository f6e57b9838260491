"""Safe floors and ceilings for every value a plan can set, whatever a log or a policy says.

A log line is hostile data: a stated `max_num_seqs: -5`, or "1 prefill tokens", must never
turn into `--max-num-seqs 1` or `--max-batch-prefill-tokens 0`. The recommender proposes only
values inside these bounds, and every backend checks them again before it acts — so
`remediate --yes` and auto mode are held to them as much as a policy with no bounds at all.
A flag's range is its engine's (the registry, `advisor.core.engines`); a unit option's is
here.
"""

from __future__ import annotations

import re
from typing import Final

from advisor.core.engines import FLAG_BOUNDS
from advisor.core.engines.model import Range
from advisor.core.errors import InputError
from advisor.core.kinds import SET_FLAG, SET_UNIT_OPTION
from advisor.core.steps import ActionStep

__all__ = [
    "TIMEOUT_STOP_BOUNDS_S",
    "check_flag",
    "check_option",
    "check_step",
    "check_value",
    "in_bounds",
    "timeout_seconds",
]

TIMEOUT_STOP_BOUNDS_S: Final = Range(5, 3600)
_FLAG = re.compile(r"^--[a-z0-9][a-z0-9-]{0,60}$")
_VALUE = re.compile(r"^[A-Za-z0-9._:/+-]{1,200}$")
_OPTION_VALUES: Final = {
    "TimeoutStopSec": re.compile(r"^(?:infinity|\d{1,6}(?:ms|s|min|h)?)$"),
    "KillMode": re.compile(r"^(?:control-group|mixed|process)$"),
    "Restart": re.compile(r"^(?:no|on-failure|on-abnormal|always|on-abort|on-watchdog)$"),
    "RestartSec": re.compile(r"^\d{1,6}(?:ms|s|min)?$"),
}


def check_flag(flag: str, value: str) -> None:
    """Only a long option name and a plain value (a number, a name) may go into ExecStart."""
    if not _FLAG.match(flag):
        raise InputError(f"flag {flag[:80]!r} is not a long option name")
    if not _VALUE.match(value):
        raise InputError(f"value {value[:80]!r} for {flag} is not a plain value")


def check_option(option: str, value: str) -> None:
    pattern = _OPTION_VALUES.get(option)
    if pattern is None:
        raise InputError(
            f"unit option {option[:80]!r} is not one advisor sets ({', '.join(_OPTION_VALUES)})"
        )
    if not pattern.match(value):
        raise InputError(f"{option}={value[:80]!r} is not a value systemd takes")


def check_value(flag: str, value: object) -> None:
    """InputError unless `value` is a number inside `flag`'s safe range."""
    bound = FLAG_BOUNDS.get(flag)
    if bound is None:
        raise InputError(f"{flag} is not a flag advisor changes ({', '.join(FLAG_BOUNDS)})")
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or (bound.integer and not float(value).is_integer())
    ):
        raise InputError(f"{flag} {value!r}: not {'an integer' if bound.integer else 'a number'}")
    if not bound.low <= value <= bound.high:
        raise InputError(f"{flag} {value}: outside the safe range {bound.low:g}–{bound.high:g}")


def in_bounds(flag: str, value: object) -> bool:
    try:
        check_value(flag, value)
    except InputError:
        return False
    return True


def timeout_seconds(value: str) -> float | None:
    """TimeoutStopSec= as advisor writes it (`30s`, `2min`, `500ms`, `infinity`) in seconds."""
    if value == "infinity":
        return None
    for suffix, scale in (("ms", 0.001), ("min", 60.0), ("h", 3600.0), ("s", 1.0)):
        if value.endswith(suffix):
            return float(value[: -len(suffix)]) * scale
    return float(value)


def check_step(step: ActionStep) -> None:
    """The checks every backend makes before a set_flag / set_unit_option takes effect."""
    if step.kind == SET_FLAG:
        if step.flag is None or step.value is None:
            raise InputError("set_flag needs a flag and a value")
        check_flag(step.flag, str(step.value))
        check_value(step.flag, step.value)
    elif step.kind == SET_UNIT_OPTION:
        if step.option is None or step.value is None:
            raise InputError("set_unit_option needs an option and a value")
        check_option(step.option, str(step.value))
        if step.option == "TimeoutStopSec":
            seconds = timeout_seconds(str(step.value))
            bound = TIMEOUT_STOP_BOUNDS_S
            if seconds is not None and not bound.low <= seconds <= bound.high:
                raise InputError(
                    f"TimeoutStopSec={step.value}: outside the safe range "
                    f"{bound.low:g}–{bound.high:g} s"
                )
