"""vLLM's start-up, phase by phase: arguments, config, weights, compile, profiling, KV cache,
CUDA graphs and the API server's readiness."""

from __future__ import annotations

from advisor.sim.texts import (
    UVICORN_READY,
    UVICORN_WAITING,
    available_kv_memory,
    engine_init_took,
    graphs_captured,
    kv_cache_size,
    loading_weights_took,
    max_concurrency,
    uvicorn_started,
)

from .context import Ctx
from .fmt import hexs, thousands, tqdm_line
from .vllm_lines import model_procs, uv, vllm_mem_plan, vlog, vraw


def vllm_args(ctx: Ctx) -> str:
    m = ctx.model.name
    if ctx.grank <= 8:
        return (
            f"args: Namespace(subparser='serve', model_tag='{m}', config='', host=None, "
            f"port={ctx.port}, uvicorn_log_level='info', allow_credentials=False, "
            "allowed_origins=['*'], api_key=None, lora_modules=None, chat_template=None, "
            f"response_role='assistant', model='{m}', tokenizer=None, "
            f"trust_remote_code={ctx.chance(0.3)}, download_dir=None, load_format='auto', "
            f"dtype='auto', max_model_len={ctx.max_len}, "
            f"tensor_parallel_size={ctx.tp}, pipeline_parallel_size=1, "
            f"gpu_memory_utilization={ctx.util}, max_num_seqs={ctx.max_seqs}, "
            f"enforce_eager={ctx.enforce_eager}, disable_log_requests=False, "
            "disable_log_stats=False, dispatch_function=<function serve at 0x7f3c2a1b5e40>)"
        )
    d = {
        "model_tag": m,
        "host": "0.0.0.0",
        "port": ctx.port,
        "model": m,
        "max_model_len": ctx.max_len,
    }
    if ctx.tp > 1:
        d["tensor_parallel_size"] = ctx.tp
    if ctx.util != 0.9:
        d["gpu_memory_utilization"] = ctx.util
    if ctx.enforce_eager:
        d["enforce_eager"] = True
    if ctx.max_seqs not in (256, 1024):
        d["max_num_seqs"] = ctx.max_seqs
    return f"non-default args: {d!r}"


def engine_config_line(ctx: Ctx) -> str:
    m = ctx.model.name
    fields = (
        f"model='{m}', speculative_config=None, tokenizer='{m}', "
        "skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, "
        "trust_remote_code=False, dtype=torch.bfloat16, "
        f"max_seq_len={ctx.max_len}, download_dir=None, load_format=auto, "
        f"tensor_parallel_size={ctx.tp}, pipeline_parallel_size=1, "
        "disable_custom_all_reduce=False, quantization=None, "
        f"enforce_eager={ctx.enforce_eager}, kv_cache_dtype=auto, device_config=cuda, "
        f"seed=0, served_model_name={m}, enable_prefix_caching={ctx.grank >= 8}"
    )
    if ctx.grank <= 5:
        return f"Initializing an LLM engine (v{ctx.version}) with config: {fields}"
    if ctx.v0 or not ctx.group or not ctx.group.v1:
        word = "a V0" if ctx.grank >= 8 else "an"
        return (
            f"Initializing {word} LLM engine (v{ctx.version}) with config: {fields}, "
            "use_cached_outputs=True, "
        )
    return f"Initializing a V1 LLM engine (v{ctx.version}) with config: {fields}"


def vllm_logo(ctx: Ctx) -> str:
    return "\n".join(
        [
            "       █     █     █▄   ▄█",
            f" ▄▄ ▄█ █     █     █ ▀▄▀ █  version {ctx.version}",
            f"  █▄█▀ █     █     █     █  model   {ctx.model.name}",
            "   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀",
        ]
    )


def vllm_prelude(ctx: Ctx) -> None:
    api, g = ctx.api, ctx.grank
    if g >= 8:
        vlog(ctx, api, "INFO", "__init__.py", "Automatically detected platform cuda.")
    ctx.adv(0.5, 3)
    if g >= 15 and ctx.chance(0.6):
        vlog(ctx, api, "INFO", "utils.py", vllm_logo(ctx))
    elif g >= 15:
        vlog(
            ctx,
            api,
            "INFO",
            "api_server.py",
            f"vLLM server version {ctx.version}, serving model {ctx.model.name}",
        )
    else:
        vlog(ctx, api, "INFO", "api_server.py", f"vLLM API server version {ctx.version}")
    vlog(ctx, api, "INFO", "utils.py" if g >= 9 else "api_server.py", vllm_args(ctx))
    ctx.adv(1, 6)
    if g >= 10:
        vlog(ctx, api, "INFO", "model.py", f"Resolved architecture: {ctx.model.arch}")
        vlog(ctx, api, "INFO", "model.py", f"Using max model len {ctx.max_len}")
    if ctx.v0 and g >= 8:
        vlog(
            ctx,
            api,
            "WARNING",
            "arg_utils.py",
            "Chunked prefill is not supported by the V1 Engine. Falling back to V0. ",
        )
    if g >= 6 and ctx.chance(0.7):
        vlog(
            ctx,
            api,
            "INFO",
            "config.py" if g < 11 else "scheduler.py",
            f"Chunked prefill is enabled with max_num_batched_tokens={ctx.batched}.",
        )
    if ctx.chance(0.25):
        vlog(
            ctx,
            api,
            "WARNING",
            "cuda.py" if g >= 8 else "config.py",
            ctx.rng.choice(
                (
                    "To see benefits of async output processing, enable CUDA graph. Since, "
                    "enforce-eager is enabled, async output processor cannot be used",
                    "Your GPU does not have native support for FP8 computation but FP8 "
                    "quantization is being used. Weight-only FP8 compression will be used "
                    "leveraging the Marlin kernel. This may degrade performance for compute-heavy "
                    "workloads.",
                    "Default sampling parameters have been overridden by the model's Hugging Face "
                    "generation config recommended from the model creator. If this is not "
                    "intended, please relaunch vLLM instance with `--generation-config vllm`.",
                    "Casting torch.bfloat16 to torch.float16.",
                )
            ),
        )
    ctx.adv(0.5, 4)
    owner = ctx.ec if (ctx.group and ctx.group.v1 and not ctx.v0) else ctx.api
    vlog(
        ctx,
        owner,
        "INFO",
        "core.py" if owner is ctx.ec else "llm_engine.py",
        engine_config_line(ctx),
    )


def vllm_dist_init(ctx: Ctx) -> None:
    if ctx.tp <= 1:
        return
    procs = model_procs(ctx)
    ctx.adv(1, 5)
    nccl = ctx.rng.choice(("2.20.5", "2.21.5", "2.26.2", "2.27.3", "2.28.9"))
    for p in procs:
        if ctx.chance(0.6):
            vlog(ctx, p, "INFO", "utils.py", "Found nccl from library libnccl.so.2")
        vlog(ctx, p, "INFO", "pynccl.py", f"vLLM is using nccl=={nccl}")
    if ctx.chance(0.4):
        ranks = ",".join(str(i) for i in range(ctx.tp))
        vlog(
            ctx,
            procs[0],
            "INFO",
            "custom_all_reduce_utils.py",
            "reading GPU P2P access cache from /root/.cache/vllm/"
            f"gpu_p2p_access_cache_for_{ranks}.json",
        )
    if ctx.chance(0.3):
        vlog(
            ctx,
            procs[0],
            "WARNING",
            "custom_all_reduce.py",
            "Custom allreduce is disabled because it's not supported on more than two PCIe-only "
            "GPUs. To silence this warning, specify disable_custom_all_reduce=True explicitly.",
        )
    if ctx.chance(0.5):
        readers = list(range(1, ctx.tp))
        vlog(
            ctx,
            procs[0],
            "INFO",
            "shm_broadcast.py",
            "vLLM message queue communication handle: Handle(connect_ip='127.0.0.1', "
            f"local_reader_ranks={readers}, buffer_handle=({ctx.tp - 1}, 4194304, 6, "
            f"'psm_{hexs(ctx.rng, 8)}'), local_subscribe_port={ctx.rng.randrange(30000, 60000)}"
            ", remote_subscribe_port=None)",
        )
    if ctx.grank >= 10 and ctx.chance(0.6):
        for p in procs:
            vlog(
                ctx,
                p,
                "INFO",
                "parallel_state.py",
                f"rank {p.rank} in world size {ctx.tp} is assigned as DP rank 0, PP rank 0, "
                f"TP rank {p.rank}, EP rank {p.rank}",
            )


def vllm_load(ctx: Ctx, fail_after: int | None = None) -> None:
    """Weights: backend line, ``Starting to load model``, shard progress, ``Model loading took``.
    With ``fail_after`` the shard bar stops after that many shards (the failure follows)."""
    procs, g = model_procs(ctx), ctx.grank
    ctx.adv(1, 6)
    backend = ctx.rng.choice(("Flash Attention", "FlashInfer", "XFormers", "FLASH_ATTN"))
    for p in procs:
        if g >= 8:
            vlog(
                ctx,
                p,
                "INFO",
                "gpu_model_runner.py" if not ctx.v0 else "model_runner.py",
                f"Starting to load model {ctx.model.name}...",
            )
        if ctx.chance(0.5):
            suffix = " on V1 engine." if (g >= 8 and not ctx.v0) else "."
            vlog(
                ctx,
                p,
                "INFO",
                "cuda.py" if g >= 8 else "selector.py",
                f"Using {backend} backend{suffix}",
            )
    ctx.adv(0.5, 3)
    shards = ctx.rng.choice((1, 2, 4, 4, 5, 7, 8, 14, 17, 30))
    show = ctx.chance(0.75) and shards > 1
    per = ctx.rng.uniform(0.6, 12)
    stop = shards if fail_after is None else min(fail_after, shards - 1)
    if show:
        for i in range(stop + 1):
            if i in (0, stop) or shards <= 8 or ctx.chance(0.35):
                vraw(
                    ctx,
                    procs[0],
                    [tqdm_line("Loading safetensors checkpoint shards", i, shards, per, True)],
                )
                ctx.evs[-1].tag = "tqdm"
            ctx.adv(per * 0.8, per * 1.2)
    else:
        ctx.adv(per * stop)
    if fail_after is not None:
        return
    mem = vllm_mem_plan(ctx)
    for p in procs:
        took = mem["secs"] * ctx.rng.uniform(0.97, 1.03)
        if g >= 8:
            vlog(
                ctx,
                p,
                "INFO",
                "default_loader.py" if g >= 10 else "loader.py",
                loading_weights_took(f"{took * 0.92:.2f}"),
            )
        w = mem["w"] * ctx.rng.uniform(0.995, 1.005)
        if g <= 7 or (ctx.v0 and g <= 9):
            vlog(ctx, p, "INFO", "model_runner.py", f"Loading model weights took {w:.4f} GB")
        elif g <= 11:
            vlog(
                ctx,
                p,
                "INFO",
                "gpu_model_runner.py",
                f"Model loading took {w:.4f} GiB and {took:.6f} seconds",
            )
        else:
            vlog(
                ctx,
                p,
                "INFO",
                "gpu_model_runner.py",
                f"Model loading took {round(w, 2)} GiB memory and {took:.6f} seconds",
            )
        ctx.adv(0, 0.4)


def vllm_compile(ctx: Ctx) -> None:
    if ctx.v0 or ctx.grank < 8 or ctx.enforce_eager or ctx.chance(0.3):
        return
    p = model_procs(ctx)[0]
    h = hexs(ctx.rng, 10)
    vlog(
        ctx,
        p,
        "INFO",
        "backends.py",
        f"Using cache directory: /root/.cache/vllm/torch_compile_cache/{h}/rank_0_0/backbone "
        "for vLLM's torch.compile",
    )
    ctx.adv(3, 12)
    vlog(
        ctx,
        p,
        "INFO",
        "backends.py",
        f"Dynamo bytecode transform time: {ctx.rng.uniform(2, 14):.2f} s",
    )
    ctx.adv(5, 40)
    vlog(
        ctx,
        p,
        "INFO",
        "backends.py",
        f"Compiling a graph for dynamic shape takes {ctx.rng.uniform(5, 45):.2f} s",
    )
    vlog(
        ctx,
        p,
        "INFO",
        "monitor.py",
        f"torch.compile takes {ctx.rng.uniform(10, 60):.2f} s in total",
    )


def vllm_profile(ctx: Ctx, kv_gib: float | None = None) -> None:
    mem = vllm_mem_plan(ctx)
    kv = mem["kv"] if kv_gib is None else kv_gib
    g = ctx.grank
    ctx.adv(1, 8)
    if ctx.v0 or (ctx.group and not ctx.group.v1):
        if g >= 6:
            budget = ctx.gpu.gib * ctx.util
            vlog(
                ctx,
                model_procs(ctx)[0],
                "INFO",
                "worker.py",
                "\n".join(
                    [
                        f"Memory profiling takes {ctx.rng.uniform(0.3, 9):.2f} seconds",
                        "the current vLLM instance can use total_gpu_memory "
                        f"({ctx.gpu.gib:.2f}GiB) x gpu_memory_utilization ({ctx.util:.2f}) = "
                        f"{budget:.2f}GiB",
                        f"model weights take {mem['w']:.2f}GiB; non_torch_memory takes "
                        f"{mem['nontorch']:.2f}GiB; PyTorch activation peak memory takes "
                        f"{mem['act']:.2f}GiB; the rest of the memory reserved for KV Cache is "
                        f"{kv:.2f}GiB.",
                    ]
                ),
            )
        return
    if g >= 10:
        for p in model_procs(ctx):
            val = f"{kv:.2f}" if g <= 11 else f"{round(kv, 2)}"
            vlog(ctx, p, "INFO", "gpu_worker.py", available_kv_memory(val))


def vllm_kv(ctx: Ctx) -> None:
    mem = vllm_mem_plan(ctx)
    tokens = int(mem["tokens"])
    blocks = tokens // 16
    conc = tokens / ctx.max_len
    g = ctx.grank
    if ctx.v0 or (ctx.group and not ctx.group.v1):
        dev = "GPU" if g <= 6 else "cuda"
        vlog(
            ctx,
            ctx.api if g <= 5 else model_procs(ctx)[0],
            "INFO",
            "distributed_gpu_executor.py" if g <= 6 else "executor_base.py",
            f"# {dev} blocks: {blocks}, # CPU blocks: {ctx.rng.randrange(2000, 22000)}",
        )
        if g >= 6:
            vlog(
                ctx,
                model_procs(ctx)[0],
                "INFO",
                "executor_base.py",
                max_concurrency(str(ctx.max_len), f"{conc:.2f}"),
            )
        return
    if g >= 33:
        vlog(
            ctx,
            ctx.ec,
            "INFO",
            "kv_cache_utils.py",
            f"{kv_cache_size(thousands(tokens))}, "
            f"{max_concurrency(thousands(ctx.max_len), f'{conc:.2f}')}",
        )
    else:
        vlog(ctx, ctx.ec, "INFO", "kv_cache_utils.py", kv_cache_size(thousands(tokens)))
        vlog(
            ctx,
            ctx.ec,
            "INFO",
            "kv_cache_utils.py",
            max_concurrency(thousands(ctx.max_len), f"{conc:.2f}"),
        )


def graph_desc(ctx: Ctx) -> tuple[str, int]:
    if ctx.grank >= 10 and not ctx.v0:
        mode = ctx.rng.choice(("mixed prefill-decode, PIECEWISE", "decode, FULL"))
        return f"Capturing CUDA graphs ({mode})", ctx.rng.choice((35, 51, 67, 83))
    return "Capturing CUDA graph shapes", ctx.rng.choice((35, 67))


def vllm_graph_intro(ctx: Ctx) -> None:
    p, g = model_procs(ctx)[0], ctx.grank
    if g <= 5:
        vlog(
            ctx,
            p,
            "INFO",
            "model_runner.py",
            "Capturing the model for CUDA graphs. This may lead to unexpected consequences if "
            "the model is not static. To run the model in eager mode, set 'enforce_eager=True' "
            "or use '--enforce-eager' in the CLI.",
        )
        vlog(
            ctx,
            p,
            "INFO",
            "model_runner.py",
            "CUDA graphs can take additional 1~3 GiB memory per GPU. If you are running out of "
            "memory, consider decreasing `gpu_memory_utilization` or enforcing eager mode. You "
            "can also reduce the `max_num_seqs` as needed to decrease memory usage.",
        )
    elif ctx.v0 or (ctx.group and not ctx.group.v1):
        vlog(
            ctx,
            p,
            "INFO",
            "model_runner.py",
            "Capturing cudagraphs for decoding. This may lead to unexpected consequences if the "
            "model is not static. To run the model in eager mode, set 'enforce_eager=True' or "
            "use '--enforce-eager' in the CLI. If out-of-memory error occurs during cudagraph "
            "capture, consider decreasing `gpu_memory_utilization` or switching to eager mode. "
            "You can also reduce the `max_num_seqs` as needed to decrease memory usage.",
        )


def vllm_graphs(ctx: Ctx) -> None:
    g = ctx.grank
    p = model_procs(ctx)[0]
    if ctx.enforce_eager:
        if g >= 10:
            vlog(ctx, p, "INFO", "gpu_model_runner.py", "Cudagraph is disabled under eager mode")
        return
    vllm_graph_intro(ctx)
    secs = ctx.rng.uniform(1, 40)
    if g >= 6:
        desc, total = graph_desc(ctx)
        vraw(ctx, p, [tqdm_line(desc, total, total, secs / total, False)])
        ctx.evs[-1].tag = "tqdm"
    ctx.adv(secs)
    for q in model_procs(ctx):
        if g <= 5:
            vlog(ctx, q, "INFO", "model_runner.py", f"Graph capturing finished in {secs:.0f} secs.")
        else:
            vlog(
                ctx,
                q,
                "INFO",
                "gpu_model_runner.py" if g >= 8 and not ctx.v0 else "model_runner.py",
                graphs_captured(f"{secs:.0f}", f"{ctx.rng.uniform(0.1, 3.2):.2f}"),
            )


def vllm_init_done(ctx: Ctx) -> None:
    g = ctx.grank
    ctx.adv(0.2, 2)
    if g >= 6:
        owner = ctx.ec if (ctx.group and ctx.group.v1 and not ctx.v0) else ctx.api
        vlog(
            ctx,
            owner,
            "INFO",
            "core.py" if owner is ctx.ec else "llm_engine.py",
            engine_init_took(f"{ctx.rng.uniform(3, 180):.2f}"),
        )
    if g >= 10:
        blocks = int(vllm_mem_plan(ctx)["tokens"]) // 16
        vlog(
            ctx,
            ctx.api,
            "INFO",
            "loggers.py",
            f"Engine 000: vllm cache_config_info with initialization after num_gpu_blocks is: "
            f"{blocks}",
        )


ROUTES = (
    "/openapi.json",
    "/docs",
    "/health",
    "/tokenize",
    "/detokenize",
    "/v1/models",
    "/version",
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/embeddings",
    "/metrics",
    "/ping",
    "/invocations",
    "/v1/responses",
    "/load",
)


def vllm_ready(ctx: Ctx, key: bool = False) -> None:
    api, g = ctx.api, ctx.grank
    ctx.adv(0.2, 2)
    if g >= 10:
        vlog(ctx, api, "INFO", "api_server.py", "Supported_tasks: ['generate']")
    url = f"http://0.0.0.0:{ctx.port}"
    if g >= 33:
        vlog(ctx, api, "INFO", "api_server.py", f"Starting vLLM server on {url}")
    elif g >= 10:
        vlog(ctx, api, "INFO", "api_server.py", f"Starting vLLM API server 0 on {url}")
    elif g >= 8:
        vlog(ctx, api, "INFO", "api_server.py", f"Starting vLLM API server on {url}")
    if ctx.chance(0.5):
        vlog(ctx, api, "INFO", "launcher.py", "Available routes are:")
        for r in ctx.rng.sample(ROUTES, ctx.rng.randrange(3, 9)):
            meth = (
                "POST"
                if r.startswith(("/v1/c", "/v1/e", "/tok", "/detok", "/inv", "/v1/r"))
                else "GET, HEAD"
                if r in ("/openapi.json", "/docs")
                else "GET"
            )
            vlog(ctx, api, "INFO", "launcher.py", f"Route: {r}, Methods: {meth}")
    uv(ctx, uvicorn_started(api.pid))
    uv(ctx, UVICORN_WAITING)
    uv(ctx, UVICORN_READY, key)
    if ctx.chance(0.5):
        uv(ctx, f"INFO:     Uvicorn running on {url} (Press CTRL+C to quit)")


def vllm_startup(ctx: Ctx, upto: str) -> None:
    """Every phase before ``upto`` (load, profile, kv, graphs, done, ready)."""
    order = ("prelude", "load", "profile", "kv", "graphs", "done", "ready", "serve")
    stop = order.index(upto)
    vllm_prelude(ctx)
    vllm_dist_init(ctx)
    if stop > order.index("load"):
        vllm_load(ctx)
        vllm_compile(ctx)
    if stop > order.index("profile"):
        vllm_profile(ctx)
    if stop > order.index("kv"):
        vllm_kv(ctx)
    if stop > order.index("graphs"):
        vllm_graphs(ctx)
    if stop > order.index("done"):
        vllm_init_done(ctx)
    if stop > order.index("ready"):
        vllm_ready(ctx)
