"""Text Generation Inference (`text-generation-launcher`, the
`ghcr.io/huggingface/text-generation-inference` image whose entry point it is).

Flags as the launcher's clap `Args` declares them (launcher/src/main.rs): each is also read
from its environment variable (`#[clap(long, env)]`: MAX_BATCH_PREFILL_TOKENS, …), the
command line winning. Readiness is the router's "Connected" (its tracing target and source
position before it: `text_generation_router::server: router/src/server.rs:NNNN: Connected`),
and the launcher echoes its arguments as `Args { model_id: "…", max_batch_prefill_tokens:
Some(4096), … }` (Rust's Debug of the struct).
"""

from __future__ import annotations

from advisor.core.engines.model import Cue, Echo, Engine, Flag, Range, Recognition
from advisor.core.taxonomy import KV_CACHE_OOM, RUNTIME_OOM, WEIGHTS_LOAD_OOM

TOKENS = Range(1024, 16_777_216)

ENGINE = Engine(
    name="tgi",
    title="TGI",
    recognition=Recognition(
        programs=("text-generation-launcher", "text-generation-server"),
        words=("text-generation-launcher", "text-generation-server"),
        modules=("text_generation_server",),
        scripts=("/text_generation_server/",),
        images=(
            "ghcr.io/huggingface/text-generation-inference",
            "huggingface/text-generation-inference",
        ),
        log_cues=("text_generation_launcher", "text_generation_router"),
        mentions=("text_generation", "text-generation"),
    ),
    ready=(Cue("Connected", whole=True),),
    echo=(Echo("Args {", r"\b{key}: (?:Some\()?\"?([^,)}\"\s]+)"),),
    flags=(
        Flag(
            "--max-batch-prefill-tokens",
            "prefill",
            bound=Range(512, 16_777_216),
            env="MAX_BATCH_PREFILL_TOKENS",
            echo="max_batch_prefill_tokens",
            fact="max_batch_prefill_tokens",
        ),
        Flag(
            "--max-total-tokens",
            "context",
            bound=TOKENS,
            env="MAX_TOTAL_TOKENS",
            echo="max_total_tokens",
            fact="max_model_len",
        ),
        Flag(
            "--max-input-tokens",
            "input",
            aliases=("--max-input-length",),
            bound=Range(256, 16_777_216),
            env="MAX_INPUT_TOKENS",
            echo="max_input_tokens",
            fact="max_input_tokens",
        ),
        Flag(
            "--cuda-memory-fraction",
            "memory_fraction",
            bound=Range(0.5, 1.0, integer=False),
            env="CUDA_MEMORY_FRACTION",
            echo="cuda_memory_fraction",
        ),
        Flag(
            "--num-shard",
            "parallel",
            bound=Range(1, 64),
            env="NUM_SHARD",
            echo="num_shard",
            fact="tensor_parallel_size",
        ),
    ),
    remedies={KV_CACHE_OOM: ("tgi_prefill",)},
    advice={
        RUNTIME_OOM: "out of memory while serving: lower {prefill} or {context}",
        WEIGHTS_LOAD_OOM: "the weights do not fit on these shards: a larger {parallel} or a "
        "quantised model",
        KV_CACHE_OOM: "the warm-up batch does not fit, and the log states no prefill size to "
        "compute with: lower {prefill} by hand",
    },
    source="TGI 1.x–3.x (launcher/src/main.rs, router/src/server.rs)",
    eras=(((1, 0), "tgi 1-2"), ((3, 0), "tgi 3+")),
    # the router's line for each request that succeeded (`...server.rs:NNN: Success`)
    routine=(Cue(": Success"),),
)
