"""From a diagnosis to a plan: an ordered list of typed actions, each with the numbers behind
it and what it should change.

Actions come from a closed vocabulary: nothing here is a shell string, and no
value read from a log is passed on without being checked — a unit name must be a systemd unit
name, a flag value is a number this module computed. `unknown`, and any label below
`ACT_BELOW`, gets `notify` only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from advisor.core.engines import DEFAULT_ENGINE, by_name
from advisor.core.engines.model import Engine
from advisor.core.kinds import HOLD_RESTARTS, NOTIFY, RESTART, SET_FLAG
from advisor.core.steps import ActionStep
from advisor.core.taxonomy import HEALTHY, TAXONOMY, UNKNOWN
from advisor.core.units import is_unit_name, not_a_server
from advisor.planning.context import PlanContext, checked_facts
from advisor.planning.engine_remedies import llama_context, sglang_pool, tgi_prefill
from advisor.planning.remedies import (
    Draft,
    held,
    wait_then_restart,
    wedged,
)
from advisor.planning.sizing import (
    kv_context,
    kv_memory_fraction,
    kv_parallel,
    kv_profile_batch,
    kv_suggested,
    sampler,
)

__all__ = [
    "ACT_BELOW",
    "REMEDIES",
    "UNIT_REMEDIES",
    "advice",
    "plan",
    "summary",
]

ACT_BELOW: Final = 0.7  # less sure than this: tell a person, change nothing


def plan(
    label: str,
    confidence: float,
    facts: Mapping[str, Any],
    context: PlanContext | None = None,
    *,
    corroborated: bool = True,
) -> list[ActionStep]:
    """The plan for one diagnosis. A label no rule's evidence agrees with (the learned model's
    alone, `corroborated` false) is reported, never acted on: `notify` only. A unit that is
    no server's (`not_a_server`) gets no plan at all."""
    ctx = context or PlanContext()
    if label == HEALTHY or (ctx.unit is not None and not_a_server(ctx.unit) is not None):
        return []  # nothing to do, or no server's unit to do it for (a scope, a socket)
    unit = ctx.unit if ctx.unit is not None and is_unit_name(ctx.unit) else None
    facts = checked_facts(facts)
    p = Draft(unit, invocation_id=ctx.invocation_id)
    refusal = _notify_only(label, confidence, corroborated, ctx.unit, unit)
    if refusal is not None:
        p.add(NOTIFY, refusal)
        return p.actions
    engine = by_name(facts.get("engine")) or DEFAULT_ENGINE
    spec = TAXONOMY.get(label)
    if spec is not None and spec.unit_remedy is not None:
        UNIT_REMEDIES[spec.unit_remedy](p, facts, ctx)
    else:
        _flag_remedies(p, label, facts, ctx, engine)
    p.actions = [_with_from_value(a, facts, engine) for a in p.actions]
    if any(a.kind in (SET_FLAG, RESTART) for a in p.actions) and not all(
        a.kind == NOTIFY for a in p.actions
    ):
        restarts = facts.get("restart_count")
        why = (  # systemd's count of its restarts, not a restart loop (docs/taxonomy.md)
            f"systemd has restarted the unit {restarts} time(s) (restart counter {restarts}) "
            "and Restart= may start it again at any moment"
            if restarts
            else "Restart= may start the unit again at any moment"
        )
        p.actions.insert(
            0,
            ActionStep(
                kind=HOLD_RESTARTS,
                unit=unit,
                why=f"{why}: hold it before changing anything, so nothing races the fix",
                expected="no new start until the plan restarts the "
                "unit (the restart step lifts the hold)",
                invocation_id=ctx.invocation_id,
            ),
        )
    return p.actions


def _notify_only(
    label: str, confidence: float, corroborated: bool, given: str | None, unit: str | None
) -> str | None:
    """Why nothing may be changed for this diagnosis (the notify text), or None."""
    if label == UNKNOWN or confidence < ACT_BELOW:
        return (
            f"{label} at confidence {confidence:.2f}: not enough to act on; "
            "a person should look at the evidence"
        )
    if not corroborated:
        return (
            f"{label} at confidence {confidence:.2f} is the learned model's judgement alone: "
            "no rule's evidence agrees, so nothing is changed; a person should confirm it "
            "from the evidence"
        )
    if given is not None and unit is None:
        return f"the unit name {given[:80]!r} is not a systemd unit name; nothing is changed"
    return None


def _with_from_value(step: ActionStep, facts: Mapping[str, Any], engine: Engine) -> ActionStep:
    """A set_flag remembers the value it changes, as the log stated it: the executor calls
    the step stale if the unit has another value by then."""
    flag = engine.flag(step.flag) if step.kind == SET_FLAG and step.flag else None
    value = facts.get(flag.fact) if flag is not None and flag.fact else None
    return step if value is None else step.model_copy(update={"from_value": value})


# Remedies that act on the unit whatever engine it runs: named by the taxonomy's entries.
UnitRemedy = Callable[[Draft, Mapping[str, Any], PlanContext], None]
UNIT_REMEDIES: Final[Mapping[str, UnitRemedy]] = {"wedged": wedged, "held": held}
# Remedies that set an engine's flags: named by the engines' registry entries.
Remedy = Callable[[Draft, Mapping[str, Any], PlanContext, Engine], None]
REMEDIES: Final[Mapping[str, Remedy]] = {
    "sampler": sampler,
    "kv_context": kv_context,
    "kv_profile_batch": kv_profile_batch,
    "kv_memory_fraction": kv_memory_fraction,
    "kv_parallel": kv_parallel,
    "kv_suggested": kv_suggested,
    "sglang_pool": sglang_pool,
    "tgi_prefill": tgi_prefill,
    "llama_context": llama_context,
}


def advice(label: str, engine: Engine) -> str:
    """What a person should do about `label`, in the engine's own flags."""
    said = engine.advice.get(label)
    if said is not None:
        return engine.say(said)
    spec = TAXONOMY.get(label)
    if spec is not None and spec.advice is not None:
        return spec.advice
    return f"{label}: no automatic remedy for {engine.title}"


def _flag_remedies(
    p: Draft, label: str, facts: Mapping[str, Any], ctx: PlanContext, engine: Engine
) -> None:
    """The engine's remedies for `label`; then the wait for memory and the restart, or, when
    none could compute a value, the engine's advice."""
    for name in engine.remedies.get(label, ()):
        REMEDIES[name](p, facts, ctx, engine)
    if any(a.kind == SET_FLAG and not a.alternative for a in p.actions):
        spec = TAXONOMY.get(label)
        wait_then_restart(p, ctx, (spec or TAXONOMY[UNKNOWN]).expected)
        return
    p.actions = [a for a in p.actions if a.kind != SET_FLAG]
    p.add(NOTIFY, advice(label, engine))


def summary(actions: Sequence[ActionStep]) -> list[dict[str, Any]]:
    """Actions as the `actions` list of `classify --json`."""
    return [
        a.model_dump(exclude_none=True, exclude_defaults=True) | {"kind": a.kind, "why": a.why}
        for a in actions
    ]
