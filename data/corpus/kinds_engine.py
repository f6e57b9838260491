"""New example kinds told by the engines and libraries: vLLM's negative KV-cache budget,
SGLang's negative profiled token count, TGI's failed generation, a transformers app's OOM in
``model.generate``, llama.cpp's allocation failures, NCCL's socket call traces, gloo errors in
SGLang's CUDA-graph capture, non-OOM CUDA errors and a bare OOM in graph capture, and
configuration errors."""

from __future__ import annotations

from .context import Ctx
from .hosts import be_own, fail_tail, frames_for, host_run, own_prelude
from .messages import find
from .producers import app_line, emit, traceback_lines
from .sglang import SG_MR, sg, sg_fail, sg_init_frames
from .systemd import sd_fail, sd_start
from .tgi import tg, tg_load_frames, tg_shard_fail
from .torch_errors import cuda_error_lines, oom_class, oom_message, oom_nums
from .tracebacks import tb
from .vllm_failures import vllm_exit_after_startup_failure, vllm_startup_failure
from .vllm_frames import capture_frames
from .vllm_lines import model_procs, vlog


def vllm_kv_negative(ctx: Ctx) -> None:
    """``Available KV cache memory: -X GiB`` and then only ``EngineCore failed to start``."""
    host_run(ctx, "kv_cache_allocation")
    neg = -ctx.rng.uniform(0.2, 9)
    val = f"{neg:.2f}" if ctx.grank <= 11 else f"{round(neg, 2)}"
    for p in model_procs(ctx):
        vlog(ctx, p, "INFO", "gpu_worker.py", f"Available KV cache memory: {val} GiB", key=True)
    exc = [
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core "
        "proc(s): {}"
    ]
    vllm_startup_failure(ctx, "kv", exc, None, None, ("Available KV cache memory",), [], n_fail=1)
    vllm_exit_after_startup_failure(ctx)


def sglang_profiled_negative(ctx: Ctx) -> None:
    host_run(ctx, "kv_cache_allocation")
    mt = ctx.rng.choice((32768, 65536, 131072, 262144))
    prof = -ctx.rng.randrange(500, 60000)
    sg(
        ctx,
        0,
        f"max_total_tokens={mt} is larger than the profiled value {prof}. Use the profiled value "
        "instead.",
        key=True,
    )
    if ctx.chance(0.6):
        frames = [*sg_init_frames(ctx), (SG_MR, "init_memory_pool", "raise RuntimeError(")]
        exc = ["RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."]
        sg_fail(ctx, tb(ctx, frames, exc), ("profiled value", exc[0]))
    else:
        sd_fail(ctx)


def tgi_request_failed(ctx: Ctx) -> None:
    host_run(ctx, "ready")
    oom = oom_message(ctx, oom_nums(ctx))
    method = ctx.rng.choice(("Prefill", "Decode"))
    tg(ctx, "ERROR", "text_generation_launcher", f"Method {method} encountered an error.")
    frames = [
        (
            "text_generation_server/server.py",
            method,
            "generations, next_batch, timings = self.model.generate_token(batch)",
        )
    ]
    for ln in tb(ctx, frames, [f"{oom_class(ctx)}: {oom}"]):
        ctx.app(ln, "out of memory" in ln)
    tg(
        ctx,
        "ERROR",
        "compat_generate{default_return_full_text=true}:generate_stream:infer:send_error: "
        "text_generation_router::infer",
        f"router/src/infer/mod.rs:{ctx.lineno('senderr')}: Request failed during generation: "
        f"Server error: {oom[:160]}",
        key=True,
    )
    if ctx.chance(0.4):
        tg(ctx, "ERROR", "text_generation_launcher", "Shard 0 crashed")
        sd_fail(ctx)


def transformers_generate_oom(ctx: Ctx) -> None:
    be_own(ctx, "transformers", None)
    sd_start(ctx)
    own_prelude(ctx, "transformers", "ready", ready=True)
    rng = ctx.rng
    for _ in range(rng.randrange(1, 8)):
        ctx.adv(0.5, 60)
        app_line(
            ctx,
            f"INFO:     10.0.3.{rng.randrange(2, 250)}:{rng.randrange(30000, 60000)} - "
            '"POST /generate HTTP/1.1" 200 OK',
            False,
        )
    ctx.adv(1, 600)
    app_line(ctx, "ERROR:    Exception in ASGI application", False)
    frames = [
        (
            "uvicorn/protocols/http/httptools_impl.py",
            "run_asgi",
            "result = await app(  # type: ignore[func-returns-value]",
        ),
        ("starlette/routing.py", "app", "response = await f(request)"),
        (
            "fastapi/routing.py",
            "run_endpoint_function",
            "return await run_in_threadpool(dependant.call, **values)",
        ),
        (
            "/app/server.py",
            "generate",
            "output_ids = model.generate(**inputs, max_new_tokens=req.max_new_tokens)",
        ),
        ("torch/utils/_contextlib.py", "decorate_context", "return func(*args, **kwargs)"),
        ("transformers/generation/utils.py", "generate", "result = self._sample("),
        (
            "transformers/generation/utils.py",
            "_sample",
            "outputs = self(**model_inputs, return_dict=True)",
        ),
        (
            f"transformers/models/{ctx.model.file.split('_')[0]}/modeling_{ctx.model.file.split('_')[0]}.py",
            "forward",
            "logits = self.lm_head(hidden_states[:, slice_indices, :])",
        ),
    ]
    traceback_lines(ctx, f"{oom_class(ctx)}: {oom_message(ctx, oom_nums(ctx))}", frames, True)
    if ctx.chance(0.4):
        app_line(
            ctx,
            f"INFO:     10.0.3.{rng.randrange(2, 250)}:{rng.randrange(30000, 60000)} - "
            '"POST /generate HTTP/1.1" 500 Internal Server Error',
            False,
        )


def _llama(ctx: Ctx, what: str) -> None:
    be_own(ctx, "llamacpp", None)
    sd_start(ctx)
    own_prelude(
        ctx,
        "llamacpp",
        "weights_loading" if what == "model" else "kv_cache_allocation",
        ready=False,
    )
    mib = ctx.rng.uniform(2000, 90000) if what == "model" else ctx.rng.uniform(1000, 40000)
    ctx.app(
        f"ggml_backend_cuda_buffer_type_alloc_buffer: allocating {mib:.2f} MiB on device 0: "
        "cudaMalloc failed: out of memory",
        True,
    )
    if what == "model":
        ctx.app(
            f"alloc_tensor_range: failed to allocate CUDA0 buffer of size {int(mib * 2**20)}", True
        )
        ctx.app("llama_model_load: error loading model: unable to allocate CUDA0 buffer", True)
        ctx.app("llama_model_load_from_file_impl: failed to load model")
        ctx.app("main: exiting due to model loading error")
    else:
        kv = find("llamacpp.kv-cache.alloc-failed")
        if kv:
            emit(ctx, kv[0], key=True)
        else:
            ctx.app("llama_kv_cache_init: failed to allocate buffer for kv cache", True)
        ctx.app(
            "llama_init_from_model: llama_kv_cache_init() failed for self-attention cache", True
        )
        ctx.app("common_init_from_params: failed to create context with model '/models/model.gguf'")
    sd_fail(ctx)


def llama_model_oom(ctx: Ctx) -> None:
    _llama(ctx, "model")


def llama_kv_oom(ctx: Ctx) -> None:
    _llama(ctx, "kv")


def nccl_socket_trace(ctx: Ctx) -> None:
    rng = ctx.rng
    ctx.tp = max(ctx.tp, 2)
    host_run(ctx, "starting")
    p = model_procs(ctx)[0] if ctx.engine == "vllm" else ctx.ec
    tag = f"{ctx.host}:{p.pid}:{p.pid + rng.randrange(20, 400)} [{p.rank}]"
    ip = f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(2, 250)}"
    peer = f"{ip}<{rng.randrange(30000, 60000)}>"
    ctx.app(
        f"{tag} misc/socket.cc:{rng.randrange(480, 620)} NCCL WARN socketStartConnect: Connect to "
        f"{peer} failed : Connection refused",
        True,
    )
    for site in (
        "misc/socket.cc",
        "misc/socket.cc",
        "bootstrap.cc",
        "bootstrap.cc",
        "init.cc",
        "init.cc",
    ):
        if ctx.chance(0.85):
            ctx.app(f"{tag} NCCL INFO {site}:{rng.randrange(60, 1600)} -> 2", True)
    exc = (
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for "
        "details), NCCL version 2.21.5"
    )
    traceback_lines(ctx, exc, frames_for(ctx, "starting")[:2], True)
    fail_tail(ctx, "nccl_error")


def sglang_gloo_capture(ctx: Ctx) -> None:
    rng = ctx.rng
    ctx.tp = max(ctx.tp, 2)
    host_run(ctx, "cuda_graph_capture")
    sg(ctx, 0, "Capture cuda graph begin. This can take up to several minutes.")
    ip = f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(2, 250)}"
    peer = f"[{ip}]:{rng.randrange(30000, 60000)}"
    inner = rng.choice(
        (
            "[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer "
            f"{peer}",
            f"[../third_party/gloo/gloo/transport/tcp/pair.cc:598] Read error {peer}: Connection "
            "reset by peer",
            "[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting "
            "1800000ms for recv operation to complete",
        )
    )
    head = f"Exception: Capture cuda graph failed: {inner}"
    frames = [
        *sg_init_frames(ctx),
        (SG_MR, "init_cuda_graphs", "self.cuda_graph_runner = CudaGraphRunner(self)"),
        ("sglang/srt/model_executor/cuda_graph_runner.py", "__init__", "raise Exception("),
    ]
    sg_fail(ctx, tb(ctx, frames, [head]), ("gloo", head))


def capture_cuda_error(ctx: Ctx) -> None:
    """A non-OOM CUDA error while capturing graphs: other_crash."""
    what = ctx.rng.choice(
        (
            "an illegal memory access was encountered",
            "operation not permitted when stream is capturing",
            "operation failed due to a previous error during capture",
        )
    )
    _capture_error(ctx, cuda_error_lines(ctx, what))


def capture_bare_oom(ctx: Ctx) -> None:
    """``RuntimeError: CUDA error: out of memory`` from torch/cuda/graphs.py capture_end."""
    _capture_error(ctx, cuda_error_lines(ctx, "out of memory"))


def _capture_error(ctx: Ctx, exc: list[str]) -> None:
    host_run(ctx, "cuda_graph_capture")
    frames = capture_frames(ctx) if ctx.engine == "vllm" else []
    frames = [
        *frames,
        ("torch/cuda/graphs.py", "__exit__", "self.cuda_graph.capture_end()"),
        ("torch/cuda/graphs.py", "capture_end", "super().capture_end()"),
    ]
    if ctx.engine == "vllm":
        vllm_startup_failure(
            ctx, "graphs", exc, None, None, ("capture_end", exc[0]), frames, n_fail=1
        )
        vllm_exit_after_startup_failure(ctx)
    else:
        sg_fail(ctx, tb(ctx, [*sg_init_frames(ctx), *frames], exc), ("capture_end", exc[0]))


def config_error(ctx: Ctx) -> None:
    rng = ctx.rng
    if ctx.engine == "tgi":
        sd_start(ctx)
        tg_load_start(ctx)
        heads = rng.choice((40, 28, 52, 14))
        exc = (
            "ValueError: `num_heads` must be divisible by `num_shards` (got `num_heads`: "
            f"{heads} and `num_shards`: {rng.choice((3, 6, 8))}"
        )
        tg_shard_fail(ctx, tb(ctx, tg_load_frames(ctx)[:5], [exc]), ("num_heads", exc))
        return
    host_run(ctx, "starting")
    exc = rng.choice(
        (
            f"ValueError: Total number of attention heads ({rng.choice((40, 28, 14))}) must be "
            f"divisible by tensor parallel size ({rng.choice((3, 6))}).",
            "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least "
            "8.0. Your Tesla T4 GPU has compute capability 7.5. You can use float16 instead by "
            "explicitly setting the `dtype` flag in CLI, for example: --dtype=half.",
            f"ValueError: User-specified max_model_len ({rng.choice((200000, 262144))}) is "
            f"greater than the derived max_model_len (max_position_embeddings={ctx.model.ctx} in "
            "model's config.json).",
            "ValueError: The model's config.json does not contain any of the following keys to "
            "determine the original maximum length of the model: ['max_position_embeddings', "
            "'n_positions']",
        )
    )
    traceback_lines(ctx, exc, frames_for(ctx, "starting")[:3], True)
    fail_tail(ctx, "other_crash")


def tg_load_start(ctx: Ctx) -> None:
    from .tgi import tg_startup

    tg_startup(ctx, "load")
