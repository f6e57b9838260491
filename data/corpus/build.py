"""The corpus: every family's examples, seeded per example, gzip-compressed with mtime 0."""

from __future__ import annotations

import gzip
import json
import random
from dataclasses import replace
from pathlib import Path

from .context import Ctx
from .families import registry
from .family import Builder, Family
from .kinds import kind_jobs
from .runs import prior_healthy_run
from .setup import new_ctx
from .shapes import MAX_LINES, MIN_LINES, assemble, pick_shape
from .sweep import sweep_jobs

SEED = 20260316


def jobs_of(family: Family) -> tuple[tuple[Builder, str], ...]:
    """The family's examples after its ``count`` own ones: its new kinds, then the
    catalogue sweep's examples of its label."""
    return (*kind_jobs(family.label), *sweep_jobs().get(family.label, ()))


def total(family: Family) -> int:
    return family.count + len(jobs_of(family))


def make_example(family: Family, idx: int) -> dict[str, object]:
    """Example ``idx`` of ``family``: retried with the next seed until its length fits."""
    label = family.label
    lines: list[str] = []
    ctx: Ctx | None = None
    shape = ""
    fam, job = family, idx >= family.count
    if job:
        builder, host = jobs_of(family)[idx - family.count]
        fam = replace(family, builders={host: builder})
    for attempt in range(12):
        rng = random.Random(f"{SEED}:{label}:{idx}:{attempt}")
        ctx = new_ctx(rng, fam)
        if not job and rng.random() < 0.12:
            prior_healthy_run(ctx)
        fam.builders[ctx.engine](ctx)
        if family.finish is not None:
            family.finish(ctx)
        shape = pick_shape(ctx)
        lines, _ = assemble(ctx, shape)
        short_ok = "short_ok" in ctx.flags and len(lines) >= 3
        if (len(lines) >= MIN_LINES or short_ok) and len(lines) <= MAX_LINES:
            break
    assert ctx is not None
    return {
        "id": f"{label}-{idx:04d}",
        "label": label,
        "engine": ctx.rec_engine or ctx.engine,
        "version": ctx.rec_version or ctx.version,
        "shape": shape,
        "lines": lines,
    }


def corpus_bytes(per_failure: int | None = None) -> bytes:
    """The corpus as JSON lines; ``per_failure`` caps the examples of each label (the
    examples kept are the first ones of the full corpus)."""
    buf = bytearray()
    for family in registry():
        n = total(family) if per_failure is None else min(per_failure, total(family))
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
