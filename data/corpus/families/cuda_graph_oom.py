"""cuda_graph_oom: a CUDA OOM while capturing CUDA graphs."""

from __future__ import annotations

from ..context import Ctx
from ..family import Family, vllm_oom_wrapped
from ..fmt import tqdm_line
from ..sglang import SG_MR, sg, sg_fail, sg_init_frames, sg_startup
from ..systemd import sd_start
from ..torch_errors import oom_exc_lines, oom_message, oom_nums
from ..tracebacks import tb
from ..vllm_failures import vllm_exit_after_startup_failure, vllm_startup_failure
from ..vllm_frames import capture_frames
from ..vllm_lines import model_procs, vraw
from ..vllm_startup import graph_desc, vllm_graph_intro, vllm_startup


def vllm_graph_oom(ctx: Ctx) -> None:
    rng = ctx.rng
    ctx.enforce_eager = False
    if ctx.grank <= 5:
        pass
    vllm_startup(ctx, "graphs")
    vllm_graph_intro(ctx)
    p = model_procs(ctx)[0]
    if ctx.grank >= 6:
        desc, total = graph_desc(ctx)
        k = rng.randrange(0, total - 1)
        vraw(
            ctx, p, [tqdm_line(desc, k, total, rng.uniform(0.03, 0.4), False)], keys=("Capturing",)
        )
        ctx.evs[-1].tag = "tqdm"
    ctx.adv(0.5, 20)
    nums = oom_nums(ctx, private=True)
    exc = oom_exc_lines(ctx, nums)
    if ctx.reword and ctx.chance(0.4):
        bs = rng.choice((1, 8, 64, 128, 256, 512))
        exc = [
            rng.choice(
                (
                    f"RuntimeError: CUDA graph capture ran out of memory (batch size {bs}). "
                    "Consider --enforce-eager or a lower gpu_memory_utilization.",
                    "RuntimeError: CUDA out of memory occurred while capturing CUDA graphs for "
                    f"batch size {bs}. Please try lowering `gpu_memory_utilization` or using "
                    "`--enforce-eager`.",
                    "vllm.exceptions.CudaGraphCaptureError: failed to capture graph for "
                    f"num_tokens={bs}: out of memory",
                )
            )
        ]
    keys = (
        "capture_model",
        "_capture_cudagraphs",
        "Capturing",
        "capture_end",
        "cuda_graph",
        "graph_runner",
        exc[0],
    )
    vllm_startup_failure(
        ctx,
        "graphs",
        exc,
        None,
        None,
        keys,
        capture_frames(ctx),
        n_fail=rng.randrange(1, ctx.tp + 1),
    )
    vllm_exit_after_startup_failure(ctx)


def sg_graphs(ctx: Ctx) -> None:
    sd_start(ctx)
    sg_startup(ctx, "graphs")
    sg(ctx, 0, "Capture cuda graph begin. This can take up to several minutes.", key=True)
    ctx.adv(1, 20)
    oom = oom_message(ctx, oom_nums(ctx, private=True))
    new = ctx.version.startswith("0.5")
    sol = [
        "Possible solutions:",
        "1. disable cuda graph by --disable-cuda-graph",
        "2. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
        "3. disable torch compile by not using --enable-torch-compile",
    ]
    if new:
        sol = [
            "Possible solutions:",
            "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
            "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)",
            "3. disable CUDA graph by --cuda-graph-backend-decode=disabled. (Not recommended. "
            "Huge performance loss)",
        ]
    sol.append("Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose ")
    head = ctx.pick(
        f"Exception: Capture cuda graph failed: {oom}",
        (
            f"RuntimeError: CUDA graph capture failed (out of memory): {oom}",
            f"Exception: cuda graph capture ran out of GPU memory: {oom}",
        ),
    )
    frames = [
        *sg_init_frames(ctx),
        (SG_MR, "initialize", "self.init_cuda_graphs()"),
        (SG_MR, "init_cuda_graphs", "self.cuda_graph_runner = CudaGraphRunner(self)"),
        ("sglang/srt/model_executor/cuda_graph_runner.py", "__init__", "raise Exception("),
    ]
    sg_fail(
        ctx,
        tb(ctx, frames, [head, *sol]),
        ("Capture cuda graph", "cuda_graph", "CudaGraphRunner", head),
    )


FAMILY = Family(
    "cuda_graph_oom",
    3,
    {"vllm": vllm_oom_wrapped(vllm_graph_oom), "sglang": sg_graphs},
    engine_weights=(85, 15, 0),
    eager_ok=False,
)
