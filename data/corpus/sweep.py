"""The catalogue sweep: every catalogued message with a label appears in a few examples of its
label (an ``oom`` message: of the label of the phase its run is in), written by its producer
into a run of its own or of an engine; informational messages appear in healthy runs and as
context before the decisive line of failures."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache

from advisor.parsing.catalog import Message

from .context import Ctx
from .hosts import OWN, VERSIONS, be_own, fail_tail, frames_for, host_run, own_prelude, phase_for
from .messages import OOM_DEFAULT_LABELS, catalogue, in_versions, pick_version
from .producers import emit
from .status import status_alone

Builder = Callable[[Ctx], None]
Job = tuple[Builder, str]  # (builder, host engine)
HOSTS = ("vllm", "sglang", "tgi")
FAILURE_WORDS = re.compile(
    r"fail|error|exit|kill|timed out|timeout|abort|panic|denied|unable|could not|cannot|"
    r"not |refus|lost|dead|crash|oom|out of memory|warn|invalid|unknown|missing|no ",
    re.I,
)
OOM_BY_WRITER = {"llamacpp": ("weights_load_oom", "kv_cache_oom", "runtime_oom")}


def reps(n_labelled: int) -> int:
    return 3 if n_labelled * 3 <= 1200 else 2


def label_of(msg: Message, turn: int) -> str | None:
    label = msg.spec.label
    if label != "oom":
        return label
    from .messages import OOM_PHASE_LABEL

    if msg.spec.phase in OOM_PHASE_LABEL:
        return OOM_PHASE_LABEL[msg.spec.phase]
    options = OOM_BY_WRITER.get(msg.producer.writes, OOM_DEFAULT_LABELS)
    return options[turn % len(options)]


def set_versions(ctx: Ctx, msg: Message) -> None:
    """The producer's version that prints ``msg`` (systemd's drives its other lines too)."""
    w = msg.producer.writes
    if w == "systemd":
        ctx.sysd = int(pick_version(msg, VERSIONS["systemd"], ctx.rng))
        if ctx.sysd <= 247:
            ctx.status_fmt = "description"
    if w in ("kernel", "docker") and not ctx.rec_engine:
        ctx.flags.add(f"{w}:{pick_version(msg, VERSIONS[w], ctx.rng)}")


def context_infos(ctx: Ctx, writer: str, n: int, healthy: bool) -> list[Message]:
    infos = [
        m
        for m in catalogue()
        if m.producer.writes == writer
        and m.spec.label is None
        and (not healthy or not FAILURE_WORDS.search(m.spec.template))
    ]
    return ctx.rng.sample(infos, min(n, len(infos)))


def message_example(msg: Message, label: str) -> Builder:
    """A builder of one example of ``label`` whose decisive line is ``msg``."""

    def build(ctx: Ctx) -> None:
        w = msg.producer.writes
        phase = phase_for(msg, label)
        set_versions(ctx, msg)
        if ".status." in msg.id:
            status_alone(ctx, label, msg)
            return
        if w == "kernel" and label != "healthy" and ctx.chance(0.4):
            kernel_only(ctx, msg)
            return
        if w == "docker":
            ctx.rec_engine = "docker"
            ctx.rec_version = pick_version(msg, VERSIONS["docker"], ctx.rng)
        if w in OWN:
            be_own(ctx, w, msg)
            sd_start_own(ctx)
            own_prelude(ctx, w, phase, ready=label in ("runtime_oom", "healthy", "wedged_stop"))
        else:
            if w in HOSTS:
                pick_engine_version(ctx, msg)
            host_run(ctx, phase)
        if label == "wedged_stop" and phase == "shutdown" and w != "docker":
            ctx.sys(f"Stopping {ctx.status}...")
            ctx.adv(30, 300)
        for m in context_infos(ctx, w, ctx.rng.randrange(0, 3), label == "healthy"):
            emit(ctx, m, key=False, frames=[])
        ctx.adv(0.01, 2)
        emit(ctx, msg, key=True, frames=frames_for(ctx, phase))
        fail_tail(ctx, label)

    return build


def kernel_only(ctx: Ctx, msg: Message) -> None:
    """The kernel's lines alone (``dmesg``): context lines of the kernel, then ``msg``."""
    ctx.rec_engine, ctx.rec_version = "kernel", pick_version(msg, VERSIONS["kernel"], ctx.rng)
    ctx.flags.update(("kernel_only", "short_ok"))
    ctx.needs_kern = True
    ctx.t += ctx.rng.uniform(100, 90000)
    for m in context_infos(ctx, "kernel", ctx.rng.randrange(1, 4), False):
        emit(ctx, m, key=False)
        ctx.adv(0.001, 30)
    emit(ctx, msg, key=True)


def sd_start_own(ctx: Ctx) -> None:
    from .systemd import sd_start

    sd_start(ctx)


def pick_engine_version(ctx: Ctx, msg: Message) -> None:
    """An engine version that prints ``msg`` (vLLM keeps its version group's layout)."""
    if ctx.engine == "vllm" and ctx.group is not None:
        ok = [v for v in ctx.group.versions if in_versions(msg, v)]
        if ok:
            ctx.version = ctx.rng.choice(ok)
        return
    from .catalog import SGLANG_VERSIONS, TGI_VERSIONS

    pool = [v for vs in SGLANG_VERSIONS.values() for v in vs]
    cands = pool if ctx.engine == "sglang" else list(TGI_VERSIONS)
    same_major = [v for v in cands if v[:3] == ctx.version[:3] and in_versions(msg, v)]
    if same_major:
        ctx.version = ctx.rng.choice(same_major)


def healthy_example(writer: str, msgs: tuple[Message, ...]) -> Builder:
    """A healthy run of (or hosting) ``writer`` with ``msgs`` among its lines."""

    def build(ctx: Ctx) -> None:
        if writer in OWN:
            be_own(ctx, writer, None)
            sd_start_own(ctx)
            own_prelude(ctx, writer, "ready", ready=True)
        else:
            host_run(ctx, "ready")
        for m in msgs:
            ctx.adv(0.1, 30)
            emit(ctx, m, key=False, frames=[])

    return build


@cache
def sweep_jobs() -> dict[str, tuple[Job, ...]]:
    """label → the sweep's jobs, in catalogue order."""
    labelled = [m for m in catalogue() if m.spec.label is not None]
    n = reps(len(labelled))
    jobs: dict[str, list[Job]] = {}
    for i, msg in enumerate(labelled):
        for turn in range(n):
            label = label_of(msg, turn)
            if label is None:
                continue
            host = host_engine(msg, i + turn, label)
            jobs.setdefault(label, []).append((message_example(msg, label), host))
    for k, (writer, msgs) in enumerate(healthy_chunks()):
        host = writer if writer in HOSTS else HOSTS[k % 3]
        jobs.setdefault("healthy", []).append((healthy_example(writer, msgs), host))
    return {label: tuple(v) for label, v in jobs.items()}


def host_engine(msg: Message, turn: int, label: str) -> str:
    w = msg.producer.writes
    if w in HOSTS:
        return w
    if label == "sampler_warmup_oom" or w in OWN:
        return "vllm"
    return ("vllm", "vllm", "sglang", "tgi")[turn % 4]


def healthy_chunks() -> list[tuple[str, tuple[Message, ...]]]:
    """The informational messages that read as harmless, by writer, four to an example,
    each chunk twice."""
    by_writer: dict[str, list[Message]] = {}
    for m in catalogue():
        harmless = m.spec.label is None and not FAILURE_WORDS.search(m.spec.template)
        if harmless and m.spec.phase != "shutdown" and ".status." not in m.id:
            by_writer.setdefault(m.producer.writes, []).append(m)
    out = []
    for writer, msgs in by_writer.items():
        for i in range(0, len(msgs), 4):
            chunk = tuple(msgs[i : i + 4])
            out += [(writer, chunk), (writer, chunk[::-1])]
    return out
