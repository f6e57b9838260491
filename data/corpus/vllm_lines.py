"""vLLM's line formats: process tags, logger prefixes per version, raw and traceback lines."""

from __future__ import annotations

import zlib

from .catalog import GIB, RESET
from .context import Ctx, Proc

RAY_SHARE = 6  # one multi-GPU host in this many runs its workers as Ray actors


def pname(ctx: Ctx, p: Proc) -> str | None:
    """The ``(Name pid=N)`` tag a vLLM version writes for a process, or None for no tag.

    V0 tags only its worker processes (``VllmWorkerProcess``). V1 tags workers
    ``VllmWorker rank=N`` (0.8, 0.9), ``VllmWorker TPn`` (0.10), ``Worker_TPn`` (0.11 on); the
    engine core ``EngineCore_0`` (0.10), ``EngineCore_DP0`` (0.11 on), ``EngineCore`` (0.20 on);
    and the API server ``APIServer`` from 0.10 on.
    """
    g = ctx.grank
    if p.role == "api":
        return "APIServer" if g >= 10 else None
    if p.role == "engine":
        return None
    if p.role == "ec":
        if g >= 20:
            return "EngineCore"
        if g >= 11:
            return "EngineCore_DP0"
        return "EngineCore_0" if g == 10 else None
    if ctx.v0 or not (ctx.group and ctx.group.v1):
        return "VllmWorkerProcess" if p.rank > 0 else None
    if g <= 9:
        return f"VllmWorker rank={p.rank}"
    if g == 10:
        return f"VllmWorker TP{p.rank}"
    return f"Worker_TP{p.rank}"


def vprefix(ctx: Ctx, p: Proc, raw: bool) -> str:
    assert ctx.group is not None
    if ctx.group.fmt == "inner" and raw:
        return ""
    name = pname(ctx, p)
    if name is None:
        return ""
    tag = f"({name} pid={p.pid})"
    ray = ray_ip(ctx) if p.role == "worker" else None
    if ray is not None:  # Ray's actor prefix, which the worker's own lines are printed under
        tag = f"(RayWorkerWrapper pid={p.pid}, ip={ray})"
    if ctx.group.ansi and ctx.keep_ansi and ctx.group.fmt != "inner":
        return f"{ctx.group.ansi}{tag}{RESET} "
    return tag + " "


def vlog(
    ctx: Ctx,
    p: Proc,
    level: str,
    file: str,
    msg: str,
    key: bool = False,
    keys: tuple[str, ...] = (),
) -> None:
    """A vLLM logger record; multi-line records repeat the full prefix on every line."""
    assert ctx.group is not None
    ts = ctx.now().strftime("%m-%d %H:%M:%S")
    site = f"{file}:{ctx.lineno(file + ':' + msg[:24])}"
    head = f"{level} {ts} {site}] " if ctx.group.fmt == "plain" else f"{level} {ts} [{site}] "
    pre = vprefix(ctx, p, raw=False)
    for part in msg.split("\n"):
        k = key or any(s in part for s in keys)
        ctx.app((pre + head + part).rstrip(), k, "tbhead" if _is_tb_head(part) else "")


def _is_tb_head(part: str) -> bool:
    return part.startswith(
        (
            "Traceback (most recent call last)",
            "EngineCore failed to start",
            "WorkerProc hit an exception",
            "Exception in worker",
            "EngineCore encountered a fatal error",
            "Process EngineCore",
            "Process SpawnProcess",
            "Engine background task failed",
            "Scheduler hit an exception",
            "Error in model execution",
        )
    )


def vraw(
    ctx: Ctx, p: Proc, lines: list[str], keys: tuple[str, ...] = (), key_all: bool = False
) -> None:
    """Lines a vLLM process writes to stderr itself (tracebacks, uvicorn, tqdm)."""
    pre = vprefix(ctx, p, raw=True)
    for line in lines:
        k = key_all or any(s in line for s in keys)
        tag = "tbhead" if _is_tb_head(line) else ("blank" if not line else "")
        ctx.app((pre + line).rstrip() if line else pre.rstrip(), k, tag)


def vtb(
    ctx: Ctx,
    p: Proc,
    header: str,
    file: str,
    lines: list[str],
    keys: tuple[str, ...],
    via_logger: bool = True,
) -> None:
    """A traceback either logged with ``logger.exception`` (prefix on every line) or printed
    raw to stderr."""
    if via_logger:
        vlog(
            ctx,
            p,
            "ERROR",
            file,
            "\n".join([header, *lines]) if header else "\n".join(lines),
            keys=keys,
        )
    else:
        vraw(ctx, p, [header, *lines] if header else lines, keys)


def model_procs(ctx: Ctx) -> list[Proc]:
    """The processes that hold a model shard, rank 0 first."""
    if ctx.group and ctx.group.v1 and not ctx.v0:
        return ctx.workers if ctx.tp > 1 else [ctx.ec]
    return [ctx.ec, *ctx.workers[1:]]


def uv(ctx: Ctx, text: str, key: bool = False) -> None:
    """uvicorn's default-format lines, written by the API server to stderr."""
    vraw(ctx, ctx.api, [text], key_all=key)


def vllm_mem_plan(ctx: Ctx) -> dict[str, float]:
    if ctx.mem:
        return ctx.mem
    rng = ctx.rng
    w = ctx.model.gib / ctx.tp
    budget = ctx.gpu.gib * ctx.util
    act = rng.uniform(0.4, 4.5)
    nontorch = rng.uniform(0.15, 1.6)
    kv = max(budget - w - act - nontorch, rng.uniform(0.5, 3.0))
    kvh = max(1, ctx.model.kv_heads // ctx.tp)
    bpt = ctx.model.layers * kvh * ctx.model.head_dim * 2 * 2
    tokens = int(kv * GIB / bpt) // 16 * 16
    ctx.mem = {
        "w": w,
        "act": act,
        "nontorch": nontorch,
        "kv": kv,
        "tokens": tokens,
        "bpt": bpt,
        "budget": budget,
        "secs": rng.uniform(4, 140),
    }
    return ctx.mem


def is_v1(ctx: Ctx) -> bool:
    return bool(ctx.group and ctx.group.v1 and not ctx.v0)


def ray_ip(ctx: Ctx) -> str | None:
    """The worker node's address when this multi-GPU host runs its workers through Ray
    (decided by the host's name, so that no draw of the generator moves), else None."""
    if ctx.tp < 2:
        return None
    h = zlib.crc32(ctx.host.encode())
    if h % RAY_SHARE:
        return None
    return f"10.{h >> 8 & 0xFF}.{h >> 16 & 0xFF}.{(h >> 24 & 0xFD) + 2}"
