"""weights_load_oom: a CUDA OOM while loading the model's weights."""

from __future__ import annotations

from ..catalog import MODELS
from ..context import Ctx
from ..family import Family, vllm_oom_wrapped
from ..fmt import tqdm_line
from ..sglang import SG_MR, sg_fail, sg_init_frames, sg_startup
from ..systemd import sd_start
from ..tgi import tg_load_frames, tg_shard_fail, tg_startup
from ..torch_errors import oom_exc_lines, oom_nums
from ..tracebacks import tb
from ..vllm_failures import vllm_exit_after_startup_failure, vllm_startup_failure
from ..vllm_frames import R1, W1, loader_frames
from ..vllm_lines import is_v1
from ..vllm_startup import vllm_dist_init, vllm_load, vllm_prelude


def vllm_weights_oom(ctx: Ctx) -> None:
    rng = ctx.rng
    # weights that do not fit: big model on few GPUs
    big = [m for m in MODELS if m.gib / ctx.tp > ctx.gpu.gib * 0.7]
    if big and ctx.chance(0.7):
        ctx.model = rng.choice(big)
    vllm_prelude(ctx)
    vllm_dist_init(ctx)
    vllm_load(ctx, fail_after=rng.randrange(0, 6))
    ctx.adv(0.2, 3)
    nums = oom_nums(ctx, dev=0)
    exc = oom_exc_lines(ctx, nums)
    wf = loader_frames(ctx)
    if is_v1(ctx):
        wf = [
            (W1, "load_model", "self.model_runner.load_model()"),
            (R1, "load_model", "self.model = model_loader.load_model("),
            *wf,
        ]
        if ctx.tp == 1:
            ex = (
                "vllm/executor/uniproc_executor.py"
                if ctx.grank <= 11
                else "vllm/v1/executor/uniproc_executor.py"
            )
            wf = [(ex, "_init_executor", 'self.collective_rpc("load_model")'), *wf[:]]
    keys = (
        "load_model",
        "load_weights",
        "initialize_model",
        "create_weights",
        "weight_loader",
        "process_weights_after_loading",
        "Starting to load model",
        exc[0],
    )
    vllm_startup_failure(
        ctx, "load", exc, None, None, keys, wf, n_fail=rng.randrange(1, ctx.tp + 1)
    )
    vllm_exit_after_startup_failure(ctx)


def sg_weights(ctx: Ctx) -> None:
    sd_start(ctx)
    sg_startup(ctx, "load")
    for i in range(ctx.rng.randrange(0, 3)):
        ctx.app(tqdm_line("Loading safetensors checkpoint shards", i, 8, 3.1, True), tag="tqdm")
        ctx.adv(3)
    exc = oom_exc_lines(ctx, oom_nums(ctx))
    frames = [
        *sg_init_frames(ctx),
        (SG_MR, "initialize", "self.load_model()"),
        (SG_MR, "load_model", "self.model = get_model("),
        ("sglang/srt/model_loader/__init__.py", "get_model", "return loader.load_model("),
        (
            "sglang/srt/model_loader/loader.py",
            "load_model",
            "model.load_weights(self._get_all_weights(model_config, model))",
        ),
        (
            f"sglang/srt/models/{ctx.model.file}.py",
            "load_weights",
            "weight_loader(param, loaded_weight, shard_id)",
        ),
    ]
    sg_fail(ctx, tb(ctx, frames, exc), ("load_model", "load_weights", exc[0]))


def tg_weights(ctx: Ctx) -> None:
    sd_start(ctx)
    tg_startup(ctx, "load")
    exc = oom_exc_lines(ctx, oom_nums(ctx))
    tg_shard_fail(
        ctx,
        tb(ctx, tg_load_frames(ctx), exc),
        ("get_model", "model_class", "get_sharded", "get_tensor", exc[0]),
    )


FAMILY = Family(
    "weights_load_oom",
    2,
    {"vllm": vllm_oom_wrapped(vllm_weights_oom), "sglang": sg_weights, "tgi": tg_weights},
)
