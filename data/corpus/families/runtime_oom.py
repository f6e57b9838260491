"""runtime_oom: a CUDA OOM while serving requests."""

from __future__ import annotations

from ..context import Ctx
from ..family import Family, vllm_oom_wrapped
from ..runs import wedged_stop_tail
from ..sglang import SG_MR, SG_SCHED, sg_fail, sg_ready, sg_serve, sg_startup
from ..systemd import sd_clean_exit, sd_fail, sd_restart, sd_start
from ..tgi import TG_FCL, tg, tg_ready, tg_serve, tg_shard_tb, tg_shutdown_failed, tg_startup
from ..torch_errors import oom_exc_lines, oom_nums
from ..tracebacks import Frame, tb
from ..vllm_lines import is_v1
from ..vllm_runtime import vllm_runtime_death
from ..vllm_serve import vllm_http_shutdown, vllm_serve
from ..vllm_startup import vllm_ready, vllm_startup


def vllm_runtime_oom(ctx: Ctx) -> None:
    rng = ctx.rng
    vllm_startup(ctx, "ready")
    vllm_ready(ctx, key=True)
    vllm_serve(ctx, rng.randrange(3, 25))
    ctx.adv(1, 600)
    nums = oom_nums(ctx, private=not ctx.enforce_eager)
    exc = oom_exc_lines(ctx, nums)
    keys = (
        "execute_model",
        "EngineDeadError",
        "died unexpectedly",
        "fatal error",
        "Background loop",
        "background task failed",
        "exited unexpectedly",
        exc[0],
    )
    vllm_runtime_death(ctx, exc, None, keys)
    ctx.adv(0.2, 3)
    if ctx.chance(0.12):  # the operator stops the dead server and the stop wedges (secondary)
        ctx.adv(30, 900)
        ctx.sys(f"Stopping {ctx.status}...")
        vllm_http_shutdown(ctx, complete=False)
        wedged_stop_tail(ctx, rng.choice((90, 45, 120)))
        return
    vllm_http_shutdown(ctx)
    if is_v1(ctx) and ctx.chance(0.4):
        sd_clean_exit(ctx)
    else:
        sd_fail(ctx)
        if ctx.chance(0.3):
            sd_restart(ctx)


def sg_runtime(ctx: Ctx) -> None:
    sd_start(ctx)
    sg_startup(ctx, "ready")
    sg_ready(ctx, key=True)
    sg_serve(ctx, ctx.rng.randrange(3, 30))
    ctx.adv(5, 3000)
    exc = oom_exc_lines(ctx, oom_nums(ctx, private=True))
    frames: list[Frame] = [
        (
            SG_SCHED,
            "run_scheduler_process",
            "scheduler.event_loop_overlap()"
            if ctx.chance(0.5)
            else "scheduler.event_loop_normal()",
        ),
        ("torch/utils/_contextlib.py", "decorate_context", "return func(*args, **kwargs)"),
        (SG_SCHED, "event_loop_normal", "result = self.run_batch(batch)"),
        (
            SG_SCHED,
            "run_batch",
            "logits_output, next_token_ids, can_run_cuda_graph = "
            "self.tp_worker.forward_batch_generation(",
        ),
        (
            "sglang/srt/managers/tp_worker.py",
            "forward_batch_generation",
            "logits_output, can_run_cuda_graph = self.model_runner.forward(",
        ),
        (SG_MR, "forward", "return self.forward_extend("),
        (SG_MR, "forward_extend", "return self.model.forward("),
        (
            f"sglang/srt/models/{ctx.model.file}.py",
            "forward",
            "hidden_states = self.model(input_ids, positions, forward_batch, input_embeds)",
        ),
    ]
    sg_fail(
        ctx,
        tb(ctx, frames, exc),
        ("forward_batch_generation", "run_batch", exc[0]),
        rank=ctx.rng.randrange(ctx.tp),
    )


def tg_runtime(ctx: Ctx) -> None:
    sd_start(ctx)
    tg_startup(ctx, "connected")
    tg_ready(ctx, key=True)
    tg_serve(ctx, ctx.rng.randrange(3, 25))
    ctx.adv(10, 5000)
    exc = oom_exc_lines(ctx, oom_nums(ctx))
    tg_shard_tb(
        ctx,
        ctx.rng.choice(("Decode", "Prefill")),
        [
            (
                "text_generation_server/server.py",
                "Decode",
                "generations, next_batch, timings = self.model.generate_token(batch)",
            ),
            (
                TG_FCL,
                "generate_token",
                "out, speculative_logits = self.forward(batch, adapter_data)",
            ),
            (TG_FCL, "forward", "logits, speculative_logits = self.model.forward("),
        ],
        exc,
        ("generate_token", exc[0]),
    )
    tg(
        ctx,
        "ERROR",
        "batch{batch_size=8}:decode:decode{size=8}:decode{size=8}: "
        "text_generation_router_v3::client",
        f"backends/client/src/lib.rs:{ctx.lineno('srverr')}: Server error: "
        f"{exc[0].split(': ', 1)[-1][:200]}",
        key=True,
    )
    ctx.adv(0.1, 5)
    tg(
        ctx,
        "ERROR",
        "shard-manager: text_generation_launcher",
        f"Shard process was signaled to shutdown with signal 9 rank={ctx.rng.randrange(ctx.tp)}",
    )
    tg(ctx, "ERROR", "text_generation_launcher", "Shard 0 crashed")
    tg_shutdown_failed(ctx, "ShardFailed")


FAMILY = Family(
    "runtime_oom",
    4,
    {"vllm": vllm_oom_wrapped(vllm_runtime_oom), "sglang": sg_runtime, "tgi": tg_runtime},
)
