"""Text Generation Inference's launcher lines, start-up, serving and shard failures."""

from __future__ import annotations

from .context import Ctx
from .systemd import sd_fail, sd_restart
from .tracebacks import Frame, tb


def tg(ctx: Ctx, level: str, target: str, msg: str, key: bool = False) -> None:
    ts = ctx.now().strftime("%Y-%m-%dT%H:%M:%S") + f".{int((ctx.t % 1) * 1e6):06d}Z"
    ctx.app(f"{ts} {level:>5} {target}: {msg}", key)


def tg_startup(ctx: Ctx, upto: str) -> None:
    rng = ctx.rng
    new = ctx.version >= "2.2"
    prefill = ctx.batched
    tg(
        ctx,
        "INFO",
        "text_generation_launcher",
        f'Args {{ model_id: "{ctx.model.name}", revision: None, validation_workers: 2, '
        f"sharded: {'Some(true)' if ctx.tp > 1 else 'None'}, num_shard: "
        f"{f'Some({ctx.tp})' if ctx.tp > 1 else 'None'}, quantize: None, speculate: None, "
        "dtype: None, trust_remote_code: false, max_concurrent_requests: 128, max_best_of: 2, "
        "max_stop_sequences: 4, max_top_n_tokens: 5, max_input_tokens: None, max_input_length: "
        f"None, max_total_tokens: None, waiting_served_ratio: 0.3, max_batch_prefill_tokens: "
        f"Some({prefill}), max_batch_total_tokens: None, max_waiting_tokens: 20, max_batch_size: "
        f'None, cuda_graphs: None, hostname: "{ctx.host}", port: {ctx.port}, shard_uds_path: '
        '"/tmp/text-generation-server", master_addr: "localhost", master_port: 29500, '
        'huggingface_hub_cache: Some("/data"), weights_cache_override: None, '
        f"disable_custom_kernels: false, cuda_memory_fraction: {ctx.util}, json_output: false }}",
    )
    if new and ctx.chance(0.6):
        tg(
            ctx,
            "INFO",
            "text_generation_launcher",
            f"Model supports up to {ctx.model.ctx} but tgi will now set its default to 4096 "
            "instead. This is to save VRAM by refusing large prompts in order to allow more users "
            "on the same hardware. You can increase that size using `--max-batch-prefill-tokens="
            f"{ctx.model.ctx + 50} --max-total-tokens={ctx.model.ctx} --max-input-tokens="
            f"{ctx.model.ctx - 1}`.",
        )
    if ctx.chance(0.5):
        tg(
            ctx,
            "INFO",
            "text_generation_launcher",
            "Using default cuda graphs [1, 2, 4, 8, 16, 32]",
        )
    tg(
        ctx,
        "INFO",
        "download: text_generation_launcher",
        f"Starting check and download process for {ctx.model.name}",
    )
    ctx.adv(2, 60)
    if upto == "download":
        return
    tg(
        ctx,
        "INFO",
        "download: text_generation_launcher",
        f"Successfully downloaded weights for {ctx.model.name}",
    )
    for r in range(ctx.tp):
        tg(ctx, "INFO", "shard-manager: text_generation_launcher", f"Starting shard rank={r}")
    if new and ctx.chance(0.5):
        tg(ctx, "INFO", "text_generation_launcher", "Using prefix caching = True")
        attn = rng.choice(("flashinfer", "flashdecoding"))
        tg(ctx, "INFO", "text_generation_launcher", f"Using Attention = {attn}")
    ctx.adv(5, 30)
    for r in range(ctx.tp):
        tg(
            ctx,
            "INFO",
            "shard-manager: text_generation_launcher",
            f"Waiting for shard to be ready... rank={r}",
        )
    if upto == "load":
        return
    ctx.adv(5, 60)
    for r in range(ctx.tp):
        tg(
            ctx,
            "INFO",
            "text_generation_launcher",
            f"Server started at unix:///tmp/text-generation-server-{r}",
        )
        tg(
            ctx,
            "INFO",
            "shard-manager: text_generation_launcher",
            f"Shard ready in {rng.uniform(8, 200):.2f}s rank={r}",
        )
    tg(ctx, "INFO", "text_generation_launcher", "Starting Webserver")
    router = "text_generation_router_v3" if new else "text_generation_router"
    src = "backends/v3/src/lib.rs" if new else "router/src/main.rs"
    tg(ctx, "INFO", router, f"{src}:{ctx.lineno('warm' + src)}: Warming up model")
    if upto == "warmup":
        return
    if ctx.chance(0.6):
        tg(
            ctx,
            "INFO",
            "text_generation_launcher",
            "Cuda Graphs are enabled for sizes [32, 16, 8, 4, 2, 1]",
        )
    blocks = rng.randrange(2000, 90000)
    if new:
        tg(ctx, "INFO", "text_generation_launcher", f"KV-cache blocks: {blocks}, size: 1")
    tg(
        ctx,
        "INFO",
        router,
        f"{src}:{ctx.lineno('set' + src)}: Setting max batch total tokens to "
        f"{blocks * (1 if new else 16)}",
    )
    tg(
        ctx,
        "INFO",
        "text_generation_router::server",
        f"router/src/server.rs:{ctx.lineno('hfapi')}: Using the Hugging Face API",
    )
    if upto == "connected":
        return
    tg_ready(ctx)


def tg_ready(ctx: Ctx, key: bool = False) -> None:
    tg(
        ctx,
        "INFO",
        "text_generation_router::server",
        f"router/src/server.rs:{ctx.lineno('connected')}: Connected",
        key,
    )


def tg_serve(ctx: Ctx, n: int) -> None:
    rng = ctx.rng
    for _ in range(n):
        ctx.adv(0.05, 20)
        span = rng.choice(("chat_completions", "generate_stream", "compat_generate", "generate"))
        tot = rng.uniform(0.05, 30)
        tg(
            ctx,
            "INFO",
            f"{span}{{parameters=GenerateParameters {{ best_of: None, temperature: "
            f"Some({rng.choice((0.7, 1.0, 0.2))}), repetition_penalty: None, "
            f"max_new_tokens: Some({rng.choice((256, 512, 1024))}), ... }} "
            f'total_time="{tot:.6f}s" validation_time="{rng.uniform(0.1, 3):.6f}ms" '
            f'queue_time="{rng.uniform(30, 900):.3f}µs" inference_time='
            f'"{tot * 0.99:.6f}s" time_per_token="{rng.uniform(8, 60):.6f}ms" '
            'seed="None"}',
            f"text_generation_router::server: router/src/server.rs:{ctx.lineno('ok')}: Success",
        )
        if rng.random() < 0.08:
            tg(
                ctx,
                "ERROR",
                "chat_completions:async_stream:generate_stream: text_generation_router::infer",
                f"router/src/infer/mod.rs:{ctx.lineno('inputerr')}: `inputs` tokens + "
                f"`max_new_tokens` must be <= 4096. Given: {rng.randrange(3600, 9000)} `inputs` "
                f"tokens and {rng.choice((512, 1024))} `max_new_tokens`",
            )


def tg_shard_tb(
    ctx: Ctx, method: str, frames: list[Frame], exc: list[str], keys: tuple[str, ...]
) -> None:
    tg(ctx, "ERROR", "text_generation_launcher", f"Method {method} encountered an error.")
    ctx.evs[-1].tag = "tbhead"
    for ln in tb(
        ctx,
        [("text_generation_server/interceptor.py", "intercept", "return await response"), *frames],
        exc,
    ):
        ctx.app(ln, any(k in ln for k in keys), "blank" if not ln else "")


def tg_shutdown_failed(ctx: Ctx, err: str) -> None:
    ctx.adv(0.05, 2)
    if err == "WebserverFailed":
        tg(ctx, "ERROR", "text_generation_launcher", "Webserver Crashed")
    tg(ctx, "INFO", "text_generation_launcher", "Shutting down shards")
    for r in range(ctx.tp):
        if ctx.chance(0.7):
            tg(
                ctx,
                "INFO",
                "shard-manager: text_generation_launcher",
                f"Terminating shard rank={r}",
            )
            tg(
                ctx,
                "INFO",
                "shard-manager: text_generation_launcher",
                f"Waiting for shard to gracefully shutdown rank={r}",
            )
            tg(ctx, "INFO", "shard-manager: text_generation_launcher", f"shard terminated rank={r}")
    ctx.app(f"Error: {err}")
    sd_fail(ctx)
    if ctx.chance(0.35):
        sd_restart(ctx)


TG_FCL = "text_generation_server/models/flash_causal_lm.py"


def tg_load_frames(ctx: Ctx) -> list[Frame]:
    return [
        ("text_generation_server/cli.py", "serve", "server.serve("),
        (
            "text_generation_server/server.py",
            "serve_inner",
            "model = get_model_with_lora_adapters(",
        ),
        ("text_generation_server/models/__init__.py", "get_model", "return FlashCausalLM("),
        (TG_FCL, "__init__", "model = model_class(prefix, config, weights)"),
        (
            "text_generation_server/models/custom_modeling/flash_llama_modeling.py",
            "__init__",
            "self.model = FlashLlamaModel(prefix, config, weights)",
        ),
        (
            "text_generation_server/layers/linear.py"
            if ctx.chance(0.5)
            else "text_generation_server/utils/weights.py",
            "get_sharded" if ctx.chance(0.5) else "get_tensor",
            "tensor = tensor.to(device=self.device)",
        ),
    ]


def tg_shard_fail(ctx: Ctx, lines: list[str], keys: tuple[str, ...], rank: int = 0) -> None:
    tg(
        ctx,
        "ERROR",
        "shard-manager: text_generation_launcher",
        f"Shard complete standard error output:\n\n{lines[0]}".split("\n")[0],
    )
    ctx.evs[-1].tag = "tbhead"
    for ln in ["", *lines]:
        ctx.app(ln, any(k in ln for k in keys), "blank" if not ln else "")
    ctx.app(f" rank={rank}")
    tg(ctx, "ERROR", "text_generation_launcher", f"Shard {rank} failed to start")
    tg_shutdown_failed(ctx, "ShardCannotStart")
