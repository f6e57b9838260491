"""The corpus: every family's examples, seeded per example, gzip-compressed with mtime 0."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

from .context import Ctx
from .families import registry
from .family import Family
from .runs import prior_healthy_run
from .setup import new_ctx
from .shapes import MAX_LINES, MIN_LINES, assemble, pick_shape

SEED = 20260316


def make_example(family: Family, idx: int) -> dict[str, object]:
    """Example ``idx`` of ``family``: retried with the next seed until its length fits."""
    label = family.label
    lines: list[str] = []
    ctx: Ctx | None = None
    shape = ""
    for attempt in range(12):
        rng = random.Random(f"{SEED}:{label}:{idx}:{attempt}")
        ctx = new_ctx(rng, family)
        if rng.random() < 0.12:
            prior_healthy_run(ctx)
        family.builders[ctx.engine](ctx)
        if family.finish is not None:
            family.finish(ctx)
        shape = pick_shape(ctx)
        lines, _ = assemble(ctx, shape)
        if MIN_LINES <= len(lines) <= MAX_LINES:
            break
    assert ctx is not None
    return {
        "id": f"{label}-{idx:04d}",
        "label": label,
        "engine": ctx.engine,
        "version": ctx.version,
        "shape": shape,
        "lines": lines,
    }


def corpus_bytes(per_failure: int | None = None) -> bytes:
    """The corpus as JSON lines; ``per_failure`` caps the examples of each label (the
    examples kept are the first ones of the full corpus)."""
    buf = bytearray()
    for family in registry():
        n = family.count if per_failure is None else min(per_failure, family.count)
        for i in range(n):
            ex = make_example(family, i)
            buf += (json.dumps(ex, ensure_ascii=False) + "\n").encode()
    return bytes(buf)


def write_corpus(out: Path, per_failure: int | None = None) -> None:
    """Write the gzip-compressed corpus; the same arguments always give the same bytes."""
    data = corpus_bytes(per_failure)
    with (
        out.open("wb") as f,
        gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0, compresslevel=9) as gz,
    ):
        gz.write(data)
