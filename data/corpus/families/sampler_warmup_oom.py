"""sampler_warmup_oom: vLLM V1's sampler warm-up running out of memory."""

from __future__ import annotations

from advisor.sim.texts import sampler_warmup_oom

from ..catalog import EMBED_MODELS
from ..context import Ctx
from ..family import Family, vllm_oom_wrapped
from ..torch_errors import oom_exc_lines, oom_nums
from ..vllm_failures import vllm_exit_after_startup_failure, vllm_startup_failure
from ..vllm_frames import sampler_frames
from ..vllm_startup import vllm_graphs, vllm_startup


def vllm_sampler_oom(ctx: Ctx) -> None:
    rng = ctx.rng
    pooler = ctx.chance(0.12)
    if pooler:
        ctx.model = rng.choice(EMBED_MODELS)
    ctx.max_seqs = rng.choice((256, 512, 1024, 1024, 1024, 2048))
    ctx.batched = rng.choice((8192, 16384, 2048)) if ctx.max_seqs > 256 else ctx.batched
    n = min(ctx.max_seqs, ctx.batched)
    vllm_startup(ctx, "graphs")
    vllm_graphs(ctx)
    ctx.adv(0.3, 4)
    outer, inner = sampler_frames(ctx, pooler)
    nums = oom_nums(ctx, private=not ctx.enforce_eager)
    inner_exc = oom_exc_lines(ctx, nums)
    what = f"pooler ({rng.choice(('embed', 'encode', 'classify'))})" if pooler else "sampler"
    canon = sampler_warmup_oom(n, what)
    final = ctx.pick(
        canon,
        (
            f"RuntimeError: ran out of GPU memory while warming up the {what.split()[0]} ({n} "
            "dummy requests)",
            f"RuntimeError: Sampler warm-up with {n} dummy requests failed: CUDA out of memory. "
            "Reduce max_num_seqs.",
            f"vllm.exceptions.SamplerWarmupError: not enough device memory to warm up the "
            f"{what.split()[0]} for {n} concurrent sequences; lower --max-num-seqs or "
            "--gpu-memory-utilization",
            f"MemoryError: warmup of {what.split()[0]} (num_reqs={n}) exceeded available GPU "
            "memory",
            f"RuntimeError: OOM during {what.split()[0]} warmup with batch of {n} dummy requests. "
            "Try a smaller max_num_seqs.",
        ),
    )
    keys = (
        "warming up",
        "warm-up",
        "warmup",
        "_dummy_sampler_run",
        "_dummy_pooler_run",
        inner_exc[0],
        final,
    )
    if ctx.chance(0.12):  # only the torch OOM, traceback through _dummy_sampler_run
        vllm_startup_failure(
            ctx,
            "sampler",
            inner_exc,
            None,
            None,
            keys,
            outer[:-1] + inner,
            n_fail=rng.randrange(1, ctx.tp + 1),
        )
    else:
        vllm_startup_failure(
            ctx,
            "sampler",
            [final],
            inner,
            inner_exc,
            keys,
            outer,
            n_fail=rng.randrange(1, ctx.tp + 1),
        )
    vllm_exit_after_startup_failure(ctx)


FAMILY = Family(
    "sampler_warmup_oom",
    0,
    {"vllm": vllm_oom_wrapped(vllm_sampler_oom)},
    min_vllm_rank=8,
    v0_ok=False,
)
