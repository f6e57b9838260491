"""Auto-remediation policy: which action kinds may run without a person, where, how often.

A policy file (TOML, validated on load) says, per unit pattern, which action kinds are allowed;
how many actions may run per hour; how long to wait after a change to a unit before the next
one (cooldown); lower (and upper) bounds on settings; how many plans for the same unit and
label are tried before giving up and notifying; and whether to only say what it would do
(dry_run). No kind runs unless a rule allows it for that unit.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from advisor.core.errors import InputError
from advisor.core.kinds import CHANGES_UNIT, ActionKind
from advisor.core.toml import load_toml


class Bound(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    min: float | None = None
    max: float | None = None


class Allow(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    units: str = Field(min_length=1, max_length=256)
    kinds: tuple[ActionKind, ...] = Field(min_length=1)


class Policy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    allow: tuple[Allow, ...] = ()
    max_actions_per_hour: int = Field(default=6, ge=0)
    cooldown_s: float = Field(default=300, ge=0)
    max_attempts: int = Field(default=3, ge=1)
    min_confidence: float = Field(default=0.9, gt=0, le=1)
    bounds: dict[str, Bound] = Field(default_factory=dict)
    dry_run: bool = False


def load_policy(path: Path) -> Policy:
    data = load_toml(path, "policy")
    try:
        return Policy.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(file)"
        raise InputError(f"{path}: field {where}: {err['msg']}") from e


@dataclass(frozen=True)
class History:
    """What already happened, as the decision needs it (times in µs)."""

    now_us: int
    approved_by_policy_us: Sequence[int]  # approvals by the policy, any unit
    last_change_on_unit_us: int | None  # last succeeded change on this unit
    plans_for_unit_and_label: int  # incidents of this unit with this label


@dataclass(frozen=True)
class Decision:
    allowed: bool
    why: str


def decide(
    policy: Policy, step: dict[str, Any], label: str, confidence: float, history: History
) -> Decision:
    """May the policy approve this proposed step now?"""
    unit = step.get("unit") or ""
    kind = step["kind"]
    if confidence < policy.min_confidence:
        return Decision(
            False, f"confidence {confidence:.2f} is below the policy's {policy.min_confidence:.2f}"
        )
    if not any(fnmatch.fnmatchcase(unit, a.units) and kind in a.kinds for a in policy.allow):
        return Decision(False, f"no rule allows {kind} on {unit or 'this host'}")
    if history.plans_for_unit_and_label > policy.max_attempts:
        return Decision(
            False,
            f"{history.plans_for_unit_and_label} incidents of {label} on "
            f"{unit}: more than max_attempts {policy.max_attempts}; a person "
            "must look",
        )
    hour_ago = history.now_us - 3_600_000_000
    recent = sum(1 for t in history.approved_by_policy_us if t >= hour_ago)
    if recent >= policy.max_actions_per_hour:
        return Decision(
            False,
            f"{recent} actions in the last hour: the policy allows {policy.max_actions_per_hour}",
        )
    last = history.last_change_on_unit_us
    if (
        kind in CHANGES_UNIT
        and last is not None
        and history.now_us - last < policy.cooldown_s * 1_000_000
    ):
        wait = policy.cooldown_s - (history.now_us - last) / 1_000_000
        return Decision(
            False,
            f"cooldown: {unit} changed {policy.cooldown_s - wait:.0f} s ago, {wait:.0f} s to go",
        )
    bound = policy.bounds.get(step.get("flag") or step.get("option") or "")
    value = step.get("value")
    if bound is not None and isinstance(value, int | float):
        if bound.min is not None and value < bound.min:
            return Decision(
                False, f"{step.get('flag')} {value} is below the policy's lower bound {bound.min:g}"
            )
        if bound.max is not None and value > bound.max:
            return Decision(
                False, f"{step.get('flag')} {value} is above the policy's upper bound {bound.max:g}"
            )
    return Decision(True, "allowed by the policy")
