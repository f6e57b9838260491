"""vLLM serving: request logs, stats lines, access lines and the HTTP server's shutdown."""

from __future__ import annotations

from advisor.sim.texts import (
    HTTP_SHUTDOWN,
    UVICORN_SHUTDOWN_COMPLETE,
    UVICORN_SHUTTING_DOWN,
    UVICORN_WAITING_SHUTDOWN,
    uvicorn_finished,
)

from .catalog import IPS
from .context import Ctx
from .fmt import rid
from .tracebacks import tb
from .vllm_lines import is_v1, model_procs, uv, vlog

PROMPTS = (
    "How do I fix a memory leak in my Node.js service?",
    "Summarize the attached GPU memory report in three bullet points.",
    "What is the capital of Australia?",
    "Write a haiku about cache misses.",
    "Our Redis instance runs out of memory at night, what should we check?",
    "Explain the difference between RAM and VRAM.",
    "I get torch.OutOfMemoryError: CUDA out of memory when fine-tuning, any tips?",
    "Translate 'shared memory' into German.",
    "Generate SQL to find customers with more than 3 orders.",
    "Why does my laptop say 'Not enough memory to complete this operation'?",
    "List five uses of the KV cache in transformers.",
    "Refactor this function to avoid allocating memory in the loop.",
)


def vllm_stats(ctx: Ctx) -> str:
    rng = ctx.rng
    run, wait = rng.randrange(0, 90), rng.choice((0, 0, 0, rng.randrange(1, 40)))
    kv = rng.uniform(0.1, 97.9) if run else 0.0
    pt, gt = rng.uniform(0, 9000) if run else 0.0, rng.uniform(0, 4000) if run else 0.0
    if ctx.reword and ctx.chance(0.3):
        return (
            f"throughput prompt={pt:.1f} tok/s gen={gt:.1f} tok/s running={run} "
            f"waiting={wait} kv_cache_util={kv:.1f}%"
        )
    if not is_v1(ctx):
        return (
            f"Avg prompt throughput: {pt:.1f} tokens/s, Avg generation throughput: {gt:.1f} "
            f"tokens/s, Running: {run} reqs, Swapped: 0 reqs, Pending: {wait} reqs, GPU KV "
            f"cache usage: {kv:.1f}%, CPU KV cache usage: 0.0%."
        )
    body = (
        f"Avg prompt throughput: {pt:.1f} tokens/s, Avg generation throughput: {gt:.1f} "
        f"tokens/s, Running: {run} reqs, Waiting: {wait} reqs, GPU KV cache usage: {kv:.1f}%, "
        f"Prefix cache hit rate: {rng.uniform(0, 80):.1f}%"
    )
    return f"Engine 000: {body}" if ctx.grank >= 10 else body


def access_line(ctx: Ctx, status: str = "200 OK", path: str = "") -> str:
    rng = ctx.rng
    path = path or rng.choice(
        (
            "/v1/chat/completions",
            "/v1/chat/completions",
            "/v1/completions",
            "/health",
            "/metrics",
            "/v1/models",
            "/v1/embeddings",
        )
    )
    meth = "GET" if path in ("/health", "/metrics", "/v1/models") else "POST"
    if rng.random() < 0.04 and status == "200 OK":
        path, meth, status = rng.choice(
            (("/memory/stats", "GET", "404 Not Found"), ("/v1/memory", "POST", "404 Not Found"))
        )
    return (
        f'INFO:     {rng.choice(IPS)}:{rng.randrange(30000, 65000)} - "{meth} {path} '
        f'HTTP/1.1" {status}'
    )


def vllm_serve(ctx: Ctx, n: int) -> None:
    rng = ctx.rng
    api = ctx.api
    for _ in range(n):
        ctx.adv(0.05, 12)
        r = rng.random()
        if r < 0.42:
            uv(ctx, access_line(ctx))
        elif r < 0.70:
            vlog(ctx, api, "INFO", "loggers.py" if is_v1(ctx) else "metrics.py", vllm_stats(ctx))
        elif r < 0.86:
            req = rid(rng)
            if rng.random() < 0.5:
                prompt = rng.choice(PROMPTS)
                vlog(
                    ctx,
                    api,
                    "INFO",
                    "logger.py",
                    f"Received request {req}: prompt: '{prompt}', params: SamplingParams(n=1, "
                    f"temperature={rng.choice((0.0, 0.7, 1.0))}, top_p=1.0, top_k=-1, "
                    f"max_tokens={rng.choice((256, 512, 1024, 4096))}), prompt_token_ids: None, "
                    "lora_request: None.",
                )
            vlog(
                ctx,
                api,
                "INFO",
                "async_llm.py" if is_v1(ctx) else "async_llm_engine.py",
                f"Added request {req}.",
            )
        elif r < 0.93 and not is_v1(ctx):
            vlog(
                ctx,
                model_procs(ctx)[0] if ctx.grank >= 6 else api,
                "WARNING",
                "scheduler.py",
                f"Sequence group {rid(rng)} is preempted by PreemptionMode.RECOMPUTE mode "
                "because there is not enough KV cache space. This can affect the end-to-end "
                "performance. Increase gpu_memory_utilization or tensor_parallel_size to "
                "provide more KV cache memory. total_num_cumulative_preemption="
                f"{rng.randrange(1, 300)}",
            )
        elif r < 0.97:
            vllm_request_error(ctx)
        else:
            uv(ctx, access_line(ctx))


def vllm_request_error(ctx: Ctx) -> None:
    """A request-level error: the server keeps running (healthy)."""
    rng = ctx.rng
    L = ctx.max_len
    asked = L + rng.randrange(10, 9000)
    if ctx.chance(0.5):
        vlog(
            ctx,
            ctx.api,
            "ERROR",
            "serving_chat.py",
            keys=("maximum context length",),
            msg="Error in preprocessing prompt inputs\n"
            + "\n".join(
                tb(
                    ctx,
                    [
                        (
                            "vllm/entrypoints/openai/serving_chat.py",
                            "create_chat_completion",
                            ") = await self._preprocess_chat(",
                        ),
                        (
                            "vllm/entrypoints/openai/serving_engine.py",
                            "_validate_input",
                            "raise ValueError(",
                        ),
                    ],
                    [
                        f"ValueError: This model's maximum context length is {L} tokens. However, "
                        f"you requested {asked} tokens ({asked - 512} in the messages, 512 in the "
                        "completion). Please reduce the length of the messages or completion."
                    ],
                )
            )
            if ctx.chance(0.5)
            else "Error in preprocessing prompt inputs",
        )
    uv(
        ctx,
        access_line(
            ctx,
            rng.choice(("400 Bad Request", "400 Bad Request", "422 Unprocessable Entity")),
            "/v1/chat/completions",
        ),
    )


def vllm_http_shutdown(ctx: Ctx, complete: bool = True) -> None:
    g = ctx.grank
    if g <= 5:
        vlog(ctx, ctx.api, "INFO", "api_server.py", "Gracefully stopping http server")
    elif g <= 20:
        vlog(ctx, ctx.api, "INFO", "launcher.py", HTTP_SHUTDOWN)
    elif g <= 25:
        vlog(
            ctx,
            ctx.api,
            "INFO",
            "launcher.py",
            "[shutdown] API server: shutting down FastAPI HTTP server",
        )
    else:
        vlog(ctx, ctx.api, "INFO", "launcher.py", "[shutdown] API server: shutdown triggered")
        vlog(
            ctx,
            ctx.api,
            "INFO",
            "api_server.py",
            "[shutdown] API server: stopping engine client mode=abort timeout=0s",
        )
        vlog(
            ctx, ctx.ec, "INFO", "core.py", "[shutdown] EngineCore: trigger received signal=SIGTERM"
        )
        if complete:
            vlog(ctx, ctx.ec, "INFO", "core.py", "[shutdown] EngineCore: exiting busy loop")
            vlog(ctx, ctx.api, "INFO", "core_client.py", "[shutdown] MPClient: complete")
            vlog(
                ctx,
                ctx.api,
                "INFO",
                "api_server.py",
                "[shutdown] API server: engine client stopped",
            )
    ctx.adv(0.05, 1)
    uv(ctx, UVICORN_SHUTTING_DOWN)
    if ctx.chance(0.4):
        uv(ctx, "INFO:     Waiting for connections to close. (CTRL+C to force quit)")
    uv(ctx, UVICORN_WAITING_SHUTDOWN)
    if complete:
        uv(ctx, UVICORN_SHUTDOWN_COMPLETE)
        if ctx.chance(0.7):
            uv(ctx, uvicorn_finished(ctx.api.pid))
