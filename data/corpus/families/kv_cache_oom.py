"""kv_cache_oom: no room for the KV cache, or not enough for one request of max length."""

from __future__ import annotations

from advisor.sim.texts import NO_CACHE_BLOCKS

from ..catalog import GIB
from ..context import Ctx
from ..family import Family, vllm_oom_wrapped
from ..sglang import SG_MR, sg_fail, sg_init_frames, sg_startup
from ..systemd import sd_start
from ..tgi import TG_FCL, tg, tg_shutdown_failed, tg_startup
from ..torch_errors import oom_exc_lines, oom_nums
from ..tracebacks import chained, tb
from ..vllm_failures import vllm_exit_after_startup_failure, vllm_startup_failure
from ..vllm_frames import R1, W1, stdlib
from ..vllm_lines import is_v1, vllm_mem_plan
from ..vllm_startup import vllm_kv, vllm_profile, vllm_startup


def kv_sentences(ctx: Ctx, need: float, avail: float, est: int) -> str:
    g, L = ctx.grank, ctx.max_len
    rng = ctx.rng
    if not is_v1(ctx):
        if ctx.chance(0.5) or avail <= 0:
            canon = NO_CACHE_BLOCKS
        else:
            canon = (
                f"ValueError: The model's max seq len ({L}) is larger than the maximum number "
                f"of tokens that can be stored in KV cache ({est}). Try increasing "
                "`gpu_memory_utilization` or decreasing `max_model_len` when initializing "
                "the engine."
            )
    elif avail <= 0 or ctx.chance(0.25):
        canon = NO_CACHE_BLOCKS
        if g >= 33:
            canon = canon[:-1] + (
                " (this flag also controls CPU memory reservation on the CPU "
                "backend, despite its name). See https://docs.vllm.ai/en/latest/"
                "configuration/conserving_memory/ for more details."
            )
    elif g <= 9:
        mid = rng.choice(("", " Based on the available memory,"))
        canon = (
            f"ValueError: To serve at least one request with the models's max seq len ({L}), "
            f"({need:.2f} GiB KV cache is needed, which is larger than the available KV "
            f"cache memory ({avail:.2f} GiB).{mid}  Try increasing `gpu_memory_utilization` "
            "or decreasing `max_model_len` when initializing the engine."
        )
    elif g <= 25:
        mid = rng.choice(
            ("", f"Based on the available memory, the estimated maximum model length is {est}.")
        )
        canon = (
            f"ValueError: To serve at least one request with the models's max seq len ({L}), "
            f"({need:.2f} GiB KV cache is needed, which is larger than the available KV "
            f"cache memory ({avail:.2f} GiB). {mid} Try increasing `gpu_memory_utilization` "
            "or decreasing `max_model_len` when initializing the engine."
        )
    else:
        canon = (
            f"ValueError: To serve at least one request with the model's max seq len ({L}), "
            f"({round(need, 2)} GiB KV cache is needed, which is larger than the available "
            f"KV cache memory ({round(avail, 2)} GiB). Based on the available memory, the "
            f"estimated maximum model length is {est}. Try increasing "
            "`gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or "
            "decreasing `max_model_len` when initializing the engine. See "
            "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more "
            "details."
        )
    return ctx.pick(
        canon,
        (
            "ValueError: insufficient memory for KV cache blocks; increase gpu_memory_utilization",
            f"ValueError: KV cache cannot hold a single request of max_model_len={L}: needs "
            f"{need:.2f} GiB, only {max(avail, 0):.2f} GiB available",
            f"ValueError: Not enough GPU memory for the KV cache: {max(avail, 0):.2f} GiB left "
            f"after weights and activations, {need:.2f} GiB required for max_model_len {L}.",
            "RuntimeError: num_gpu_blocks is 0 - no memory left for the KV cache after loading the "
            "model.",
            f"ValueError: max_model_len ({L}) exceeds the KV cache capacity ({est} tokens). Lower "
            "--max-model-len or raise --gpu-memory-utilization.",
            f"vllm.exceptions.InsufficientKVCacheError: the KV cache pool ({max(avail, 0):.2f} "
            f"GiB) is smaller than one max-length sequence ({need:.2f} GiB).",
        ),
    )


PROFILE_OOM_SHARE = 0.2  # of vLLM's KV-cache failures, an OOM in the memory profiling run


def vllm_profile_oom(ctx: Ctx) -> None:
    """vLLM's memory profiling run (one batch of max_num_batched_tokens after the weights)
    runs out of memory: no KV cache can be sized (phase memory_profiling)."""
    rng = ctx.rng
    ctx.batched = rng.choice((8192, 16384, 32768, 65536))
    vllm_startup(ctx, "profile")
    ctx.adv(0.5, 4)
    exc = oom_exc_lines(ctx, oom_nums(ctx, dev=0))
    if is_v1(ctx):
        wf = [
            (W1, "determine_available_memory", "self.model_runner.profile_run()"),
            (R1, "profile_run", "hidden_states, last_hidden_states = self._dummy_run("),
            (R1, "_dummy_run", "outputs = self.model("),
        ]
    else:  # the engine's frames end in the worker's determine_num_available_blocks
        wf = [
            (
                "vllm/worker/model_runner.py",
                "profile_run",
                "self.execute_model(model_input, kv_caches, intermediate_tensors)",
            ),
            (
                "vllm/worker/model_runner.py",
                "execute_model",
                "hidden_or_intermediate_states = model_executable(",
            ),
        ]
    keys = ("profile_run", "determine_available_memory", "determine_num_available_blocks", exc[0])
    vllm_startup_failure(ctx, "profile", exc, None, None, keys, wf, n_fail=1)
    vllm_exit_after_startup_failure(ctx)


def vllm_kv_oom(ctx: Ctx) -> None:
    rng = ctx.rng
    if ctx.chance(PROFILE_OOM_SHARE):
        vllm_profile_oom(ctx)
        return
    ctx.max_len = rng.choice((32768, 65536, 131072, 131072, 40960, 98304, 200000))
    vllm_startup(ctx, "profile")
    mem = vllm_mem_plan(ctx)
    need = mem["bpt"] * ctx.max_len / GIB
    avail = need * rng.uniform(0.05, 0.85) if ctx.chance(0.8) else -rng.uniform(0.1, 6)
    est = max(int(avail * GIB / mem["bpt"]) // 16 * 16, 0)
    vllm_profile(ctx, kv_gib=avail)
    if not is_v1(ctx) and avail > 0:
        mem["tokens"] = est
        vllm_kv(ctx)
    ctx.adv(0.1, 1)
    exc = [kv_sentences(ctx, need, avail, est)]
    keys = (
        "KV cache",
        "cache blocks",
        "max seq len",
        "check_enough_kv_cache_memory",
        "raise_if_cache_size_invalid",
        "max_model_len",
        exc[0],
    )
    vllm_startup_failure(ctx, "kv", exc, None, None, keys, [], n_fail=1)
    vllm_exit_after_startup_failure(ctx)


def sg_kv(ctx: Ctx) -> None:
    sd_start(ctx)
    sg_startup(ctx, "pool")
    ctx.adv(0.5, 3)
    canon = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
    if ctx.version.startswith("0.5") and ctx.chance(0.6):
        canon = canon[:-1] + f". Current value: mem_fraction_static={ctx.util}"
    exc = ctx.pick(
        canon,
        (
            "RuntimeError: KV cache pool is too small: not enough memory left after loading the "
            "weights. Increase --mem-fraction-static.",
            "RuntimeError: Not enough memory for the KV cache pool (max_total_num_tokens <= 0).",
            f"RuntimeError: insufficient GPU memory to allocate the token pool with "
            f"mem_fraction_static={ctx.util}",
        ),
    )
    pool = (
        "sglang/srt/model_executor/pool_configurator.py" if ctx.version.startswith("0.5") else SG_MR
    )
    frames = [
        *sg_init_frames(ctx),
        (SG_MR, "initialize", "self.init_memory_pool("),
        (
            SG_MR,
            "init_memory_pool",
            "self.max_total_num_tokens = self.profile_max_num_token(total_gpu_memory)"
            if pool != SG_MR
            else "raise RuntimeError(",
        ),
    ]
    if pool != SG_MR:
        frames.append((pool, "configure", "raise RuntimeError("))
    lines = tb(ctx, frames, [exc])
    sg_fail(ctx, lines, ("memory", "init_memory_pool", exc))


def tg_kv(ctx: Ctx) -> None:
    sd_start(ctx)
    ctx.batched = ctx.rng.choice((4096, 8192, 16384, 32768))
    tg_startup(ctx, "warmup")
    ctx.adv(1, 30)
    n = ctx.batched
    msg = ctx.pick(
        f"Not enough memory to handle {n} prefill tokens. You need to decrease "
        "`--max-batch-prefill-tokens`",
        (
            f"Insufficient memory for {n} prefill tokens during warmup; lower "
            "--max-batch-prefill-tokens",
            f"Warmup failed: {n} prefill tokens do not fit in GPU memory. Reduce "
            "`--max-batch-prefill-tokens`.",
        ),
    )
    inner = tb(
        ctx,
        [
            (TG_FCL, "warmup", "_, batch, _ = self.generate_token(batch)"),
            (f"{stdlib(ctx)}/contextlib.py", "inner", "return func(*args, **kwds)"),
            (
                TG_FCL,
                "generate_token",
                "out, speculative_logits = self.forward(batch, adapter_data)",
            ),
        ],
        oom_exc_lines(ctx, oom_nums(ctx)),
    )
    outer = tb(
        ctx,
        [
            (
                "text_generation_server/server.py",
                "Warmup",
                "max_supported_total_tokens = self.model.warmup(batch)",
            ),
            (TG_FCL, "warmup", "raise RuntimeError("),
        ],
        [f"RuntimeError: {msg}"],
    )
    tg(ctx, "ERROR", "text_generation_launcher", "Method Warmup encountered an error.")
    ctx.evs[-1].tag = "tbhead"
    for ln in chained(inner, outer):
        ctx.app(ln, "prefill tokens" in ln or msg in ln, "blank" if not ln else "")
    new = ctx.version >= "2.2"
    router = "text_generation_router_v3::client" if new else "text_generation_client"
    src = "backends/client/src/lib.rs" if new else "router/client/src/lib.rs"
    tg(
        ctx,
        "ERROR",
        f"warmup{{max_input_length={n - 1} max_prefill_tokens={n} max_total_tokens="
        f"{n} max_batch_size=None}}:warmup: {router}",
        f"{src}:{ctx.lineno('srverr')}: Server error: {msg}",
        key=True,
    )
    wrapped = f'Warmup(Generation("{msg}"))'
    ctx.app(f"Error: Backend({wrapped})" if new else f"Error: {wrapped}", key=True)
    tg_shutdown_failed(ctx, "WebserverFailed")


FAMILY = Family(
    "kv_cache_oom",
    1,
    {"vllm": vllm_oom_wrapped(vllm_kv_oom), "sglang": sg_kv, "tgi": tg_kv},
)
