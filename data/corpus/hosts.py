"""Runs that host a catalogued message: an engine started up to the phase the message belongs
to (vLLM, SGLang, TGI), or a producer of its own (llama.cpp, the Rust vLLM port, a
transformers app behind uvicorn) written from the catalogue's informational messages; and the
tails a label's run ends with."""

from __future__ import annotations

from advisor.parsing.catalog import Message
from advisor.parsing.phases import PHASE_ORDER

from .context import Ctx
from .messages import catalogue, pick_version
from .producers import app_line, emit
from .sglang import sg_init_frames, sg_ready, sg_serve, sg_startup
from .systemd import sd_fail, sd_restart, sd_start
from .tgi import tg_load_frames, tg_ready, tg_serve, tg_startup
from .tracebacks import Frame, model_forward_frames
from .vllm_frames import capture_frames, loader_frames
from .vllm_serve import vllm_serve
from .vllm_startup import vllm_graph_intro, vllm_graphs, vllm_ready, vllm_startup

OWN = ("candle-vllm", "llamacpp", "transformers")
VERSIONS = {
    "candle-vllm": ("0.1.9", "0.5.4", "0.6.2", "0.7.12", "0.8.3", "0.9.8", "0.10.8", "0.11.0"),
    "llamacpp": ("b3600", "b4400", "b5200", "b6100", "b6700"),
    "transformers": ("4.38.2", "4.44.2", "4.46.3", "4.51.3", "4.55.4", "4.57.1"),
    "docker": ("19.03.15", "20.10.24", "23.0.6", "24.0.7", "25.0.5", "27.3.1", "28.3.0"),
    "kernel": ("535.183.01", "550.127.05", "570.86.15", "570.133.20"),
    "systemd": ("219", "229", "237", "239", "245", "247", "249", "252", "255", "257", "259"),
}
NAMES = {
    "candle-vllm": (("vllm-rs", "candle-vllm", "llm-rs"), "Rust vLLM server", "vllm-rs"),
    "llamacpp": (("llama-server", "llamacpp", "llm-gguf"), "llama.cpp server", "llama-server"),
    "transformers": (("hf-api", "generate-api", "model-api"), "transformers API", "python3"),
}
# label → the stage each engine starts up to before the label's failure (vLLM, SGLang, TGI)
STAGES = {
    "weights_loading": ("load", "load", "load"),
    "starting": ("load", "dist", "download"),
    "memory_profiling": ("profile", "pool", "warmup"),
    "kv_cache_allocation": ("kv", "pool", "warmup"),
    "cuda_graph_capture": ("graphs", "graphs", "warmup"),
    "sampler_warmup": ("graphs", "graphs", "warmup"),
    "ready": ("serve", "serve", "serve"),
    "shutdown": ("serve", "serve", "serve"),
}
LABEL_PHASE = {
    "weights_load_oom": "weights_loading",
    "kv_cache_oom": "kv_cache_allocation",
    "cuda_graph_oom": "cuda_graph_capture",
    "sampler_warmup_oom": "sampler_warmup",
    "gpu_memory_held": "starting",
    "healthy": "ready",
    "wedged_stop": "shutdown",
}


def phase_for(msg: Message, label: str) -> str:
    """The phase the example's run reaches: the label's own, else the message's."""
    if label in LABEL_PHASE:
        return LABEL_PHASE[label]
    return msg.spec.phase or "ready"


def be_own(ctx: Ctx, writer: str, msg: Message | None) -> None:
    """Make the example a run of ``writer``'s own server."""
    bases, desc, ident = NAMES[writer]
    ctx.rec_engine = writer
    vs = VERSIONS[writer]
    ctx.rec_version = pick_version(msg, vs, ctx.rng) if msg else ctx.rng.choice(vs)
    ctx.unit, ctx.desc, ctx.ident = f"{ctx.rng.choice(bases)}.service", desc, ident
    ctx.flags.add("short_ok")


def own_prelude(ctx: Ctx, writer: str, phase: str, ready: bool) -> None:
    """The informational lines of ``writer`` up to ``phase``, in phase order."""
    before = PHASE_ORDER.get(phase, 99)
    infos = [
        m
        for m in catalogue()
        if m.producer.writes == writer
        and m.spec.label is None
        and m.spec.phase is not None
        and PHASE_ORDER[m.spec.phase] < before + (1 if ready else 0)
        and m.spec.phase != "shutdown"
    ]
    picked = ctx.rng.sample(infos, min(len(infos), ctx.rng.randrange(3, 8)))
    picked.sort(key=lambda m: PHASE_ORDER[m.spec.phase or "ready"])
    if writer == "transformers":
        app_line(ctx, f"INFO:     Started server process [{ctx.api.pid}]", False)
        app_line(ctx, "INFO:     Waiting for application startup.", False)
    for m in picked:
        ctx.adv(0.2, 8)
        emit(ctx, m, key=False)
    if ready:
        own_ready(ctx, writer)


def own_ready(ctx: Ctx, writer: str) -> None:
    healthy = [m for m in catalogue() if m.producer.writes == writer and m.spec.label == "healthy"]
    if writer == "transformers":
        app_line(ctx, "INFO:     Application startup complete.", False)
        app_line(
            ctx, f"INFO:     Uvicorn running on http://0.0.0.0:{ctx.port} (Press CTRL+C", False
        )
    elif healthy:
        emit(ctx, ctx.rng.choice(healthy), key=False)


def engine_index(ctx: Ctx) -> int:
    return ("vllm", "sglang", "tgi").index(ctx.engine)


def host_run(ctx: Ctx, phase: str) -> None:
    """systemd starts the unit and the engine runs up to ``phase``."""
    sd_start(ctx)
    stage = STAGES.get(phase, STAGES["ready"])[engine_index(ctx)]
    if ctx.engine == "vllm":
        vllm_startup(ctx, "ready" if stage == "serve" else stage)
        if stage == "graphs":
            vllm_graph_intro(ctx)
            if phase == "sampler_warmup":
                vllm_graphs(ctx)
        if stage == "serve":
            vllm_ready(ctx)
            vllm_serve(ctx, ctx.rng.randrange(1, 12))
    elif ctx.engine == "sglang":
        sg_startup(ctx, "ready" if stage == "serve" else stage)
        if stage == "serve":
            sg_ready(ctx)
            sg_serve(ctx, ctx.rng.randrange(1, 12))
    else:
        tg_startup(ctx, "connected" if stage == "serve" else stage)
        if stage == "serve":
            tg_ready(ctx)
            tg_serve(ctx, ctx.rng.randrange(1, 10))
    ctx.adv(0.5, 60)


def frames_for(ctx: Ctx, phase: str) -> list[Frame]:
    """Traceback frames of the phase in the host engine (empty for the own producers)."""
    if ctx.rec_engine in OWN:
        return []
    if ctx.engine == "sglang":
        return sg_init_frames(ctx) if phase != "ready" else []
    if ctx.engine == "tgi":
        return tg_load_frames(ctx) if phase in ("weights_loading", "starting") else []
    if phase in ("weights_loading", "starting"):
        return loader_frames(ctx)
    if phase in ("cuda_graph_capture", "sampler_warmup"):
        return capture_frames(ctx)
    return model_forward_frames(ctx)


def fail_tail(ctx: Ctx, label: str) -> None:
    """How the run ends after the decisive line."""
    if label == "healthy":
        return
    ctx.adv(0.05, 3)
    if label == "wedged_stop":
        if ctx.chance(0.5):
            ctx.sys(f"{ctx.unit}: Failed with result 'timeout'.")
        return
    if ctx.rec_engine == "candle-vllm":
        ctx.app(f"thread 'main' panicked at src/main.rs:{ctx.lineno('panic')}:9:")
        ctx.app("note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace")
        sd_fail(ctx, status="101/n/a")
    else:
        sd_fail(ctx)
    if ctx.chance(0.3):
        sd_restart(ctx)
