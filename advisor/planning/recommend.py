"""From a diagnosis to a plan: an ordered list of typed actions, each with the numbers behind
it and what it should change.

Actions come from a closed vocabulary: nothing here is a shell string, and no
value read from a log is passed on without being checked — a unit name must be a systemd unit
name, a flag value is a number this module computed. `unknown`, and any label below
`ACT_BELOW`, gets `notify` only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from advisor.core.events import ActionKind, ActionStep
from advisor.core.units import is_unit_name
from advisor.planning.bounds import in_bounds

ACT_BELOW: Final = 0.7  # less sure than this: tell a person, change nothing
SAMPLER_MARGIN: Final = 0.9  # use at most 90% of the memory the sampler can have
SAMPLER_BYTES_PER_ELEMENT: Final = 20  # float32 logits + sorted values + int64 indices + probs
DEFAULT_RELEASE_S: Final = 30.0  # memory not back 10–30 s after the processes exit is abnormal
DEFAULT_READY_S: Final = 900.0  # a large model can take many minutes to load and warm up
MIN_RELEASE_S: Final = 5.0  # a bound, not a sleep: polling ends as soon as memory is free
HARDENED_TIMEOUT_STOP: Final = "30s"
GIB: Final = 1024**3
MIB: Final = 1024**2


@dataclass(frozen=True)
class Holder:
    """A process NVML says holds memory on the unit's GPUs."""

    pid: int
    used_bytes: int | None
    unit: str | None


@dataclass(frozen=True)
class PlanContext:
    """What the store knows beyond the log: samples, history, the host."""

    unit: str | None = None
    free_before_bytes: int | None = None  # free GPU memory just before the failing phase
    gpu_total_bytes: int | None = None
    release_p95_s: float | None = None  # p95 of this host's memory release after a kill
    holders: tuple[Holder, ...] = ()
    idle_gpus: int | None = None
    invocation_id: str | None = None  # the run the plan is about (journald's id)
    gpus: tuple[int, ...] | None = None  # the GPUs the unit's processes were seen on
    ready_bound_s: float | None = None  # how long a restart may take to be ready


# Numbers read from a log, range-checked where they are used: (low, high) for the facts a plan
# computes with. A value outside is treated as not stated.
_FACT_RANGES: Final = {
    "max_num_seqs": (1, 1 << 20),
    "dummy_requests": (1, 1 << 20),
    "vocab_size": (2, 1 << 24),
    "max_model_len": (16, 1 << 26),
    "kv_cache_tokens": (1, 1 << 34),
    "estimated_max_model_len": (1, 1 << 34),
    "max_batch_prefill_tokens": (1, 1 << 26),
    "tensor_parallel_size": (1, 1024),
    "gpu_memory_utilization": (0.01, 1.0),
    "tried_to_allocate_gib": (0.0, 1 << 20),
    "free_gib": (0.0, 1 << 20),
    "total_capacity_gib": (0.01, 1 << 20),
    "kv_cache_needed_gib": (0.0, 1 << 20),
    "available_kv_cache_gib": (-(1 << 20), 1 << 20),
    "restart_count": (0, 1 << 31),
}


def checked_facts(facts: Mapping[str, Any]) -> dict[str, Any]:
    """`facts` with every number outside its sane range (a negative count, an absurd size,
    a bool where a number belongs) replaced by None."""
    out = dict(facts)
    for key, (low, high) in _FACT_RANGES.items():
        value = out.get(key)
        if value is None:
            continue
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not (low <= value <= high)
            or value != value
        ):
            out[key] = None
    return out


def _gib(n: float) -> str:
    return f"{n / GIB:.2f} GiB"


def _mib(n: float) -> str:
    return f"{n / MIB:.2f} MiB"


@dataclass
class _Plan:
    unit: str | None
    actions: list[ActionStep] = field(default_factory=list)

    invocation_id: str | None = None

    def add(self, kind: ActionKind, why: str, **fields: Any) -> None:
        if kind == "set_flag" and not in_bounds(fields["flag"], fields["value"]):
            self.actions.append(
                ActionStep(
                    kind="notify",
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


def plan(
    label: str, confidence: float, facts: Mapping[str, Any], context: PlanContext | None = None
) -> list[ActionStep]:
    """The plan for one diagnosis."""
    ctx = context or PlanContext()
    unit = ctx.unit if ctx.unit is not None and is_unit_name(ctx.unit) else None
    facts = checked_facts(facts)
    p = _Plan(unit, invocation_id=ctx.invocation_id)
    if label == "healthy":
        return []
    if label == "unknown" or confidence < ACT_BELOW:
        p.add(
            "notify",
            f"{label} at confidence {confidence:.2f}: not enough to act on; "
            "a person should look at the evidence",
        )
        return p.actions
    if ctx.unit is not None and unit is None:
        p.add(
            "notify",
            f"the unit name {ctx.unit[:80]!r} is not a systemd unit name; nothing is changed",
        )
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


# ------------------------------------------------------------------ per label
def _sampler(p: _Plan, facts: Mapping[str, Any], ctx: PlanContext) -> None:
    seqs = facts.get("max_num_seqs") or facts.get("dummy_requests")
    if not seqs or seqs < 2:
        p.add(
            "notify",
            "sampler warm-up ran out of memory but the log states no usable "
            "max_num_seqs or dummy request count: lower --max-num-seqs by hand",
        )
        return
    tried = facts.get("tried_to_allocate_gib")
    free = facts.get("free_gib")
    total = facts.get("total_capacity_gib")
    lines: list[str] = []
    per_request = _sampler_per_request(facts, lines)
    available = ctx.free_before_bytes
    if available is not None:
        lines.append(f"free GPU memory before the warm-up (NVML samples): {_gib(available)}")
    elif free is not None and tried is not None:
        available = int((free + tried) * GIB)
        lines.append(
            f"free at the failure {free:.2f} GiB + the {tried:.2f} GiB it asked for "
            f"= {_gib(available)} the sampler could have had at most"
        )
    if per_request and available:
        fit = math.floor(SAMPLER_MARGIN * available / per_request)
        value = max(1, min(seqs - 1, 2 ** int(math.log2(fit)) if fit >= 1 else 1))
        need = per_request * seqs
        lines.append(f"needed for {seqs}: {seqs} × {_mib(per_request)} = {_gib(need)}")
        lines.append(
            f"fits: {SAMPLER_MARGIN:.0%} × {_gib(available)} / {_mib(per_request)} = "
            f"{fit} → {value} (a power of two, below {seqs})"
        )
        p.add(
            "set_flag",
            f"the sampler warm-up needs about {_gib(need)} for {seqs} dummy "
            f"requests and had about {_gib(available)}",
            flag="--max-num-seqs",
            value=value,
            arithmetic=tuple(lines),
            expected=f"warm-up needs about {_gib(per_request * value)}, which fits",
        )
        util = facts.get("gpu_memory_utilization")
        if util and total:
            missing = max(0.0, need - available) / GIB
            lowered = math.floor((util - missing / total) * 100) / 100
            if 0.5 <= lowered < util:
                p.add(
                    "set_flag",
                    f"keeps {seqs} concurrent sequences: gives the KV cache "
                    f"{missing:.2f} GiB less so the sampler fits",
                    flag="--gpu-memory-utilization",
                    value=lowered,
                    alternative=True,
                    arithmetic=(
                        f"missing: {_gib(need)} − {_gib(available)} = {missing:.2f} GiB",
                        f"{util} − {missing:.2f} / {total} GiB = {lowered:.2f}",
                    ),
                    expected="the same concurrency with a smaller KV cache",
                )
    else:
        value = max(1, seqs // 2)
        p.add(
            "set_flag",
            "the log does not give the memory figures to compute with: halve it",
            flag="--max-num-seqs",
            value=value,
            arithmetic=(f"{seqs} / 2 = {value}",),
            expected="half the warm-up memory",
        )
    _wait_then_restart(p, ctx, "the warm-up completes and the server says it is ready")


def _sampler_per_request(facts: Mapping[str, Any], lines: list[str]) -> float | None:
    """The sampler's memory for one request, from the vocab size or else the failed
    allocation; the arithmetic is added to `lines`."""
    vocab = facts.get("vocab_size")
    tried = facts.get("tried_to_allocate_gib")
    if vocab:
        per_request: float = SAMPLER_BYTES_PER_ELEMENT * vocab
        lines.append(
            f"per request: {vocab:,} logits × {SAMPLER_BYTES_PER_ELEMENT} B (float32 "
            f"logits, sorted values, int64 indices, probabilities) = "
            f"{_mib(per_request)}"
        )
        return per_request
    if tried and facts.get("dummy_requests"):
        dummies = facts["dummy_requests"]
        row = tried * GIB / dummies
        per_request = row / 4 * SAMPLER_BYTES_PER_ELEMENT
        lines.append(
            f"the failed allocation is one [{dummies} × vocab] float32 tensor: "
            f"{tried * GIB / MIB:.2f} MiB / {dummies} = {_mib(row)} a request, so vocab "
            f"≈ {row / 4:,.0f}"
        )
        lines.append(
            f"per request: {row / 4:,.0f} × {SAMPLER_BYTES_PER_ELEMENT} B = {_mib(per_request)}"
        )
        return per_request
    return None


def _kv_cache(p: _Plan, facts: Mapping[str, Any], ctx: PlanContext) -> None:
    capacity = facts.get("kv_cache_tokens")
    estimate = facts.get("estimated_max_model_len")
    current = facts.get("max_model_len")
    engine = facts.get("engine")
    if engine == "tgi" and facts.get("max_batch_prefill_tokens"):
        value = facts["max_batch_prefill_tokens"] // 2
        p.add(
            "set_flag",
            "the warm-up batch does not fit in the memory left at start",
            flag="--max-batch-prefill-tokens",
            value=value,
            arithmetic=(f"{facts['max_batch_prefill_tokens']} / 2 = {value}",),
            expected="the warm-up batch fits",
        )
    else:
        limit = min(x for x in (capacity, estimate) if x) if (capacity or estimate) else None
        if limit:
            value = limit // 1024 * 1024
            source = "KV capacity" if limit == capacity else "estimated maximum model length"
            flag = "--context-length" if engine == "sglang" else "--max-model-len"
            if value >= 1024 and (current is None or value < current):
                p.add(
                    "set_flag",
                    f"one request of max_model_len {current} needs more KV cache "
                    f"than the {source} the log states ({limit:,} tokens)",
                    flag=flag,
                    value=value,
                    arithmetic=(
                        f"{limit:,} tokens rounded down to a multiple of 1024 = {value:,}",
                    ),
                    expected="the KV cache holds one full-length request",
                )
        needed, available = facts.get("kv_cache_needed_gib"), facts.get("available_kv_cache_gib")
        util, total = facts.get("gpu_memory_utilization"), facts.get("total_capacity_gib")
        headroom = ctx.free_before_bytes
        if needed and available and util and total and headroom:
            missing = needed - available
            raised = math.ceil((util + missing / total) * 100) / 100
            if missing * GIB < headroom and raised <= 0.98:
                p.add(
                    "set_flag",
                    f"the GPUs have {_gib(headroom)} unused (samples): give the "
                    f"KV cache the {missing:.2f} GiB it lacks",
                    flag="--gpu-memory-utilization",
                    value=raised,
                    alternative=True,
                    arithmetic=(
                        f"{needed} − {available} = {missing:.2f} GiB",
                        f"{util} + {missing:.2f} / {total} = {raised:.2f}",
                    ),
                    expected="the full max_model_len fits",
                )
        tp = facts.get("tensor_parallel_size") or 1
        if ctx.idle_gpus is not None and ctx.idle_gpus >= tp:
            p.add(
                "set_flag",
                f"{ctx.idle_gpus} GPUs on this host are idle: spread the model over {tp * 2}",
                flag="--tensor-parallel-size",
                value=tp * 2,
                alternative=True,
                arithmetic=(f"{tp} × 2 = {tp * 2}",),
                expected="twice the KV cache memory",
            )
    if not any(a.kind == "set_flag" for a in p.actions):
        p.add(
            "notify",
            "KV cache does not fit, and the log states no capacity to compute a "
            "max_model_len from: lower --max-model-len or raise "
            "--gpu-memory-utilization by hand",
        )
        return
    _wait_then_restart(p, ctx, "KV cache allocated, the server says it is ready")


def _release_bound(ctx: PlanContext) -> tuple[float, str]:
    if ctx.release_p95_s is not None:
        if ctx.release_p95_s < MIN_RELEASE_S:
            return MIN_RELEASE_S, (
                f"p95 of this host's past releases after a kill is "
                f"{ctx.release_p95_s:.1f} s; at least {MIN_RELEASE_S:.0f} s"
            )
        return ctx.release_p95_s, "p95 of this host's past releases after a kill"
    return DEFAULT_RELEASE_S, "no history on this host yet: the documented default"


def _wait_then_restart(
    p: _Plan, ctx: PlanContext, expected: str, why: str = "start the service with the new setting"
) -> None:
    seconds, source = _release_bound(ctx)
    p.add(
        "wait_gpu_free",
        "the stopped run's GPU memory must be back before the next start",
        seconds=seconds,
        gpus=ctx.gpus,
        arithmetic=(f"bound {seconds:.0f} s: {source}",),
        expected="the unit's GPUs back to their idle memory, stable for a few samples",
    )
    _restart(p, ctx, why, expected)


def _restart(p: _Plan, ctx: PlanContext, why: str, expected: str) -> None:
    p.add(
        "reset_failed",
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
        "restart",
        why,
        seconds=ready,
        expected=expected,
        arithmetic=(f"ready within {ready:.0f} s: {source}",),
    )


def _wedged(p: _Plan, facts: Mapping[str, Any], ctx: PlanContext) -> None:
    p.add(
        "kill",
        "the stop timed out: SIGKILL the unit's whole control group",
        expected="no process of the unit left",
    )
    seconds, source = _release_bound(ctx)
    p.add(
        "wait_gpu_free",
        "the driver frees GPU memory some seconds after the processes go",
        seconds=seconds,
        gpus=ctx.gpus,
        arithmetic=(f"bound {seconds:.0f} s: {source}",),
        expected="the unit's GPUs back to their idle memory, stable for a few samples",
    )
    p.add(
        "set_unit_option",
        "a shorter stop timeout, if the unit's is longer: SIGKILL "
        "sooner next time (skipped when TimeoutStopSec is already "
        f"{HARDENED_TIMEOUT_STOP} or less)",
        option="TimeoutStopSec",
        value=HARDENED_TIMEOUT_STOP,
        expected="the next stop ends in 30 s",
    )
    p.add(
        "set_unit_option",
        "signal every process of the unit, the workers too (skipped "
        "when KillMode is already control-group)",
        option="KillMode",
        value="control-group",
        expected="no orphaned worker keeps GPU memory",
    )


def _held(p: _Plan, facts: Mapping[str, Any], ctx: PlanContext) -> None:
    for holder in ctx.holders:
        used = f" ({_gib(holder.used_bytes)})" if holder.used_bytes else ""
        if holder.unit is not None and is_unit_name(holder.unit) and holder.unit != p.unit:
            p.actions.append(
                ActionStep(
                    kind="stop",
                    unit=holder.unit,
                    pid=holder.pid,
                    why=f"PID {holder.pid} of {holder.unit} holds GPU memory{used}",
                    expected="its memory is freed",
                )
            )
        elif holder.unit is not None and holder.unit == p.unit:
            p.add(
                "kill",
                f"PID {holder.pid}, left over from a previous run of this unit, "
                f"holds GPU memory{used}",
                pid=holder.pid,
                expected="the leftover process is gone",
            )
        else:
            p.add(
                "notify",
                f"PID {holder.pid} holds GPU memory{used} and belongs to no "
                "unit: a person must decide (it is never killed automatically)",
                pid=holder.pid,
            )
    if not ctx.holders:
        p.add(
            "notify",
            "GPU memory was held by another process at start; GPU samples with "
            "the process list would name it",
        )
        return
    p.add(
        "wait_gpu_free",
        "let the driver release the memory",
        seconds=ctx.release_p95_s or DEFAULT_RELEASE_S,
        gpus=ctx.gpus,
        expected="memory free and stable",
    )
    _restart(p, ctx, "start the service again", "enough free memory at start")


_BUILDERS = {
    "sampler_warmup_oom": _sampler,
    "kv_cache_oom": _kv_cache,
    "wedged_stop": _wedged,
    "gpu_memory_held": _held,
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
