"""The payloads of a plan and of carrying it out: the proposal of a step (`ActionStep`,
advisor.core.steps), the decision on it, and what the executor did.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field

from advisor.core.payloads import Payload
from advisor.core.steps import ActionStep


class ActionProposed(ActionStep, Payload):
    """A step of a plan for an incident, proposed. Nothing runs until an `action.approved`
    names it."""

    version: ClassVar[int] = 2
    type: Literal["action.proposed"] = "action.proposed"
    action_id: str
    plan_id: str
    step: int = Field(ge=0)
    incident_id: str | None = None
    host: str


class ActionApproved(Payload):
    type: Literal["action.approved"] = "action.approved"
    action_id: str
    by: str  # "human:<user>" or "policy:<file>"


class ActionRejected(Payload):
    type: Literal["action.rejected"] = "action.rejected"
    action_id: str
    by: str
    why: str


UnitStateValue = str | int | bool | None


class ActionStarted(Payload):
    """The executor begins a step. Appended before anything is done; a step runs only if this
    executor's `action.started` is the one stored (version 2: who, what it saw, and for a
    drop-in the file, the text it is about to write and the text it replaces)."""

    version: ClassVar[int] = 2
    type: Literal["action.started"] = "action.started"
    action_id: str
    backend: str
    executor: str | None = None
    before: dict[str, UnitStateValue] | None = None
    dropin: str | None = None
    written_text: str | None = None
    previous_text: str | None = None
    had_previous: bool | None = None


class ActionSucceeded(Payload):
    type: Literal["action.succeeded"] = "action.succeeded"
    version: ClassVar[int] = 2
    action_id: str
    detail: str
    # For set_flag / set_unit_option on systemd: the drop-in written and where its previous
    # content was kept (version 1: a copy's path; version 2 keeps the text in action.started).
    dropin: str | None = None
    previous: str | None = None
    after: dict[str, UnitStateValue] | None = None  # the unit as systemd showed it after


class ActionFailed(Payload):
    type: Literal["action.failed"] = "action.failed"
    version: ClassVar[int] = 2
    action_id: str
    error: str
    after: dict[str, UnitStateValue] | None = None


class ActionSkipped(Payload):
    """A step not run: it would change nothing (`stale` false: the plan goes on), or the unit is
    no longer in the state the plan was made for (`stale` true: the plan stops)."""

    type: Literal["action.skipped"] = "action.skipped"
    action_id: str
    why: str
    stale: bool = False
    after: dict[str, UnitStateValue] | None = None


class ActionRolledBack(Payload):
    type: Literal["action.rolled_back"] = "action.rolled_back"
    action_id: str
    detail: str


# Every payload about a step: what the planner, the decisions and the executor append.
ActionPayload = (
    ActionProposed
    | ActionApproved
    | ActionRejected
    | ActionStarted
    | ActionSucceeded
    | ActionFailed
    | ActionSkipped
    | ActionRolledBack
)


def step_from_spec(spec: Mapping[str, Any]) -> ActionStep:
    """The step a proposal's spec (the `actions` row's, or its event's) describes."""
    fields = ActionStep.model_fields
    return ActionStep.model_validate({k: v for k, v in spec.items() if k in fields})
