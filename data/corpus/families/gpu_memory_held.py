"""gpu_memory_held: another process (often a leftover of the last run) holds the GPU's memory."""

from __future__ import annotations

from ..catalog import GIB
from ..context import Ctx, Proc
from ..family import Family
from ..fmt import gib
from ..runs import leftover_lines, previous_run_leftovers
from ..sglang import SG_MR, sg_fail, sg_init_frames, sg_startup
from ..systemd import sd_start
from ..tgi import tg_load_frames, tg_shard_fail, tg_startup
from ..torch_errors import oom_class, oom_message, oom_nums
from ..tracebacks import Frame, tb
from ..vllm_failures import vllm_exit_after_startup_failure, vllm_startup_failure
from ..vllm_frames import MPX, R1, W1, loader_frames, uniproc_frames
from ..vllm_lines import is_v1
from ..vllm_startup import vllm_dist_init, vllm_load, vllm_prelude


def held_numbers(ctx: Ctx) -> tuple[float, float, float]:
    total = ctx.gpu.gib
    free = total * ctx.rng.uniform(0.03, 0.7)
    req = total * ctx.util
    return free, total, req


def vllm_gpu_held(ctx: Ctx) -> None:
    rng = ctx.rng
    leftovers: list[Proc] = []
    if ctx.chance(0.65):
        leftovers = previous_run_leftovers(ctx)
        if ctx.chance(0.3):
            used = int(ctx.gpu.mib * rng.uniform(0.6, 0.95))
            ctx.add(
                "pre",
                f"Waiting for GPU memory to free (max used: {used} MiB)",
                pid=ctx.api.pid - 1,
                ident="bash",
            )
    else:
        sd_start(ctx)
    g = ctx.grank
    free, total, req = held_numbers(ctx)
    vllm_prelude(ctx)
    vllm_dist_init(ctx)
    ctx.adv(0.5, 4)
    variant = (
        "free" if g >= 10 else rng.choice(("oom", "profile")) if not is_v1(ctx) or g >= 8 else "oom"
    )
    if g >= 10 and ctx.chance(0.15):
        variant = "oom"
    if variant == "oom" and not leftovers:
        leftovers = [Proc("ec", ctx.api.pid - rng.randrange(400, 4000))]
        leftover_lines(ctx, leftovers)
    dev = "cuda:0 " if g >= 33 else ""
    keys: tuple[str, ...] = (
        "Free memory on device",
        "init_device",
        "request_memory",
        "left-over",
        "memory profiling",
        "in use",
        "other processes",
    )
    if variant == "free":
        canon = (
            f"ValueError: Free memory on device {dev}({free:.2f}/{total:.2f} GiB) on startup "
            f"is less than desired GPU memory utilization ({ctx.util}, {req:.2f} GiB). "
            "Decrease GPU memory utilization or reduce GPU memory used by other processes."
        )
        exc = [
            ctx.pick(
                canon,
                (
                    f"ValueError: Insufficient free GPU memory at startup: {free:.2f}/{total:.2f} "
                    f"GiB free, but gpu_memory_utilization={ctx.util} requires {req:.2f} GiB. "
                    "Other processes are using the device.",
                    f"RuntimeError: GPU 0 already has {total - free:.2f} GiB in use by other "
                    f"processes; requested utilization {ctx.util} ({req:.2f} GiB) cannot be "
                    "satisfied.",
                    f"ValueError: Startup memory check failed on cuda:0: only {free:.2f} GiB of "
                    f"{total:.2f} GiB free (need {req:.2f} GiB for utilization {ctx.util}).",
                    f"vllm.exceptions.GPUMemoryInUseError: {total - free:.2f} GiB of device memory "
                    "is held by another process; free it or lower --gpu-memory-utilization.",
                ),
            )
        ]
        frames: list[Frame] = [
            (
                W1,
                "init_device",
                "raise ValueError(" if g < 33 else "self.requested_memory = request_memory(",
            )
        ]
        if g >= 33:
            frames.append(("vllm/v1/worker/utils.py", "request_memory", "raise ValueError("))
        if is_v1(ctx) and ctx.tp == 1:
            ex = uniproc_frames(ctx)[0][0]
            frames = [
                (ex, "_init_executor", 'self.collective_rpc("init_device")'),
                *uniproc_frames(ctx),
                *frames,
            ]
        elif ctx.tp > 1:
            frames = [(MPX, "__init__", "self.worker.init_device()"), *frames]
        vllm_startup_failure(
            ctx,
            "load",
            exc,
            None,
            None,
            (*keys, exc[0]),
            frames[1:] if ctx.tp > 1 else frames,
            n_fail=ctx.tp,
        )
    elif variant == "profile":
        vllm_load(ctx)
        init = int(gib(free) * rng.uniform(0.3, 0.9))
        cur = init + int(rng.uniform(2, 30) * GIB)
        exc = [
            f"AssertionError: Error in memory profiling. Initial free memory {init}, current "
            f"free memory {cur}. This happens when the GPU memory was not properly cleaned up "
            "before initializing the vLLM instance."
        ]
        keys = (*keys, exc[0])
        vllm_startup_failure(ctx, "profile", exc, None, None, keys, [], n_fail=1)
    else:
        vllm_load(ctx, fail_after=rng.randrange(0, 3))
        others = tuple((p.pid, gib(ctx.gpu.gib * rng.uniform(0.55, 0.9))) for p in leftovers[:1])
        nums = oom_nums(ctx, others=others)
        exc = [f"{oom_class(ctx)}: {oom_message(ctx, nums)}"]
        wf = loader_frames(ctx)
        if is_v1(ctx):
            wf = [
                (W1, "load_model", "self.model_runner.load_model()"),
                (R1, "load_model", "self.model = model_loader.load_model("),
                *wf,
            ]
        vllm_startup_failure(ctx, "load", exc, None, None, (*keys, exc[0]), wf, n_fail=ctx.tp)
    if variant != "oom":
        ctx.needs_sys = False
    vllm_exit_after_startup_failure(ctx)


def sg_held(ctx: Ctx) -> None:
    leftovers = previous_run_leftovers(ctx)
    if ctx.chance(0.5):
        sg_startup(ctx, "dist")
        lo = ctx.gpu.gib * ctx.rng.uniform(0.05, 0.4)
        exc = (
            "RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by "
            f"other processes. min_per_gpu_memory={lo:.2f}, local_gpu_memory={ctx.gpu.gib:.2f}, "
            f"local_gpu_memory * 0.9={ctx.gpu.gib * 0.9:.2f}"
        )
        frames = [
            *sg_init_frames(ctx),
            (SG_MR, "__init__", "min_per_gpu_memory = self.init_torch_distributed()"),
            (SG_MR, "init_torch_distributed", "raise RuntimeError("),
        ]
        sg_fail(ctx, tb(ctx, frames, [exc]), ("unbalanced", "occupied", exc))
        return
    sg_startup(ctx, "load")
    others = tuple((p.pid, gib(ctx.gpu.gib * ctx.rng.uniform(0.55, 0.9))) for p in leftovers[:1])
    oom = [f"{oom_class(ctx)}: {oom_message(ctx, oom_nums(ctx, others=others))}"]
    frames = [
        *sg_init_frames(ctx),
        (SG_MR, "initialize", "self.load_model()"),
        (SG_MR, "load_model", "self.model = get_model("),
    ]
    sg_fail(ctx, tb(ctx, frames, oom), ("memory in use", oom[0]))


def tg_held(ctx: Ctx) -> None:
    leftovers = previous_run_leftovers(ctx)
    tg_startup(ctx, "load")
    others = tuple((p.pid, gib(ctx.gpu.gib * ctx.rng.uniform(0.55, 0.9))) for p in leftovers[:1])
    exc = [f"{oom_class(ctx)}: {oom_message(ctx, oom_nums(ctx, others=others))}"]
    tg_shard_fail(ctx, tb(ctx, tg_load_frames(ctx), exc), ("memory in use", exc[0]))


FAMILY = Family(
    "gpu_memory_held",
    5,
    {"vllm": vllm_gpu_held, "sglang": sg_held, "tgi": tg_held},
    engine_weights=(76, 12, 12),
)
