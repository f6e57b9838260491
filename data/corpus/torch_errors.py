"""torch's error texts: the caching allocator's OOM message and ``CUDA error: …``."""

from __future__ import annotations

from dataclasses import dataclass

from advisor.sim.texts import TORCH_DOCS, torch_oom_tail

from .catalog import GIB
from .context import Ctx
from .fmt import fsize, gib


def torch_minor(tv: str) -> int:
    return int(tv.split(".")[1])


def oom_class(ctx: Ctx) -> str:
    cls = "torch.cuda.OutOfMemoryError" if torch_minor(ctx.torch) < 4 else "torch.OutOfMemoryError"
    if ctx.reword and ctx.chance(0.35):
        return ctx.rng.choice(
            (
                "torch.cuda.OutOfMemoryError",
                "RuntimeError",
                "OutOfMemoryError",
                "torch.OutOfMemoryError",
                "torch.AcceleratorOutOfMemoryError",
            )
        )
    return cls


@dataclass
class OomNums:
    tried: float
    dev: int
    total: float
    free: float
    this: float
    alloc: float
    unalloc: float
    private: float = 0.0
    others: tuple[tuple[int, float], ...] = ()


def oom_nums(
    ctx: Ctx, dev: int = 0, private: bool = False, others: tuple[tuple[int, float], ...] = ()
) -> OomNums:
    rng = ctx.rng
    total = gib(ctx.gpu.gib)
    free = rng.choice((rng.uniform(2, 900) * 1024**2, rng.uniform(0.05, 1.9) * GIB))
    held = sum(b for _, b in others)
    this = max(total - free - held - rng.uniform(0.3, 0.6) * GIB, GIB)
    alloc = this * rng.uniform(0.82, 0.99)
    unalloc = max(this - alloc - rng.uniform(0.1, 0.5) * GIB, rng.uniform(2, 300) * 1024**2)
    tried = rng.choice((rng.uniform(20, 999) * 1024**2, rng.uniform(1.0, 12.0) * GIB))
    tried = max(tried, free * rng.uniform(1.05, 3.0))
    pools = rng.uniform(0.2, 3.5) * GIB if private else 0.0
    return OomNums(tried, dev, total, free, this, alloc, unalloc, pools, others)


def oom_message(ctx: Ctx, n: OomNums) -> str:
    """The caching allocator's OOM text as ``ctx.torch`` prints it (torch 2.x: capacity, free,
    per-process use, allocated vs reserved, private pools from 2.4, the fragmentation hint), or
    a paraphrase when rewording."""
    minor = torch_minor(ctx.torch)
    if ctx.reword:
        return ctx.rng.choice(
            (
                f"CUDA OOM: failed to allocate {fsize(n.tried)} on device {n.dev} "
                f"({fsize(n.free)} free of {fsize(n.total)})",
                f"CUDA out of memory: requested {fsize(n.tried)} but GPU {n.dev} only has "
                f"{fsize(n.free)} free (capacity {fsize(n.total)}); {fsize(n.alloc)} held by the "
                "caching allocator.",
                f"out of device memory while allocating {fsize(n.tried)} "
                f"(GPU {n.dev}: {fsize(n.free)} free / {fsize(n.total)} total)",
                f"Allocation of {fsize(n.tried)} failed on cuda:{n.dev}: device memory exhausted "
                f"({fsize(n.free)} available). Set "
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to reduce fragmentation.",
                f"GPU {n.dev} ran out of memory trying to allocate {fsize(n.tried)}; "
                f"{fsize(n.this)} in use by this process.",
            )
        )
    proc = "".join(f"Process {pid} has {fsize(b)} memory in use. " for pid, b in n.others)
    proc += f"Including non-PyTorch memory, this process has {fsize(n.this)} memory in use. "
    if minor <= 1:
        return (
            f"CUDA out of memory. Tried to allocate {fsize(n.tried)}. GPU {n.dev} has a "
            f"total capacty of {fsize(n.total)} of which {fsize(n.free)} is free. {proc}"
            f"Of the allocated memory {fsize(n.alloc)} is allocated by PyTorch, and "
            f"{fsize(n.unalloc)} is reserved by PyTorch but unallocated. If reserved but "
            "unallocated memory is large try setting max_split_size_mb to avoid "
            "fragmentation.  See documentation for Memory Management and "
            "PYTORCH_CUDA_ALLOC_CONF"
        )
    pools = ""
    if n.private and minor >= 4:
        pools = f"with {fsize(n.private)} allocated in private pools (e.g., CUDA Graphs), "
    link = (
        "https://docs.pytorch.org/docs/stable/notes/cuda.html"
        "#optimizing-memory-usage-with-pytorch-cuda-alloc-conf"
        if minor >= 11
        else TORCH_DOCS
    )
    return (
        f"CUDA out of memory. Tried to allocate {fsize(n.tried)}. GPU {n.dev} has a total "
        f"capacity of {fsize(n.total)} of which {fsize(n.free)} is free. {proc}Of the "
        f"allocated memory {fsize(n.alloc)} is allocated by PyTorch, {pools}and "
        f"{fsize(n.unalloc)} is reserved by PyTorch but unallocated. "
        f"{torch_oom_tail(link)}"
    )


def cuda_error_lines(ctx: Ctx, what: str) -> list[str]:
    """``CUDA error: …`` as torch raises it, with its trailer lines: errors may be reported
    asynchronously, ``CUDA_LAUNCH_BLOCKING=1``, and (torch 2.2 on) ``TORCH_USE_CUDA_DSA``."""
    cls = "torch.AcceleratorError" if torch_minor(ctx.torch) >= 8 else "RuntimeError"
    out = [
        f"{cls}: CUDA error: {what}",
        "CUDA kernel errors might be asynchronously reported at some other API call, so the "
        "stacktrace below might be incorrect.",
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    ]
    if torch_minor(ctx.torch) >= 2:
        out.append("Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.")
    return out


def oom_exc_lines(ctx: Ctx, n: OomNums) -> list[str]:
    """The final line(s) of a traceback that ends in a GPU OOM: allocator text mostly,
    sometimes the CUDA-runtime form."""
    if ctx.chance(0.12):
        return cuda_error_lines(ctx, "out of memory")
    return [f"{oom_class(ctx)}: {oom_message(ctx, n)}"]
