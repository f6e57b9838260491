"""A fresh example context: engine, version, hardware, unit naming, processes and tuning.

Every draw happens in a fixed order from the example's own ``random.Random``, so the same
seed gives the same context.
"""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime

from .catalog import (
    GPUS,
    HOSTS,
    MODELS,
    SGLANG_VERSIONS,
    SITES,
    TGI_VERSIONS,
    UNITS,
    VGROUPS,
    Gpu,
    Model,
    VGroup,
)
from .context import Ctx, Proc
from .family import ENGINES, Family


def pick_engine(rng: random.Random, family: Family) -> str:
    """The engine of an example: a family with one builder always uses that engine."""
    if len(family.builders) == 1:
        return next(iter(family.builders))
    return rng.choices(ENGINES, weights=family.engine_weights)[0]


def pick_hardware(rng: random.Random, models: tuple[Model, ...]) -> tuple[Model, Gpu, int]:
    """A model and a GPU it fits on, with the tensor-parallel size that makes it fit."""
    while True:
        model, gpu = rng.choice(models), rng.choice(GPUS)
        tp = 1
        while model.gib / tp > gpu.gib * 0.78 and tp < 8:
            tp *= 2
        if model.gib / tp <= gpu.gib * 0.78:
            if tp == 1 and rng.random() < 0.15 and gpu.gib < 100:
                tp = 2
            return model, gpu, tp


def pick_version(
    rng: random.Random, engine: str, family: Family
) -> tuple[VGroup | None, str, str, int]:
    """(vLLM version group, engine version, torch version, year of the logs)."""
    group: VGroup | None = None
    if engine == "vllm":
        group = rng.choice([g for g in VGROUPS if g.rank >= family.min_vllm_rank])
        version = rng.choice(group.versions)
        torch = rng.choice(group.torch)
        year = group.year
    elif engine == "sglang":
        major = rng.choice(("0.4", "0.5", "0.5"))
        version = rng.choice(SGLANG_VERSIONS[major])
        torch = "2.5.1" if major == "0.4" else rng.choice(("2.8.0", "2.9.1"))
        year = 2024 if major == "0.4" else rng.choice((2025, 2026))
    else:
        version = rng.choice(TGI_VERSIONS)
        torch = {"1": "2.1.2", "2": rng.choice(("2.3.0", "2.4.0"))}.get(version[0], "2.6.0")
        year = 2024 if version < "3" else 2025
    return group, version, torch, year


def pick_names(rng: random.Random, engine: str, model: Model) -> tuple[str, str, str]:
    """(unit name without ``.service``, unit description, syslog identifier).

    Each table draws for every engine before one is taken, as the draws are part of the seed's
    sequence.
    """
    unit_base = {
        "vllm": rng.choice(UNITS),
        "sglang": rng.choice(("sglang", "sglang-server", "llm-inference", "sgl-qwen")),
        "tgi": rng.choice(("tgi", "text-generation-inference", "tgi-llama", "llm-inference")),
    }[engine]
    desc = {
        "vllm": rng.choice(
            (
                "vLLM OpenAI server",
                "vLLM Inference Server",
                f"vLLM {model.name.split('/')[-1]}",
                "LLM inference API",
                "OpenAI-compatible model server",
            )
        ),
        "sglang": rng.choice(
            ("SGLang server", "SGLang inference runtime", "LLM inference (SGLang)")
        ),
        "tgi": rng.choice(("Text Generation Inference", "Hugging Face TGI", "LLM inference (TGI)")),
    }[engine]
    ident = {
        "vllm": rng.choice(("vllm", "vllm", "python3", "python", "docker")),
        "sglang": rng.choice(("python3", "python", "sglang", "docker")),
        "tgi": rng.choice(("text-generation-launcher", "text-generation-launcher", "docker")),
    }[engine]
    return unit_base, desc, ident


def new_ctx(rng: random.Random, family: Family) -> Ctx:
    """The context of one example of ``family``."""
    engine = pick_engine(rng, family)
    group, version, torch, year = pick_version(rng, engine, family)
    model, gpu, tp = pick_hardware(rng, MODELS)
    site = rng.choice(SITES)
    py = re.search(r"python(3\.\d+)", site)
    unit_base, desc, ident = pick_names(rng, engine, model)
    sysd = rng.choice((245, 247, 249, 252, 252, 252, 255, 257, 257))
    start = datetime(
        year,
        rng.randrange(1, 13),
        rng.randrange(1, 29),
        rng.randrange(0, 24),
        rng.randrange(0, 60),
        rng.randrange(0, 60),
        tzinfo=UTC,
    )
    reword = rng.random() < family.reword
    ctx = Ctx(
        rng=rng,
        label=family.label,
        engine=engine,
        version=version,
        group=group,
        model=model,
        gpu=gpu,
        tp=tp,
        host=rng.choice(HOSTS),
        unit=f"{unit_base}.service",
        desc=desc,
        ident=ident,
        start=start,
        site=site,
        py=py.group(1) if py else "3.12",
        torch=torch,
        sysd=sysd,
        status_fmt="description"
        if sysd <= 247
        else rng.choice(("combined", "combined", "combined", "description", "name")),
        reword=reword,
        keep_ansi=rng.random() < 0.55,
    )
    v1 = bool(group and group.v1)
    if group and group.rank in (8, 9) and family.v0_ok and rng.random() < 0.12:
        ctx.v0 = True
        v1 = False
    add_processes(ctx, v1)
    tune(ctx, family, v1)
    return ctx


def add_processes(ctx: Ctx, v1: bool) -> None:
    """PIDs of the API server, the engine-core (or V0 engine) process and the workers."""
    rng = ctx.rng
    base = rng.randrange(900, 3_900_000)
    ctx.api = Proc("api", base)
    ctx.ec = Proc("ec" if (v1 or ctx.engine != "vllm") else "engine", base + rng.randrange(40, 200))
    w0 = ctx.ec.pid + rng.randrange(20, 90)
    ctx.workers = [Proc("worker", w0 + r, r) for r in range(ctx.tp)]


def tune(ctx: Ctx, family: Family, v1: bool) -> None:
    """Memory utilisation, lengths, batch sizes, port and engine flags."""
    rng, model, gpu, engine = ctx.rng, ctx.model, ctx.gpu, ctx.engine
    ctx.util = rng.choice((0.9, 0.9, 0.9, 0.85, 0.95, 0.8, 0.97, 0.92, 0.88))
    ctx.max_len = rng.choice((model.ctx, 8192, 16384, 32768, 4096, model.ctx))
    ctx.max_len = min(ctx.max_len, model.ctx)
    big = gpu.gib >= 70 and "A100" not in gpu.name and v1
    ctx.max_seqs = 1024 if big else 256
    ctx.batched = 8192 if big or not v1 else 2048
    ctx.enforce_eager = rng.random() < 0.12 and family.eager_ok
    ctx.port = {
        "vllm": rng.choice((8000, 8000, 8000, 8080, 9000)),
        "sglang": rng.choice((30000, 30000, 8000)),
        "tgi": rng.choice((80, 3000, 8080)),
    }[engine]
    if engine == "sglang":
        ctx.util = rng.choice((0.88, 0.85, 0.9, 0.8, 0.75, 0.7))
        if rng.random() < 0.5:
            ctx.flags.add("ms")
        if rng.random() < 0.4:
            ctx.flags.add("uvts")
    if engine == "tgi":
        ctx.util = rng.choice((1.0, 1.0, 0.9, 0.95))
    ctx.kbase = rng.uniform(1e4, 5e6)
    ctx.cpu_s = rng.uniform(15, 4000)
