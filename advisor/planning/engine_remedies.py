"""Remedies in the terms of engines whose memory is split otherwise than vLLM's: SGLang's
static fraction for weights and KV pool, TGI's prefill batch, llama.cpp's context. Each adds
its `set_flag` step for the flag its engine has for the role (the registry), computed from
the engine's own numbers, with the arithmetic; none when the log does not state them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

from advisor.core.engines.model import Engine
from advisor.core.kinds import SET_FLAG
from advisor.planning.context import PlanContext
from advisor.planning.remedies import Draft

POOL_MARGIN: Final = 0.05  # a static fraction raised this much past where the pool is empty
POOL_STEP: Final = 0.05  # without the memory figures: one step, as SGLang's own advice says


def sglang_pool(p: Draft, facts: Mapping[str, Any], ctx: PlanContext, engine: Engine) -> None:
    """SGLang's "Not enough memory. Please try to increase --mem-fraction-static": the KV pool
    is what is left of the static fraction after the weights, so raise the fraction — to
    where the pool has room, when the log states the memory left after the weights and the
    GPU's total, else by one step — within the flag's safe range."""
    flag = engine.role("memory_fraction")
    current = facts.get("mem_fraction_static")
    if flag is None or flag.bound is None or not current:
        return
    ceiling = flag.bound.high
    free, total = facts.get("free_gib"), facts.get("total_capacity_gib")
    lines: tuple[str, ...]
    if free is not None and total:
        empty = 1 - free / total  # the fraction at which the pool is empty
        value = math.ceil((empty + POOL_MARGIN) * 100) / 100
        lines = (
            f"pool = {free:.2f} GiB left after the weights − {total:.2f} GiB × (1 − fraction): "
            f"empty at 1 − {free:.2f} / {total:.2f} = {empty:.3f}",
            f"{empty:.3f} + {POOL_MARGIN} = {value:.2f}",
        )
    else:
        value = round(current + POOL_STEP, 2)
        lines = (f"{current} + {POOL_STEP} = {value:.2f} (the log states no memory figures)",)
    value = max(value, round(current + 0.01, 2))
    if value > ceiling:
        return
    p.add(
        SET_FLAG,
        f"the KV pool is what {flag.name} leaves after the weights, and it had no room "
        "(SGLang's own advice is to increase it)",
        flag=flag.name,
        value=value,
        arithmetic=lines,
        expected="the KV pool has room for requests",
    )


def tgi_prefill(p: Draft, facts: Mapping[str, Any], ctx: PlanContext, engine: Engine) -> None:
    """TGI's warm-up ran a prefill of the stated tokens out of memory: halve the batch, not
    below the longest prompt (TGI refuses a prefill batch smaller than `max_input_tokens`)."""
    flag = engine.role("prefill")
    tokens = facts.get("max_batch_prefill_tokens")
    if flag is None or flag.bound is None or not tokens:
        return
    value = tokens // 2
    lines = [f"{tokens} / 2 = {value}"]
    longest = facts.get("max_input_tokens")
    if longest and value < longest:
        return  # a smaller batch than one prompt: TGI would refuse it; the advice says what
    if value < flag.bound.low:
        return
    p.add(
        SET_FLAG,
        "the warm-up batch does not fit in the memory left at start",
        flag=flag.name,
        value=value,
        arithmetic=tuple(lines),
        expected="the warm-up batch fits",
    )


def llama_context(p: Draft, facts: Mapping[str, Any], ctx: PlanContext, engine: Engine) -> None:
    """llama.cpp could not allocate the KV cache for its context: halve the context."""
    flag = engine.role("context")
    current = facts.get("max_model_len")
    if flag is None or flag.bound is None or not current:
        return
    value = current // 2 // 256 * 256
    if value < flag.bound.low:
        return
    p.add(
        SET_FLAG,
        f"the KV cache for a context of {current} tokens does not fit on the GPU",
        flag=flag.name,
        value=value,
        arithmetic=(f"{current} / 2, rounded down to a multiple of 256 = {value}",),
        expected="the KV cache for half the context fits",
    )
