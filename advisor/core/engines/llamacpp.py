"""llama.cpp's server (`llama-server`, the `ghcr.io/ggml-org/llama.cpp:server` images).

Flags as common/arg.cpp declares them, with their short forms; each also read from its
`LLAMA_ARG_*` variable when not given (the command line wins). Readiness is
"main: server is listening on http://HOST:PORT - starting the main loop" (tools/server;
"main: listening on http://HOST:PORT" from build b9838).
It echoes no argument list; what it received is read from its command line.
"""

from __future__ import annotations

from advisor.core.engines.model import Cue, Engine, Flag, Range, Recognition
from advisor.core.taxonomy import KV_CACHE_OOM, RUNTIME_OOM, WEIGHTS_LOAD_OOM

ENGINE = Engine(
    name="llamacpp",
    title="llama.cpp server",
    recognition=Recognition(
        programs=("llama-server",),
        words=("llama-server",),
        images=("ghcr.io/ggml-org/llama.cpp", "ghcr.io/ggerganov/llama.cpp"),
        log_cues=("llama_model_loader:", "llama_context:", "load_tensors:"),
    ),
    ready=(
        Cue("server is listening on"),
        Cue("HTTP server listening"),
        Cue("main: listening on"),  # from build b9838
    ),
    flags=(
        Flag(
            "--ctx-size",
            "context",
            aliases=("-c",),
            bound=Range(512, 16_777_216),
            env="LLAMA_ARG_CTX_SIZE",
            fact="max_model_len",
        ),
        Flag(
            "--parallel",
            "concurrency",
            aliases=("-np",),
            bound=Range(1, 256),
            env="LLAMA_ARG_N_PARALLEL",
            fact="max_num_seqs",
        ),
        Flag(
            "--n-gpu-layers",
            "gpu_layers",
            aliases=("-ngl", "--gpu-layers"),
            bound=Range(0, 10_000),
            env="LLAMA_ARG_N_GPU_LAYERS",
        ),
        Flag(
            "--batch-size",
            "batch",
            aliases=("-b",),
            bound=Range(32, 1_048_576),
            env="LLAMA_ARG_BATCH",
        ),
    ),
    remedies={KV_CACHE_OOM: ("llama_context",)},
    advice={
        WEIGHTS_LOAD_OOM: "the model does not fit on the GPU: lower {gpu_layers} (the rest "
        "runs on the CPU) or a smaller quantisation",
        RUNTIME_OOM: "out of memory while serving: lower {concurrency} or {batch}",
        KV_CACHE_OOM: "the KV cache does not fit, and the log states no context size: lower "
        "{context} by hand",
    },
    source="llama.cpp (common/arg.cpp, tools/server/server.cpp, src/llama-context.cpp)",
    # the server's slot bookkeeping for each request, and its idle line; its access log
    # (`log_server_r: request: ...`) is not here: it prints a failed request the same way
    routine=(
        Cue("all slots are idle"),
        Cue("| processing task"),
        Cue("| prompt done"),
        Cue("stop processing"),
        Cue("print_timing:"),
        Cue("prompt eval time ="),
    ),
)
