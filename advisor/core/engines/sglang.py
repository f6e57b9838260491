"""SGLang (`python -m sglang.launch_server`, the `lmsysorg/sglang` image with that command).

Flags as SGLang's `ServerArgs.add_cli_args` declares them (python/sglang/srt/server_args.py).
Readiness is SGLang's own "The server is fired up and ready to roll!", printed after its
warm-up request (uvicorn's "Application startup complete." comes before the warm-up, so it
is not readiness here). The arguments are echoed as `server_args=ServerArgs(model_path='…',
mem_fraction_static=0.88, …)`.
"""

from __future__ import annotations

from advisor.core.engines.model import Cue, Echo, Engine, Flag, Range, Recognition
from advisor.core.taxonomy import CUDA_GRAPH_OOM, KV_CACHE_OOM, RUNTIME_OOM, WEIGHTS_LOAD_OOM

ENGINE = Engine(
    name="sglang",
    title="SGLang",
    recognition=Recognition(
        programs=(),
        modules=("sglang.launch_server", "sglang"),
        scripts=("/sglang/launch_server.py",),
        images=(),  # lmsysorg/sglang has no engine entry point: its command names it
        log_cues=("server_args=ServerArgs(", "The server is fired up and ready to roll"),
        mentions=("sglang", "SGLang"),
    ),
    ready=(Cue("The server is fired up and ready to roll"),),
    echo=(Echo("server_args=ServerArgs(", r"\b{key}=([^,)]+)"),),
    flags=(
        Flag(
            "--mem-fraction-static",
            "memory_fraction",
            aliases=("--mem_fraction_static",),
            bound=Range(0.5, 0.95, integer=False),
            echo="mem_fraction_static",
            fact="mem_fraction_static",
        ),
        Flag(
            "--context-length",
            "context",
            aliases=("--context_length",),
            bound=Range(1024, 16_777_216),
            echo="context_length",
            fact="max_model_len",
        ),
        Flag(
            "--max-running-requests",
            "concurrency",
            aliases=("--max_running_requests",),
            bound=Range(1, 65536),
            echo="max_running_requests",
            fact="max_num_seqs",
        ),
        Flag(
            "--cuda-graph-max-bs",
            "graph_batch",
            aliases=("--cuda_graph_max_bs",),
            bound=Range(1, 4096),
            echo="cuda_graph_max_bs",
        ),
        Flag(
            "--chunked-prefill-size",
            "prefill",
            aliases=("--chunked_prefill_size",),
            bound=Range(256, 16_777_216),
            echo="chunked_prefill_size",
        ),
        Flag(
            "--tp-size",
            "parallel",
            aliases=("--tp", "--tensor-parallel-size", "--tp_size"),
            bound=Range(1, 64),
            echo="tp_size",
            fact="tensor_parallel_size",
        ),
        Flag("--disable-cuda-graph", "eager", switch=True),
    ),
    remedies={KV_CACHE_OOM: ("sglang_pool", "kv_context")},
    advice={
        CUDA_GRAPH_OOM: "CUDA graph capture ran out of memory: lower {graph_batch} or "
        "{memory_fraction} a little, or {eager}",
        RUNTIME_OOM: "out of memory while serving: lower {concurrency} or {prefill}",
        WEIGHTS_LOAD_OOM: "the weights do not fit at this parallelism: a larger {parallel} "
        "or a quantised model",
        KV_CACHE_OOM: "the KV pool does not fit, and the log states no figures to compute "
        "with: raise {memory_fraction} or lower {context} by hand",
    },
    source="SGLang 0.4.1 and 0.5.x wheels (sglang/srt/server_args.py, entrypoints/http_server.py)",
    eras=(((0, 4), "sglang 0.4"), ((0, 5), "sglang 0.5+")),
    routine=(
        Cue("Decode batch"),  # the scheduler, every few steps
        Cue("Prefill batch"),
        Cue('HTTP/1.1" 200 OK'),  # uvicorn's access log of a request that succeeded
    ),
)
