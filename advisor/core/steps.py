"""A step of a plan, `ActionStep`, as `recommend` computes it: a module of its own, apart from
the event payloads (advisor.core.actions), so that `classify`, which plans but stores nothing,
does not build the payload models when it starts (docs/speed.md, "Start-up").
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from advisor.core.kinds import ActionKind


class ActionStep(BaseModel):
    """One step of a plan, as `recommend` computes it, with the numbers behind it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: ActionKind
    unit: str | None = None
    flag: str | None = None
    value: int | float | str | None = None
    option: str | None = None
    seconds: float | None = None
    pid: int | None = None
    why: str
    arithmetic: tuple[str, ...] = ()
    expected: str | None = None
    alternative: bool = False  # instead of the set_flag before it, not as well
    # What the plan was made for, so the executor can tell a stale step (version 2): the
    # invocation of the run it is about, and the value a set_flag changes (as the log said).
    invocation_id: str | None = None
    from_value: int | float | str | None = None
    gpus: tuple[int, ...] | None = None  # wait_gpu_free: the GPUs the unit used
