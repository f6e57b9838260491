"""Startup phases and readiness: which phase of a server's start a line says the run has
reached, and which engine a line comes from."""

from __future__ import annotations

from typing import Final

from advisor.core.engines import ALL
from advisor.core.engines import READY_CUES as REGISTRY_READY
from advisor.core.taxonomy import PHASES

__all__ = ["PHASE_CUES", "PHASE_ORDER", "READY_CUES", "engine_hint", "phase_of"]

PHASE_ORDER: Final = {name: i for i, name in enumerate(PHASES)}


# (phase, cues): the first cue found in a line says the run has reached that phase.
# What a server prints once it is ready to serve (vLLM and SGLang through uvicorn, SGLang's own
# line, TGI's router): readiness of a run here, and of a restart in the executor.
# The engines' readiness lines, as the engine registry has them (`advisor.core.engines`): a
# cue found anywhere in a line's body; one that must be the whole body (TGI's router
# `Connected`, after its tracing header) is matched for its engine's lines only.
READY_CUES: Final = tuple(c.text for c in REGISTRY_READY if not c.whole)
_READY_LINES: Final = {
    (engine.name, cue.text) for engine in ALL for cue in engine.ready if cue.whole
}
PHASE_CUES: Final = (
    (
        "weights_loading",
        (
            "Starting to load model",
            "Loading safetensors checkpoint shards",
            "Loading pt checkpoint shards",
            "checkpoint shards",
            "Load weight begin",
            "Loading weights",
            "Loading model weights",
            "Init torch distributed",
            "Starting shard",
            "Downloading model",
        ),
    ),
    (
        "memory_profiling",
        (
            "Model loading took",
            "Loading model weights took",
            "Load weight end",
            "Memory profiling",
            "Loading weights took",
        ),
    ),
    (
        "kv_cache_allocation",
        (
            "Available KV cache memory",
            "KV cache size:",
            "# GPU blocks",
            "# cuda blocks",
            "max_total_num_tokens=",
            "KV cache is needed",
            "Maximum concurrency for",
        ),
    ),
    (
        "cuda_graph_capture",
        (
            # SGLang's KV pool is allocated by then: what it does next is capture graphs.
            "Memory pool end",
            "Capturing CUDA graph",
            "Capturing cudagraphs",
            "Capture cuda graph",
            "Capturing the model for CUDA graphs",
            "Capture CUDA graph",
        ),
    ),
    (
        "sampler_warmup",
        (
            "Graph capturing finished",
            "Capture cuda graph end",
            "warming up sampler",
            "Cudagraph is disabled",
        ),
    ),
    (
        "ready",
        (
            *READY_CUES,
            # Only a serving engine dies this way (a starting one "failed to start").
            "EngineCore encountered a fatal error",
            "died unexpectedly",
        ),
    ),
    (
        "shutdown",
        (
            "Shutting down FastAPI HTTP server",
            "[shutdown] API server",
            "Application shutdown complete",
            "Waiting for application shutdown",
            "Engine is gracefully shutting down",
            "Gracefully stopping",
            "Finished server process",
            "Received sigterm",
            "Shutting down shards",
            "Terminating shard",
            "Received SIGTERM",
        ),
    ),
)


def phase_of(body: str, engine: str | None) -> str | None:
    for phase, cues in PHASE_CUES:
        for cue in cues:
            if cue in body:
                return phase
    if engine is not None and (engine, body) in _READY_LINES:
        return "ready"
    return None


# What names an engine in a line that carries none of its prefixes (the registry's).
ENGINE_CUES: Final = tuple(
    (engine.name, engine.recognition.mentions) for engine in ALL if engine.recognition.mentions
)


def engine_hint(body: str) -> str | None:
    for engine, cues in ENGINE_CUES:
        if any(cue in body for cue in cues):
            return engine
    return None
