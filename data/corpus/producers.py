"""A catalogued message written as its producer writes it: the line prefix style of its
``writes`` (systemd journal lines, kernel lines, Docker daemon logrus lines, Rust tracing
lines, llama.cpp plain lines, Python tracebacks, NCCL's debug lines, the engines' loggers)."""

from __future__ import annotations

from datetime import timedelta

from advisor.parsing.catalog import Message

from .context import Ctx
from .messages import render
from .sglang import sg, sg_raw
from .tgi import tg
from .tracebacks import Frame, tb
from .vllm_lines import model_procs, vlog, vraw

RUST_TARGETS = {
    "candle-vllm": ("vllm_rs::core::engine", "vllm_rs::utils::kvcache_allocator", "vllm_rs"),
}
PY_WRITERS = ("torch", "transformers", "python", "gloo")


def iso(ctx: Ctx, nanos: bool = False) -> str:
    d = ctx.start + timedelta(seconds=ctx.t)
    frac = f"{d.microsecond:06d}" + (f"{ctx.rng.randrange(1000):03d}" if nanos else "")
    return f"{d:%Y-%m-%dT%H:%M:%S}.{frac}Z"


def level_of(msg: Message) -> str:
    if msg.spec.label in (None, "healthy"):
        return "INFO"
    return "ERROR" if msg.spec.label != "wedged_stop" else "WARNING"


def app_line(ctx: Ctx, text: str, key: bool, level: str = "") -> None:
    """One line from the example's main program, in its engine's logger format."""
    level = level or ("ERROR" if key else "INFO")
    if ctx.rec_engine in ("llamacpp", "transformers"):
        ctx.app(text, key)
    elif ctx.rec_engine == "candle-vllm":
        lvl = level
        target = ctx.rng.choice(RUST_TARGETS["candle-vllm"])
        ctx.app(f"{iso(ctx)} {lvl:>5} {target}: {text}", key)
    elif ctx.engine == "vllm":
        vlog(ctx, model_procs(ctx)[0], level, "core.py", text, key)
    elif ctx.engine == "sglang":
        sg(ctx, 0, text, key)
    else:
        tg(ctx, level, "text_generation_launcher", text, key)


def traceback_lines(ctx: Ctx, text: str, frames: list[Frame], key: bool) -> None:
    """An exception line at the end of a traceback through ``frames``."""
    if "Error" not in text.split(":", 1)[0] and "Exception" not in text.split(":", 1)[0]:
        text = f"RuntimeError: {text}"
    lines = tb(ctx, frames, [text]) if frames else [text]
    keys = (text,) if key else ()
    if ctx.rec_engine:
        for ln in lines:
            ctx.app(ln, key and ln == text)
    elif ctx.engine == "vllm":
        vraw(ctx, model_procs(ctx)[0], lines, keys)
    elif ctx.engine == "sglang":
        sg_raw(ctx, lines, keys)
    else:
        for ln in lines:
            ctx.app(ln, key and ln == text)


def nccl_line(ctx: Ctx, text: str, key: bool) -> None:
    p = model_procs(ctx)[0] if ctx.engine == "vllm" else ctx.ec
    tag = f"{ctx.host}:{p.pid}:{p.pid + ctx.rng.randrange(20, 400)} [{p.rank}]"
    if text.startswith("NCCL "):
        ctx.app(f"{tag} {text}", key)
    elif text.startswith(("unhandled", "internal", "invalid", "remote", "NCCL error")):
        traceback_lines(ctx, f"torch.distributed.DistBackendError: {text}", [], key)
    else:
        ctx.app(f"{tag} NCCL WARN {text}", key)


def docker_line(ctx: Ctx, text: str, key: bool) -> None:
    if text.startswith("level="):
        ctx.add("other", f'time="{iso(ctx, True)}" {text}', key, pid=1187, ident="dockerd")
    elif "level=" in text or text.startswith(("Error response", "docker:")):
        ctx.add("other", text, key, pid=ctx.rng.randrange(2000, 90000), ident="docker")
    else:
        lvl = "error" if key else "info"
        esc = text.replace('"', '\\"')
        line = f'time="{iso(ctx, True)}" level={lvl} msg="{esc}"'
        ctx.add("other", line, key, pid=1187, ident="dockerd")
    ctx.needs_sys = True


def emit(
    ctx: Ctx,
    msg: Message,
    key: bool = True,
    facts: dict[str, object] | None = None,
    frames: list[Frame] | None = None,
) -> str:
    """Write ``msg`` into the example as its producer does; the text written."""
    text = render(ctx, msg, facts)
    w = msg.producer.writes
    if w == "systemd":
        ctx.sys(text, key)
        ctx.needs_sys = ctx.needs_sys or key
    elif w == "kernel":
        ctx.kern(text, key)
    elif w == "docker":
        docker_line(ctx, text, key)
    elif w == "nccl":
        nccl_line(ctx, text, key)
    elif w in PY_WRITERS and msg.spec.label not in (None, "healthy"):
        traceback_lines(ctx, text, frames or [], key)
    elif w in ("vllm", "sglang", "tgi") and w == ctx.engine and not ctx.rec_engine:
        engine_line(ctx, msg, text, key)
    else:
        for part in text.split("\n"):
            app_line(ctx, part, key, level_of(msg) if key else "INFO")
    return text


def engine_line(ctx: Ctx, msg: Message, text: str, key: bool) -> None:
    lvl = level_of(msg) if key else "INFO"
    if text.startswith(("Traceback", "  File")) or (": " in text[:40] and "Error" in text[:40]):
        traceback_lines(ctx, text, [], key)
    elif ctx.engine == "vllm":
        file = msg.spec.source.rsplit("/", 1)[-1]
        vlog(ctx, model_procs(ctx)[0], lvl, file, text, key)
    elif ctx.engine == "sglang":
        sg(ctx, 0, text, key)
    else:
        target = "text_generation_router" if msg.spec.source.endswith(".rs") else ""
        tg(ctx, lvl, target or "text_generation_launcher", text, key)
