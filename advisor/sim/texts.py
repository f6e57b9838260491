"""The exact sentences inference servers and their libraries write, held once.

The simulated server, the benchmark journal, the sample journal and the training corpus all
print these; the diagnosis rules match them. Numbers are passed in already formatted, since
versions differ in how they format them (``14.99`` vs ``15.0``, ``32768`` vs ``32,768``).

Stdlib only, and nothing of advisor's: the server process and the data generators import it.
"""

from __future__ import annotations

from typing import Final

# uvicorn, which serves vLLM's and SGLang's OpenAI API; lines as it logs them to stderr.
UVICORN_WAITING: Final = "INFO:     Waiting for application startup."
READY_SENTENCE: Final = "Application startup complete."
UVICORN_READY: Final = f"INFO:     {READY_SENTENCE}"
UVICORN_SHUTTING_DOWN: Final = "INFO:     Shutting down"
UVICORN_WAITING_SHUTDOWN: Final = "INFO:     Waiting for application shutdown."
UVICORN_SHUTDOWN_COMPLETE: Final = "INFO:     Application shutdown complete."


def uvicorn_started(pid: int) -> str:
    """uvicorn's first line, with the API server's PID."""
    return f"INFO:     Started server process [{pid}]"


def uvicorn_finished(pid: int) -> str:
    """uvicorn's last line, with the API server's PID."""
    return f"INFO:     Finished server process [{pid}]"


# vLLM: the API server's shutdown, the V1 engine core's start-up failure.
HTTP_SHUTDOWN: Final = "Shutting down FastAPI HTTP server."
ENGINE_CORE_FAILED: Final = "EngineCore failed to start."
ENGINE_INIT_FAILED: Final = "RuntimeError: Engine core initialization failed. See root cause above."


def engine_init_failed(failed: str) -> str:
    """The API server's error when engine cores died, naming them (vLLM 0.9 on)."""
    return f"{ENGINE_INIT_FAILED} Failed core proc(s): {failed}"


# vLLM start-up progress lines (the worker's and the engine core's logger).
def loading_weights_took(seconds: str) -> str:
    return f"Loading weights took {seconds} seconds"


def available_kv_memory(gib: str) -> str:
    return f"Available KV cache memory: {gib} GiB"


def kv_cache_size(tokens: str) -> str:
    return f"GPU KV cache size: {tokens} tokens"


def max_concurrency(tokens: str, times: str) -> str:
    return f"Maximum concurrency for {tokens} tokens per request: {times}x"


def graphs_captured(seconds: str, gib: str) -> str:
    """CUDA graph capture done (vLLM 0.6 on; 0.5 stops after ``secs.``)."""
    return f"Graph capturing finished in {seconds} secs, took {gib} GiB"


def engine_init_took(seconds: str) -> str:
    return f"init engine (profile, create kv cache, warmup model) took {seconds} seconds"


# vLLM's start-up errors.
NO_CACHE_BLOCKS: Final = (
    "ValueError: No available memory for the cache blocks. Try increasing "
    "`gpu_memory_utilization` when initializing the engine."
)


def sampler_warmup_oom(dummy_requests: int, what: str = "sampler") -> str:
    """vLLM V1's RuntimeError when the sampler (or a pooling model's pooler) warm-up runs out
    of memory."""
    return (
        f"RuntimeError: CUDA out of memory occurred when warming up {what} with "
        f"{dummy_requests} dummy requests. Please try lowering `max_num_seqs` or "
        "`gpu_memory_utilization` when initializing the engine."
    )


# torch's caching allocator, torch 2.x: the hint closing its OutOfMemoryError.
TORCH_OOM_HINT: Final = (
    "If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
    "fragmentation."
)
TORCH_DOCS: Final = "https://pytorch.org/docs/stable/notes/cuda.html#environment-variables"


def torch_oom_tail(link: str = TORCH_DOCS) -> str:
    """The hint and the documentation pointer that end torch's OutOfMemoryError."""
    return f"{TORCH_OOM_HINT}  See documentation for Memory Management  ({link})"
