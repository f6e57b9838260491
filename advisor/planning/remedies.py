"""The plan being drafted, and the remedies that stop, kill, wait for memory and restart."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from advisor.core.kinds import (
    KILL,
    NOTIFY,
    RESET_FAILED,
    RESTART,
    SET_FLAG,
    SET_UNIT_OPTION,
    STOP,
    WAIT_GPU_FREE,
    ActionKind,
)
from advisor.core.steps import ActionStep
from advisor.core.units import is_unit_name
from advisor.planning.bounds import in_bounds
from advisor.planning.context import PlanContext

SAMPLER_MARGIN: Final = 0.9  # use at most 90% of the memory the sampler can have
SAMPLER_BYTES_PER_ELEMENT: Final = 20  # float32 logits + sorted values + int64 indices + probs
DEFAULT_RELEASE_S: Final = 30.0  # memory not back 10–30 s after the processes exit is abnormal
DEFAULT_READY_S: Final = 900.0  # a large model can take many minutes to load and warm up
MIN_RELEASE_S: Final = 5.0  # a bound, not a sleep: polling ends as soon as memory is free
HARDENED_TIMEOUT_STOP: Final = "30s"
GIB: Final = 1024**3
MIB: Final = 1024**2


def fmt_gib(n: float) -> str:
    return f"{n / GIB:.2f} GiB"


def fmt_mib(n: float) -> str:
    return f"{n / MIB:.2f} MiB"


@dataclass
class Draft:
    """The actions of a plan so far, for one unit and run."""

    unit: str | None
    actions: list[ActionStep] = field(default_factory=list)

    invocation_id: str | None = None

    def add(self, kind: ActionKind, why: str, **fields: Any) -> None:
        if kind == SET_FLAG and not in_bounds(fields["flag"], fields["value"]):
            self.actions.append(
                ActionStep(
                    kind=NOTIFY,
                    unit=self.unit,
                    why=f"{why}; the computed {fields['flag']} {fields['value']} is outside the "
                    "safe range advisor sets, so nothing is changed: a person must decide",
                )
            )
            return
        self.actions.append(
            ActionStep(
                kind=kind, unit=self.unit, why=why, invocation_id=self.invocation_id, **fields
            )
        )


def release_bound(ctx: PlanContext) -> tuple[float, str]:
    if ctx.release_p95_s is not None:
        if ctx.release_p95_s < MIN_RELEASE_S:
            return MIN_RELEASE_S, (
                f"p95 of this host's past releases after a kill is "
                f"{ctx.release_p95_s:.1f} s; at least {MIN_RELEASE_S:.0f} s"
            )
        return ctx.release_p95_s, "p95 of this host's past releases after a kill"
    return DEFAULT_RELEASE_S, "no history on this host yet: the documented default"


def wait_released(p: Draft, ctx: PlanContext, why: str) -> None:
    """A `wait_gpu_free` step bounded by this host's release history (`release_bound`)."""
    seconds, source = release_bound(ctx)
    p.add(
        WAIT_GPU_FREE,
        why,
        seconds=seconds,
        gpus=ctx.gpus,
        arithmetic=(f"bound {seconds:.0f} s: {source}",),
        expected="the unit's GPUs back to their idle memory, stable for a few samples",
    )


def wait_then_restart(
    p: Draft, ctx: PlanContext, expected: str, why: str = "start the service with the new setting"
) -> None:
    wait_released(p, ctx, "the stopped run's GPU memory must be back before the next start")
    restart(p, ctx, why, expected)


def restart(p: Draft, ctx: PlanContext, why: str, expected: str) -> None:
    p.add(
        RESET_FAILED,
        "a restart loop counts against the unit's start limit "
        "(StartLimitBurst= starts in StartLimitIntervalSec=): clear it, or "
        "the restart is refused",
        expected="the unit's failed state and start-limit counter cleared",
    )
    ready = ctx.ready_bound_s or DEFAULT_READY_S
    source = (
        "three times this unit's slowest start to readiness so far"
        if ctx.ready_bound_s
        else "no ready start of this unit yet: the default"
    )
    p.add(
        RESTART,
        why,
        seconds=ready,
        expected=expected,
        arithmetic=(f"ready within {ready:.0f} s: {source}",),
    )


def wedged(p: Draft, facts: Mapping[str, Any], ctx: PlanContext) -> None:
    p.add(
        KILL,
        "the stop timed out: SIGKILL the unit's whole control group",
        expected="no process of the unit left",
    )
    wait_released(p, ctx, "the driver frees GPU memory some seconds after the processes go")
    p.add(
        SET_UNIT_OPTION,
        "a shorter stop timeout, if the unit's is longer: SIGKILL "
        "sooner next time (skipped when TimeoutStopSec is already "
        f"{HARDENED_TIMEOUT_STOP} or less)",
        option="TimeoutStopSec",
        value=HARDENED_TIMEOUT_STOP,
        expected="the next stop ends in 30 s",
    )
    p.add(
        SET_UNIT_OPTION,
        "signal every process of the unit, the workers too (skipped "
        "when KillMode is already control-group)",
        option="KillMode",
        value="control-group",
        expected="no orphaned worker keeps GPU memory",
    )


def held(p: Draft, facts: Mapping[str, Any], ctx: PlanContext) -> None:
    for holder in ctx.holders:
        used = f" ({fmt_gib(holder.used_bytes)})" if holder.used_bytes else ""
        if holder.unit is not None and is_unit_name(holder.unit) and holder.unit != p.unit:
            p.actions.append(
                ActionStep(
                    kind=STOP,
                    unit=holder.unit,
                    pid=holder.pid,
                    why=f"PID {holder.pid} of {holder.unit} holds GPU memory{used}",
                    expected="its memory is freed",
                )
            )
        elif holder.unit is not None and holder.unit == p.unit:
            p.add(
                KILL,
                f"PID {holder.pid}, left over from a previous run of this unit, "
                f"holds GPU memory{used}",
                pid=holder.pid,
                expected="the leftover process is gone",
            )
        else:
            p.add(
                NOTIFY,
                f"PID {holder.pid} holds GPU memory{used} and belongs to no "
                "unit: a person must decide (it is never killed automatically)",
                pid=holder.pid,
            )
    if not ctx.holders:
        p.add(
            NOTIFY,
            "GPU memory was held by another process at start; GPU samples with "
            "the process list would name it",
        )
        return
    p.add(
        WAIT_GPU_FREE,
        "let the driver release the memory",
        seconds=ctx.release_p95_s or DEFAULT_RELEASE_S,
        gpus=ctx.gpus,
        expected="memory free and stable",
    )
    restart(p, ctx, "start the service again", "enough free memory at start")
