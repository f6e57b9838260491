"""The generated journal the classify benchmarks read: made once (bench/journal_gen.py), counted
and cut to the first N lines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def count_lines(path: Path) -> int:
    """Lines of `path`, read in 16 MiB blocks."""
    n = 0
    with path.open("rb") as f:
        while block := f.read(1 << 24):
            n += block.count(b"\n")
    return n


def ensure_journal(path: Path, lines: int) -> Path:
    """`path`, generated with `lines` lines unless it already holds as many."""
    if path.exists() and count_lines(path) >= lines:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    generator = ROOT / "bench" / "journal_gen.py"
    args = [sys.executable, str(generator), "--lines", str(lines), "--out", str(path)]
    subprocess.run(args, check=True, cwd=ROOT)
    return path


def head(path: Path, lines: int, out: Path) -> Path:
    """The first `lines` lines of `path` (`path` itself when it has no more)."""
    if count_lines(path) <= lines:
        return path
    with path.open("rb") as src, out.open("wb") as dst:
        for n, line in enumerate(src):
            if n >= lines:
                break
            dst.write(line)
    return out
