"""The message catalogue (``rules/catalog/*.toml``) as the corpus's source of wording.

``render(ctx, msg, facts)`` writes one catalogued message as a line's text: each placeholder
filled for the example's scenario (sizes from its GPU and model unless the caller states
them, values that make the message's ``when`` conditions hold), anonymous placeholders from
the message's own examples (with their numbers redrawn), and the text around the template in
that example (the unit prefix of a systemd line, the exception class of a Python error, the
logrus fields of a Docker line). A render that the template would not read back falls back
to the example itself, so every rendered line is the message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from advisor.core.taxonomy import KV_CACHE_OOM, TAXONOMY
from advisor.parsing.catalog import Message, shipped_catalog
from advisor.parsing.templates import KINDS

from .context import Ctx

_PLACEHOLDER = re.compile(r"\{(\w+)(?::(\w+))?\}")
# The label of an out-of-memory message in each phase, as the taxonomy gives it; an OOM in
# the memory profiling run is written as a KV cache OOM (the memory left for the cache).
OOM_PHASE_LABEL = {
    phase: spec.name
    for spec in TAXONOMY.values()
    for when in spec.oom
    for phase in when.conditions.get("phases", ())
} | {"memory_profiling": KV_CACHE_OOM}
OOM_DEFAULT_LABELS = ("runtime_oom", "weights_load_oom", "cuda_graph_oom")


@cache
def catalogue() -> tuple[Message, ...]:
    """Every shipped message, in file order."""
    return tuple(shipped_catalog().messages)


def of_writer(writes: str, label: str | None = "*") -> list[Message]:
    """The messages a writer prints; ``label`` "*" any, None informational only."""
    return [
        m
        for m in catalogue()
        if m.producer.writes == writes and (label == "*" or m.spec.label == label)
    ]


def find(text: str, writes: str | None = None) -> list[Message]:
    """Messages whose template (or id) contains ``text``."""
    return [
        m
        for m in catalogue()
        if (text in m.spec.template or text in m.id)
        and (writes is None or m.producer.writes == writes)
    ]


def in_versions(msg: Message, version: str | int) -> bool:
    if not msg.spec.versions:
        return True
    try:
        return Version(str(version)) in SpecifierSet(msg.spec.versions)
    except InvalidVersion:
        return True


def pick_version(msg: Message, candidates: tuple[str, ...] | list[str], rng: Any) -> str:
    """A candidate version the message is printed by (any candidate when none is)."""
    ok = [v for v in candidates if in_versions(msg, v)]
    return rng.choice(ok or list(candidates))


# ------------------------------------------------------------------ examples as raw parts
@dataclass(frozen=True)
class Parts:
    prefix: str
    raws: tuple[str, ...]
    suffix: str


def _regex(template: str) -> re.Pattern[str]:
    parts, pos = [], 0
    items = list(_PLACEHOLDER.finditer(template))
    for n, m in enumerate(items):
        parts.append(" +".join(re.escape(c) for c in re.split(r" +", template[pos : m.start()])))
        pattern = KINDS.get(m.group(2) or "text", (r".*?", None))[0]
        if (m.group(2) or "text") == "text" and n == len(items) - 1:
            tail = template[m.end() :]
            pattern = r".*" if not tail.strip() else pattern
        parts.append(f"({pattern})")
        pos = m.end()
    parts.append(" +".join(re.escape(c) for c in re.split(r" +", template[pos:])))
    return re.compile("".join(parts))


_PARTS: dict[str, tuple[Parts, ...]] = {}


def example_parts(msg: Message) -> tuple[Parts, ...]:
    """Each example split into the text before the template, the placeholders' raw values
    and the text after it."""
    if msg.id not in _PARTS:
        _PARTS[msg.id] = _split_examples(msg)
    return _PARTS[msg.id]


def _split_examples(msg: Message) -> tuple[Parts, ...]:
    rx = _regex(msg.spec.template)
    out = []
    for ex in msg.spec.examples:
        m = rx.search(ex)
        if m:
            out.append(Parts(ex[: m.start()], m.groups(), ex[m.end() :]))
    return tuple(out)


# ------------------------------------------------------------------ values
def _vary_number(ctx: Ctx, raw: str) -> str:
    """A number like ``raw``: small integers (codes, signals, ranks) kept, others redrawn
    with the same digits and decimals."""
    neg = raw.startswith("-")
    body = raw.lstrip("+-").replace(",", "")
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)?", body):
        return raw
    whole, _, dec = body.partition(".")
    if len(whole) <= 3 and not dec:
        return raw
    lo = 10 ** (len(whole) - 1) if len(whole) > 1 else 0
    n = ctx.rng.randrange(lo, 10 ** len(whole))
    text = f"{n}.{ctx.rng.randrange(10 ** len(dec)):0{len(dec)}d}" if dec else str(n)
    return ("-" if neg else "") + text


def _size_text(kind: str, gib: float) -> str:
    if kind == "size":
        if abs(gib) >= 1:
            return f"{gib:.2f} GiB"
        return f"{gib * 1024:.2f} MiB"
    factor = KINDS[kind][1] or 1.0
    value = gib / factor
    return f"{value:.0f}" if kind == "bytes" else f"{value:.2f}"


def scenario_fact(ctx: Ctx, name: str) -> float | int | None:
    """A fact's value from the example's GPU, model and tuning (None: no opinion)."""
    rng, gpu = ctx.rng, ctx.gpu
    w = ctx.model.gib / ctx.tp
    kv = max(gpu.gib * ctx.util - w - rng.uniform(0.5, 4), rng.uniform(0.5, 4))
    table: dict[str, float | int] = {
        "total_capacity_gib": gpu.gib,
        "free_gib": gpu.gib * rng.uniform(0.02, 0.4),
        "available_kv_cache_gib": kv,
        "kv_cache_needed_gib": kv * rng.uniform(1.2, 6),
        "required_gib": gpu.gib * rng.uniform(0.3, 1.1),
        "requested_gib": gpu.gib * ctx.util,
        "tried_to_allocate_gib": rng.uniform(0.05, 12),
        "process_in_use_gib": gpu.gib * rng.uniform(0.6, 0.97),
        "max_model_len": ctx.max_len,
        "max_num_seqs": ctx.max_seqs,
        "max_num_batched_tokens": ctx.batched,
        "max_batch_prefill_tokens": ctx.batched,
        "gpu_index": rng.randrange(ctx.tp),
        "tensor_parallel_size": ctx.tp,
        "gpu_memory_utilization": ctx.util,
        "mem_fraction_static": ctx.util,
        "kv_cache_tokens": rng.randrange(8000, 900000),
        "estimated_max_model_len": rng.randrange(1000, max(ctx.max_len, 1001)),
        "max_total_tokens": rng.randrange(20000, 600000),
        "profiled_max_total_tokens": rng.randrange(5000, 400000),
        "hung_task_seconds": rng.choice((120, 122, 241, 245, 362, 483)),
        "restart_count": rng.randrange(1, 6),
        "exit_code": rng.choice((1, 1, 1, 2, 137)),
        "vocab_size": ctx.model.vocab,
        "dummy_requests": ctx.max_seqs,
    }
    return table.get(name)


def _satisfy(ctx: Ctx, msg: Message, values: dict[str, Any]) -> None:
    for c in msg.when:
        v = values.get(c.fact)
        if v is not None and c.holds({c.fact: v}):
            continue
        step = ctx.rng.uniform(0.05, 6.0)
        if c.op in ("<", "<="):
            v = c.value - step
        elif c.op in (">", ">="):
            v = c.value + step
        elif c.op == "==":
            v = c.value
        else:
            v = c.value + 1
        values[c.fact] = v


def _fill(ctx: Ctx, msg: Message, facts: dict[str, Any], parts: Parts) -> str:
    values: dict[str, Any] = {}
    for name, _ in msg.placeholders():
        if not name.startswith("_"):
            v = facts[name] if name in facts else scenario_fact(ctx, name)
            if v is not None:
                values[name] = v
    _satisfy(ctx, msg, values)
    out: dict[str, str] = {}
    for i, (name, kind) in enumerate(msg.placeholders()):
        raw = parts.raws[i] if i < len(parts.raws) else ""
        v = values.get(name)
        if kind == "unit":
            out[name] = ctx.unit if raw.endswith(".service") else raw
        elif v is None or isinstance(v, str):
            text = v if isinstance(v, str) else raw
            out[name] = _vary_number(ctx, text) if kind in ("int", "num") else text
        elif kind in ("gib", "mib", "kib", "bytes", "gb", "mb", "size"):
            out[name] = _size_text(kind, float(v))
        elif kind in ("int", "hex"):
            out[name] = str(int(v)) if kind == "int" else hex(int(v))
        else:
            out[name] = f"{float(v):.2f}"
    return msg.render(out)


def render(ctx: Ctx, msg: Message, facts: dict[str, Any] | None = None) -> str:
    """The message as a line's text (with the example's text around the template)."""
    all_parts = example_parts(msg)
    if not all_parts:
        return msg.spec.examples[0]
    parts = ctx.rng.choice(all_parts)
    body = _fill(ctx, msg, facts or {}, parts)
    read = msg.read(body)
    if read is None or (msg.when and not msg.conditions_hold(read)):
        return msg.spec.examples[all_parts.index(parts)]
    prefix = parts.prefix.replace("vllm.service", ctx.unit)
    return prefix + body + parts.suffix


def sweep_label(msg: Message, n: int) -> str | None:
    """The corpus label a message's sweep examples carry (an ``oom`` message: the label of
    its phase, else one of the OOM labels by turn ``n``)."""
    label = msg.spec.label
    if label != "oom":
        return label
    phase = msg.spec.phase
    if phase in OOM_PHASE_LABEL:
        return OOM_PHASE_LABEL[phase]
    return OOM_DEFAULT_LABELS[n % len(OOM_DEFAULT_LABELS)]
