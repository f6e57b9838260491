"""Remedies that compute a new setting from the memory figures: a sampler warm-up or a KV
cache that ran out of memory. Each adds its `set_flag` steps — for the flag its engine has
for the role (`advisor.core.engines`), with the arithmetic — and nothing else: the plan adds
the hold, the wait for memory and the restart, or, when no remedy could compute a value, the
engine's advice."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final

from advisor.core.engines.model import Engine
from advisor.core.kinds import SET_FLAG
from advisor.planning.context import PlanContext
from advisor.planning.remedies import (
    GIB,
    MIB,
    SAMPLER_BYTES_PER_ELEMENT,
    SAMPLER_MARGIN,
    Draft,
    fmt_gib,
    fmt_mib,
)


def sampler(p: Draft, facts: Mapping[str, Any], ctx: PlanContext, engine: Engine) -> None:
    seqs = facts.get("max_num_seqs") or facts.get("dummy_requests")
    flag = engine.role("concurrency")
    if not seqs or seqs < 2 or flag is None:
        return
    lines: list[str] = []
    per_request = sampler_per_request(facts, lines)
    available = _sampler_available(facts, ctx, lines)
    if per_request and available:
        _sampler_fit(p, facts, seqs, per_request, available, lines, engine)
    else:
        value = max(1, seqs // 2)
        p.add(
            SET_FLAG,
            "the log does not give the memory figures to compute with: halve it",
            flag=flag.name,
            value=value,
            arithmetic=(f"{seqs} / 2 = {value}",),
            expected="half the warm-up memory",
        )


def _sampler_available(facts: Mapping[str, Any], ctx: PlanContext, lines: list[str]) -> int | None:
    """The memory the sampler could have had: NVML's free memory before the warm-up, else
    what was free at the failure plus what it asked for; the arithmetic is added to `lines`."""
    tried = facts.get("tried_to_allocate_gib")
    free = facts.get("free_gib")
    available = ctx.free_before_bytes
    if available is not None:
        lines.append(f"free GPU memory before the warm-up (NVML samples): {fmt_gib(available)}")
    elif free is not None and tried is not None:
        available = int((free + tried) * GIB)
        lines.append(
            f"free at the failure {free:.2f} GiB + the {tried:.2f} GiB it asked for "
            f"= {fmt_gib(available)} the sampler could have had at most"
        )
    return available


def _sampler_fit(
    p: Draft,
    facts: Mapping[str, Any],
    seqs: int,
    per_request: float,
    available: int,
    lines: list[str],
    engine: Engine,
) -> None:
    """The --max-num-seqs that fits, and as an alternative a KV cache made smaller instead."""
    fit = math.floor(SAMPLER_MARGIN * available / per_request)
    value = max(1, min(seqs - 1, 2 ** int(math.log2(fit)) if fit >= 1 else 1))
    need = per_request * seqs
    lines.append(f"needed for {seqs}: {seqs} × {fmt_mib(per_request)} = {fmt_gib(need)}")
    lines.append(
        f"fits: {SAMPLER_MARGIN:.0%} × {fmt_gib(available)} / {fmt_mib(per_request)} = "
        f"{fit} → {value} (a power of two, below {seqs})"
    )
    concurrency, fraction = engine.role("concurrency"), engine.role("memory_fraction")
    assert concurrency is not None
    p.add(
        SET_FLAG,
        f"the sampler warm-up needs about {fmt_gib(need)} for {seqs} dummy "
        f"requests and had about {fmt_gib(available)}",
        flag=concurrency.name,
        value=value,
        arithmetic=tuple(lines),
        expected=f"warm-up needs about {fmt_gib(per_request * value)}, which fits",
    )
    util = facts.get("gpu_memory_utilization")
    total = facts.get("total_capacity_gib")
    if util and total and fraction is not None:
        missing = max(0.0, need - available) / GIB
        lowered = math.floor((util - missing / total) * 100) / 100
        if 0.5 <= lowered < util:
            p.add(
                SET_FLAG,
                f"keeps {seqs} concurrent sequences: gives the KV cache "
                f"{missing:.2f} GiB less so the sampler fits",
                flag=fraction.name,
                value=lowered,
                alternative=True,
                arithmetic=(
                    f"missing: {fmt_gib(need)} − {fmt_gib(available)} = {missing:.2f} GiB",
                    f"{util} − {missing:.2f} / {total} GiB = {lowered:.2f}",
                ),
                expected="the same concurrency with a smaller KV cache",
            )


def sampler_per_request(facts: Mapping[str, Any], lines: list[str]) -> float | None:
    """The sampler's memory for one request, from the vocab size or else the failed
    allocation; the arithmetic is added to `lines`."""
    vocab = facts.get("vocab_size")
    tried = facts.get("tried_to_allocate_gib")
    if vocab:
        per_request: float = SAMPLER_BYTES_PER_ELEMENT * vocab
        lines.append(
            f"per request: {vocab:,} logits × {SAMPLER_BYTES_PER_ELEMENT} B (float32 "
            f"logits, sorted values, int64 indices, probabilities) = "
            f"{fmt_mib(per_request)}"
        )
        return per_request
    if tried and facts.get("dummy_requests"):
        dummies = facts["dummy_requests"]
        row = tried * GIB / dummies
        per_request = row / 4 * SAMPLER_BYTES_PER_ELEMENT
        lines.append(
            f"the failed allocation is one [{dummies} × vocab] float32 tensor: "
            f"{tried * GIB / MIB:.2f} MiB / {dummies} = {fmt_mib(row)} a request, so vocab "
            f"≈ {row / 4:,.0f}"
        )
        lines.append(
            f"per request: {row / 4:,.0f} × {SAMPLER_BYTES_PER_ELEMENT} B = {fmt_mib(per_request)}"
        )
        return per_request
    return None


def kv_profile_batch(p: Draft, facts: Mapping[str, Any], ctx: PlanContext, engine: Engine) -> None:
    """The memory profiling run itself ran out (phase `memory_profiling`): it runs one batch
    of the prefill budget's tokens after the weights, so halve that budget, when the log
    states it. Not below the engine's bound or `max_num_seqs` (which the engine refuses), nor
    below `max_model_len` before the V1 engine (V0 without chunked prefill refuses that)."""
    flag = engine.role("prefill")
    tokens = facts.get("max_num_batched_tokens")
    if facts.get("phase") != "memory_profiling" or flag is None or flag.bound is None:
        return
    if not tokens:
        return
    value = tokens // 2 // 256 * 256
    floor = max(flag.bound.low, facts.get("max_num_seqs") or 0)
    longest = facts.get("max_model_len")
    if longest and not _chunks_prefill(facts.get("engine_version")):
        floor = max(floor, longest)
    if value < floor:
        return
    p.add(
        SET_FLAG,
        f"the memory profiling run of {tokens:,} batched tokens ran out of memory after the "
        "weights: a smaller batch leaves room for the KV cache",
        flag=flag.name,
        value=value,
        arithmetic=(f"{tokens:,} / 2, rounded down to a multiple of 256 = {value:,}",),
        expected="the profiling run fits and the KV cache is sized",
    )


V1_DEFAULT: Final = (0, 8)  # vLLM's V1 engine (chunked prefill always on) is the default from


def _chunks_prefill(version: object) -> bool:
    """Whether a vLLM of `version` chunks prefills whatever its flags (V1, 0.8 on)."""
    if not isinstance(version, str):
        return False
    numbers = [int(n) for n in re.findall(r"\d+", version)[:2]]
    return len(numbers) == 2 and (numbers[0], numbers[1]) >= V1_DEFAULT


def kv_context(p: Draft, facts: Mapping[str, Any], ctx: PlanContext, engine: Engine) -> None:
    """A context length the KV cache holds, from the capacity or estimate the log states."""
    flag = engine.role("context")
    capacity = facts.get("kv_cache_tokens")
    estimate = facts.get("estimated_max_model_len")
    current = facts.get("max_model_len")
    limit = min(x for x in (capacity, estimate) if x) if (capacity or estimate) else None
    if not limit or flag is None:
        return
    value = limit // 1024 * 1024
    source = "KV capacity" if limit == capacity else "estimated maximum model length"
    if value >= 1024 and (current is None or value < current):
        p.add(
            SET_FLAG,
            f"one request of {current} tokens needs more KV cache "
            f"than the {source} the log states ({limit:,} tokens)",
            flag=flag.name,
            value=value,
            arithmetic=(f"{limit:,} tokens rounded down to a multiple of 1024 = {value:,}",),
            expected="the KV cache holds one full-length request",
        )


def kv_memory_fraction(
    p: Draft, facts: Mapping[str, Any], ctx: PlanContext, engine: Engine
) -> None:
    """As an alternative, the KV cache given what it lacks, where the samples show it unused."""
    flag = engine.role("memory_fraction")
    needed, available = facts.get("kv_cache_needed_gib"), facts.get("available_kv_cache_gib")
    util, total = facts.get("gpu_memory_utilization"), facts.get("total_capacity_gib")
    headroom = ctx.free_before_bytes
    if not (needed and available and util and total and headroom) or flag is None:
        return
    missing = needed - available
    raised = math.ceil((util + missing / total) * 100) / 100
    if missing * GIB < headroom and flag.bound is not None and raised <= flag.bound.high:
        p.add(
            SET_FLAG,
            f"the GPUs have {fmt_gib(headroom)} unused (samples): give the "
            f"KV cache the {missing:.2f} GiB it lacks",
            flag=flag.name,
            value=raised,
            alternative=bool(p.actions),
            arithmetic=(
                f"{needed} − {available} = {missing:.2f} GiB",
                f"{util} + {missing:.2f} / {total} = {raised:.2f}",
            ),
            expected="the full context fits",
        )


def kv_parallel(p: Draft, facts: Mapping[str, Any], ctx: PlanContext, engine: Engine) -> None:
    """As an alternative, the model spread over twice the GPUs, where that many are idle."""
    flag = engine.role("parallel")
    tp = facts.get("tensor_parallel_size") or 1
    if flag is None or ctx.idle_gpus is None or ctx.idle_gpus < tp or not p.actions:
        return
    p.add(
        SET_FLAG,
        f"{ctx.idle_gpus} GPUs on this host are idle: spread the model over {tp * 2}",
        flag=flag.name,
        value=tp * 2,
        alternative=True,
        arithmetic=(f"{tp} × 2 = {tp * 2}",),
        expected="twice the KV cache memory",
    )


def kv_suggested(p: Draft, facts: Mapping[str, Any], ctx: PlanContext, engine: Engine) -> None:
    """As an alternative, the KV cache size the engine itself printed ("`--kv-cache-memory=N`
    to fully utilize gpu memory", vLLM 0.10.2+), when it holds one full-length request."""
    flag = engine.role("kv_bytes")
    size = facts.get("suggested_kv_cache_bytes")
    needed = facts.get("kv_cache_needed_gib")
    if flag is None or flag.bound is None or not size or not flag.bound.holds(size):
        return
    if needed and size < needed * GIB:
        return  # all the free memory would still not hold one request: not a fix
    lines = [f"{engine.title}'s own advice in its log: --kv-cache-memory={size} ({fmt_gib(size)})"]
    if needed:
        lines.append(f"one request of the full length needs {needed:.2f} GiB ≤ {fmt_gib(size)}")
    p.add(
        SET_FLAG,
        f"keeps the context: the KV cache sized as {engine.title} itself suggests, to use all the "
        "GPU memory free at start",
        flag=flag.name,
        value=size,
        alternative=bool(p.actions),
        arithmetic=tuple(lines),
        expected="the KV cache holds one full-length request",
    )
