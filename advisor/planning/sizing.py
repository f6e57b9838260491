"""Remedies that compute a new setting from the memory figures: a sampler warm-up or a KV
cache that ran out of memory."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from advisor.planning.context import PlanContext
from advisor.planning.remedies import (
    GIB,
    MIB,
    SAMPLER_BYTES_PER_ELEMENT,
    SAMPLER_MARGIN,
    Draft,
    fmt_gib,
    fmt_mib,
    wait_then_restart,
)


def sampler(p: Draft, facts: Mapping[str, Any], ctx: PlanContext) -> None:
    seqs = facts.get("max_num_seqs") or facts.get("dummy_requests")
    if not seqs or seqs < 2:
        p.add(
            "notify",
            "sampler warm-up ran out of memory but the log states no usable "
            "max_num_seqs or dummy request count: lower --max-num-seqs by hand",
        )
        return
    lines: list[str] = []
    per_request = sampler_per_request(facts, lines)
    available = _sampler_available(facts, ctx, lines)
    if per_request and available:
        _sampler_fit(p, facts, seqs, per_request, available, lines)
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
    wait_then_restart(p, ctx, "the warm-up completes and the server says it is ready")


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
    p.add(
        "set_flag",
        f"the sampler warm-up needs about {fmt_gib(need)} for {seqs} dummy "
        f"requests and had about {fmt_gib(available)}",
        flag="--max-num-seqs",
        value=value,
        arithmetic=tuple(lines),
        expected=f"warm-up needs about {fmt_gib(per_request * value)}, which fits",
    )
    util = facts.get("gpu_memory_utilization")
    total = facts.get("total_capacity_gib")
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


def kv_cache(p: Draft, facts: Mapping[str, Any], ctx: PlanContext) -> None:
    if facts.get("engine") == "tgi" and facts.get("max_batch_prefill_tokens"):
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
        _kv_model_len(p, facts)
        _kv_utilization(p, facts, ctx)
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
    wait_then_restart(p, ctx, "KV cache allocated, the server says it is ready")


def _kv_model_len(p: Draft, facts: Mapping[str, Any]) -> None:
    """A max model length the KV cache holds, from the capacity or estimate the log states."""
    capacity = facts.get("kv_cache_tokens")
    estimate = facts.get("estimated_max_model_len")
    current = facts.get("max_model_len")
    limit = min(x for x in (capacity, estimate) if x) if (capacity or estimate) else None
    if not limit:
        return
    value = limit // 1024 * 1024
    source = "KV capacity" if limit == capacity else "estimated maximum model length"
    flag = "--context-length" if facts.get("engine") == "sglang" else "--max-model-len"
    if value >= 1024 and (current is None or value < current):
        p.add(
            "set_flag",
            f"one request of max_model_len {current} needs more KV cache "
            f"than the {source} the log states ({limit:,} tokens)",
            flag=flag,
            value=value,
            arithmetic=(f"{limit:,} tokens rounded down to a multiple of 1024 = {value:,}",),
            expected="the KV cache holds one full-length request",
        )


def _kv_utilization(p: Draft, facts: Mapping[str, Any], ctx: PlanContext) -> None:
    """As an alternative, the KV cache given what it lacks, where the samples show it unused."""
    needed, available = facts.get("kv_cache_needed_gib"), facts.get("available_kv_cache_gib")
    util, total = facts.get("gpu_memory_utilization"), facts.get("total_capacity_gib")
    headroom = ctx.free_before_bytes
    if not (needed and available and util and total and headroom):
        return
    missing = needed - available
    raised = math.ceil((util + missing / total) * 100) / 100
    if missing * GIB < headroom and raised <= 0.98:
        p.add(
            "set_flag",
            f"the GPUs have {fmt_gib(headroom)} unused (samples): give the "
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
