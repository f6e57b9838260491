"""From a diagnosis to a plan: an ordered list of typed actions, each with the numbers behind
it and what it should change.

Actions come from a closed vocabulary: nothing here is a shell string, and no
value read from a log is passed on without being checked — a unit name must be a systemd unit
name, a flag value is a number this module computed. `unknown`, and any label below
`ACT_BELOW`, gets `notify` only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from advisor.core.events import ActionStep
from advisor.core.units import is_unit_name
from advisor.planning.context import Holder, PlanContext, checked_facts
from advisor.planning.remedies import (
    DEFAULT_READY_S,
    DEFAULT_RELEASE_S,
    GIB,
    HARDENED_TIMEOUT_STOP,
    MIB,
    MIN_RELEASE_S,
    SAMPLER_BYTES_PER_ELEMENT,
    SAMPLER_MARGIN,
    Draft,
    held,
    wedged,
)
from advisor.planning.sizing import kv_cache, sampler

__all__ = [
    "ACT_BELOW",
    "DEFAULT_READY_S",
    "DEFAULT_RELEASE_S",
    "GIB",
    "HARDENED_TIMEOUT_STOP",
    "MIB",
    "MIN_RELEASE_S",
    "SAMPLER_BYTES_PER_ELEMENT",
    "SAMPLER_MARGIN",
    "Holder",
    "PlanContext",
    "checked_facts",
    "is_unit_name",
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
    alone, `corroborated` false) is reported, never acted on: `notify` only."""
    ctx = context or PlanContext()
    unit = ctx.unit if ctx.unit is not None and is_unit_name(ctx.unit) else None
    facts = checked_facts(facts)
    p = Draft(unit, invocation_id=ctx.invocation_id)
    if label == "healthy":
        return []
    refusal = _notify_only(label, confidence, corroborated, ctx.unit, unit)
    if refusal is not None:
        p.add("notify", refusal)
        return p.actions
    builder = _BUILDERS.get(label)
    if builder is None:
        p.add("notify", _ADVICE.get(label, f"{label}: no automatic remedy"))
        return p.actions
    builder(p, facts, ctx)
    p.actions = [_with_from_value(a, facts) for a in p.actions]
    if any(a.kind in ("set_flag", "restart") for a in p.actions) and not all(
        a.kind == "notify" for a in p.actions
    ):
        loop = facts.get("restart_count")
        why = (
            f"the unit is in a restart loop (restart counter {loop})"
            if loop
            else "Restart= may start the unit again at any moment"
        )
        p.actions.insert(
            0,
            ActionStep(
                kind="hold_restarts",
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
    if label == "unknown" or confidence < ACT_BELOW:
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


_FLAG_FACTS: Final = {
    "--max-num-seqs": "max_num_seqs",
    "--max-model-len": "max_model_len",
    "--context-length": "max_model_len",
    "--gpu-memory-utilization": "gpu_memory_utilization",
    "--tensor-parallel-size": "tensor_parallel_size",
    "--max-batch-prefill-tokens": "max_batch_prefill_tokens",
}


def _with_from_value(step: ActionStep, facts: Mapping[str, Any]) -> ActionStep:
    """A set_flag remembers the value it changes, as the log stated it: the executor calls
    the step stale if the unit has another value by then."""
    if step.kind != "set_flag" or step.flag not in _FLAG_FACTS:
        return step
    value = facts.get(_FLAG_FACTS[step.flag])
    return step if value is None else step.model_copy(update={"from_value": value})


_BUILDERS = {
    "sampler_warmup_oom": sampler,
    "kv_cache_oom": kv_cache,
    "wedged_stop": wedged,
    "gpu_memory_held": held,
}
_ADVICE: Final = {
    "weights_load_oom": "the weights do not fit at this parallelism: a larger "
    "--tensor-parallel-size or a quantised model",
    "cuda_graph_oom": "CUDA graph capture ran out of memory: lower --gpu-memory-utilization "
    "a little, or --enforce-eager",
    "runtime_oom": "out of memory while serving: lower --max-num-seqs or --max-num-batched-tokens",
    "nccl_error": "NCCL failed: check the interconnect and NCCL_* settings before restarting",
    "gpu_hardware_fault": "the GPU reported a hardware fault: drain the host and check the GPU "
    "(Xid, ECC) before restarting anything on it",
    "other_crash": "a crash with no automatic remedy: read the evidence",
}


def summary(actions: Sequence[ActionStep]) -> list[dict[str, Any]]:
    """Actions as the `actions` list of `classify --json`."""
    return [
        a.model_dump(exclude_none=True, exclude_defaults=True) | {"kind": a.kind, "why": a.why}
        for a in actions
    ]
