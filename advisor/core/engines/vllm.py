"""vLLM (`vllm serve`, `python -m vllm.entrypoints.openai.api_server`, the `vllm/vllm-openai`
image).

Flags as vLLM's `EngineArgs` declares them (vllm/engine/arg_utils.py); its argument parser
also takes each long option with underscores (`--max_num_seqs`), and argparse takes an
unambiguous prefix (the engine's own advice prints `--kv-cache-memory=N` for
`--kv-cache-memory-bytes`). Readiness is uvicorn's (vLLM's API server runs on it):
"Application startup complete." then "Uvicorn running on …". The arguments are echoed as
`non-default args: {'max_num_seqs': 256, …}` (vllm/entrypoints/utils.py, 0.10+) or, before,
`args: Namespace(max_num_seqs=256, …)` (vllm/entrypoints/openai/api_server.py).
"""

from __future__ import annotations

from advisor.core.engines.model import Cue, Echo, Engine, Flag, Range, Recognition
from advisor.core.taxonomy import (
    CUDA_GRAPH_OOM,
    KV_CACHE_OOM,
    RUNTIME_OOM,
    SAMPLER_WARMUP_OOM,
    WEIGHTS_LOAD_OOM,
)

TOKENS = Range(1024, 16_777_216)

ENGINE = Engine(
    name="vllm",
    title="vLLM",
    recognition=Recognition(
        programs=("vllm",),
        serve=("vllm",),
        modules=("vllm.entrypoints",),
        scripts=("/vllm/entrypoints/",),
        images=("vllm/vllm-openai", "vllm/vllm-openai-rocm", "rocm/vllm"),
        log_cues=("vLLM API server version", "Starting vLLM API server", "non-default args:"),
        mentions=("vLLM", "vllm"),
    ),
    ready=(Cue("Application startup complete"), Cue("Uvicorn running on")),
    echo=(
        Echo("non-default args:", r"'{key}': ([^,}]+)"),
        Echo("args: Namespace(", r"\b{key}=([^,)]+)"),
    ),
    flags=(
        Flag(
            "--max-num-seqs",
            "concurrency",
            aliases=("--max_num_seqs",),
            bound=Range(1, 65536),
            echo="max_num_seqs",
            fact="max_num_seqs",
        ),
        Flag(
            "--max-model-len",
            "context",
            aliases=("--max_model_len",),
            bound=TOKENS,
            echo="max_model_len",
            fact="max_model_len",
        ),
        Flag(
            "--gpu-memory-utilization",
            "memory_fraction",
            aliases=("--gpu_memory_utilization",),
            bound=Range(0.5, 0.98, integer=False),
            echo="gpu_memory_utilization",
            fact="gpu_memory_utilization",
        ),
        Flag(
            "--kv-cache-memory-bytes",
            "kv_bytes",
            aliases=("--kv-cache-memory", "--kv_cache_memory_bytes", "--kv_cache_memory"),
            bound=Range(2**28, 2**44),
            echo="kv_cache_memory_bytes",
            fact="kv_cache_memory_bytes",
        ),
        Flag(
            "--max-num-batched-tokens",
            "prefill",
            aliases=("--max_num_batched_tokens",),
            bound=Range(512, 16_777_216),
            echo="max_num_batched_tokens",
            fact="max_num_batched_tokens",
        ),
        Flag(
            "--tensor-parallel-size",
            "parallel",
            aliases=("-tp", "--tensor_parallel_size"),
            bound=Range(1, 64),
            echo="tensor_parallel_size",
            fact="tensor_parallel_size",
        ),
        Flag("--enforce-eager", "eager", aliases=("--enforce_eager",), switch=True),
    ),
    remedies={
        SAMPLER_WARMUP_OOM: ("sampler",),
        KV_CACHE_OOM: (
            "kv_profile_batch",
            "kv_context",
            "kv_memory_fraction",
            "kv_suggested",
            "kv_parallel",
        ),
    },
    advice={
        WEIGHTS_LOAD_OOM: "the weights do not fit at this parallelism: a larger {parallel} "
        "or a quantised model",
        CUDA_GRAPH_OOM: "CUDA graph capture ran out of memory: lower {memory_fraction} a "
        "little, or {eager}",
        RUNTIME_OOM: "out of memory while serving: lower {concurrency} or {prefill}",
        KV_CACHE_OOM: "KV cache does not fit, and the log states no capacity to compute a "
        "length from: lower {context} (or {prefill}, when the memory profiling run itself "
        "ran out) or raise {memory_fraction} by hand",
        SAMPLER_WARMUP_OOM: "sampler warm-up ran out of memory but the log states no usable "
        "max_num_seqs or dummy request count: lower {concurrency} by hand",
    },
    source="vLLM 0.5–0.33 (released wheels)",
    eras=(
        ((0, 5), "vllm 0.5-0.6"),
        ((0, 7), "vllm 0.7-0.9"),
        ((0, 10), "vllm 0.10-0.11"),
        ((0, 15), "vllm 0.15-0.20"),
        ((0, 25), "vllm 0.25+"),
    ),
    # the periodic throughput line (metrics.py, later loggers.py), the request logger, and
    # uvicorn's access log of a request that succeeded
    routine=(
        Cue("Avg prompt throughput:"),
        Cue("Received request"),
        Cue("Added request"),
        Cue("Finished request"),
        Cue('HTTP/1.1" 200 OK'),
    ),
)
