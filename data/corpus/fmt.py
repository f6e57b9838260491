"""Small formatters: torch's sizes, systemd's time spans, tqdm bars, request ids."""

from __future__ import annotations

import random

from .catalog import GIB


def fsize(b: float) -> str:
    """torch's format_size: bytes, else 2 decimals and binary units."""
    if b <= 1024:
        return f"{int(b)} bytes"
    for unit, div in (("KiB", 1024), ("MiB", 1024**2), ("GiB", 1024**3)):
        if b < div * 1024 or unit == "GiB":
            return f"{b / div:.2f} {unit}"
    return f"{b:.2f} bytes"


def gib(x: float) -> float:
    return x * GIB


def timespan(sec: float) -> str:
    """systemd timespan with ms accuracy: 345ms, 2.345s, 1min 2.345s, 1h 2min 3.456s."""
    if sec < 1:
        return f"{int(sec * 1000)}ms"
    h, rem = divmod(sec, 3600)
    m, s = divmod(rem, 60)
    parts = []
    if h:
        parts.append(f"{int(h)}h")
    if m:
        parts.append(f"{int(m)}min")
    parts.append(f"{s:.3f}".rstrip("0").rstrip(".") + "s")
    return " ".join(parts)


def ago(sec: float) -> str:
    if sec < 60:
        return f"{int(sec)}s ago"
    if sec < 3600:
        return f"{int(sec // 60)}min {int(sec % 60)}s ago"
    return f"{int(sec // 3600)}h {int(sec % 3600 // 60)}min ago"


def thousands(n: int) -> str:
    return f"{n:,}"


def elapsed(sec: float) -> str:
    m, s = divmod(int(sec), 60)
    return f"{m:02d}:{s:02d}"


def tqdm_line(desc: str, n: int, total: int, per: float, vllm_fmt: bool) -> str:
    """One tqdm refresh; vLLM's weight loader uses its own bar format."""
    pct = int(100 * n / total) if total else 100
    done, left = elapsed(per * n), elapsed(per * (total - n))
    rate = f"{per:5.2f}s/it" if per >= 1 else f"{1 / per:5.2f}it/s"
    if n == 0:
        done, left, rate = "00:00", "?", "?it/s"
    if vllm_fmt:
        return f"{desc}: {pct:3d}% Completed | {n}/{total} [{done}<{left}, {rate}]"
    bar = ("█" * (pct // 10)).ljust(10)
    return f"{desc}: {pct:3d}%|{bar}| {n}/{total} [{done}<{left}, {rate}]"


def rid(rng: random.Random, prefix: str = "chatcmpl-") -> str:
    return prefix + "".join(rng.choice("0123456789abcdef") for _ in range(32))


def hexs(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))
