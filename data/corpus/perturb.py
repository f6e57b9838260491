"""Perturbations of an example's events: dropped lines, swapped neighbours, removed traceback
heads, suppressed repeats, interleaved processes, and host noise lines."""

from __future__ import annotations

import re
from datetime import timedelta

from .context import Ctx, Ev, Proc
from .vllm_failures import merge


def drop_tb_head(ctx: Ctx, evs: list[Ev]) -> list[Ev]:
    """Lose the first line of one traceback (its ``Traceback …``/``… failed to start`` line)."""
    heads = [i for i, e in enumerate(evs) if e.tag == "tbhead" and not e.key]
    if not heads:
        return evs
    i = ctx.rng.choice(heads)
    return evs[:i] + evs[i + 1 :]


def drop_lines(ctx: Ctx, evs: list[Ev]) -> list[Ev]:
    p = ctx.rng.uniform(0.10, 0.30)
    return [e for e in evs if e.key or ctx.rng.random() >= p]


def swap_neighbours(ctx: Ctx, evs: list[Ev]) -> list[Ev]:
    """stdout/stderr are two journald streams: small inversions happen."""
    evs = evs[:]
    for _ in range(ctx.rng.randrange(1, 4)):
        if len(evs) < 3:
            break
        i = ctx.rng.randrange(len(evs) - 1)
        if evs[i].src == evs[i + 1].src == "app":
            evs[i], evs[i + 1] = evs[i + 1], evs[i]
    return evs


def suppressed(ctx: Ctx, evs: list[Ev]) -> list[Ev]:
    """A journald rate-limit gap inside a burst of app lines."""
    apps = [i for i, e in enumerate(evs) if e.src == "app" and not e.key]
    if len(apps) < 6:
        return evs
    i = ctx.rng.choice(apps[2:-2])
    j = min(i + ctx.rng.randrange(2, 6), len(evs))
    if any(e.key for e in evs[i:j]):
        return evs
    gap = Ev(
        "journald",
        f"Suppressed {ctx.rng.randrange(200, 40000)} messages from {ctx.unit}",
        evs[i].t,
        pid=ctx.rng.randrange(300, 900),
        ident="systemd-journald",
    )
    return [*evs[:i], gap, *evs[j:]]


PROC_TAG = re.compile(
    r"\((?:VllmWorkerProcess|VllmWorker[^)]*|Worker_[^)]*|EngineCore[^)]*|"
    r"APIServer) pid=(\d+)\)|^\[[\d\-: .]+ (TP\d+)\]"
)


def proc_of(e: Ev) -> str | None:
    if e.src != "app":
        return None
    m = PROC_TAG.search(e.text[:80])
    return (m.group(1) or m.group(2)) if m else None


def interleave_processes(ctx: Ctx, evs: list[Ev]) -> list[Ev]:
    """Concurrent processes' lines written within the same moment arrive interleaved."""
    out: list[Ev] = []
    i = 0
    while i < len(evs):
        j = i
        while j < len(evs) and proc_of(evs[j]) is not None and int(evs[j].t) == int(evs[i].t):
            j += 1
        block = evs[i:j]
        if len(block) > 2 and len({proc_of(e) for e in block}) > 1:
            groups: dict[str, list[Ev]] = {}
            for e in block:
                groups.setdefault(proc_of(e) or "", []).append(e)
            times = sorted(e.t for e in block)
            seqs = [[(Proc("x", 0), str(k)) for k in range(len(g))] for g in groups.values()]
            order = merge(
                ctx.rng, [[(Proc("x", n), str(k)) for _, k in seq] for n, seq in enumerate(seqs)]
            )
            lists = list(groups.values())
            mixed = [lists[p.pid][int(k)] for p, k in order]
            for t, e in zip(times, mixed, strict=True):
                e.t = t
            out += mixed
            i = j
        else:
            out.append(evs[i])
            i += 1
    return out


def perturb(
    ctx: Ctx, evs: list[Ev], journal: bool, window: bool = False
) -> tuple[list[Ev], list[str]]:
    """Perturb the event list; ``window`` (systemctl status) shows the last lines itself."""
    done: list[str] = []
    rng = ctx.rng
    if rng.random() < 0.75:
        evs = interleave_processes(
            ctx, [Ev(e.src, e.text, e.t, e.key, e.tag, e.pid, e.ident) for e in evs]
        )
    if rng.random() < 0.2 and any(e.tag == "tbhead" for e in evs):
        evs = drop_tb_head(ctx, evs)
        done.append("tb_head_removed")
    if rng.random() < 0.3:
        evs = drop_lines(ctx, evs)
        done.append("dropped_lines")
    if rng.random() < 0.1:
        evs = swap_neighbours(ctx, evs)
        done.append("stream_reorder")
    if journal and rng.random() < 0.04:
        evs = suppressed(ctx, evs)
        done.append("journald_suppressed")
    keys = [i for i, e in enumerate(evs) if e.key]
    if not keys and len(evs) > 30 and rng.random() < 0.35:
        evs = evs[rng.randrange(0, len(evs) // 2) :]
        done.append("head_truncated")
    if keys and rng.random() < 0.35:
        cut = rng.randrange(0, keys[0] + 1)
        evs = evs[cut:]
        done.append("head_truncated")
        keys = [i - cut for i in keys]
    if keys and not window and rng.random() < 0.3 and keys[-1] < len(evs) - 1:
        evs = evs[: rng.randrange(keys[-1] + 1, len(evs))]
        done.append("tail_cut")
    return evs, done


NOISE = (
    ("systemd", 1, "Starting Daily apt download activities..."),
    ("systemd", 1, "Started Daily apt download activities."),
    ("CRON", 0, "(root) CMD (command -v debian-sa1 > /dev/null && debian-sa1 1 1)"),
    ("systemd-logind", 812, "New session 42 of user ubuntu."),
    (
        "sshd",
        0,
        "Accepted publickey for ubuntu from 10.0.0.5 port 52344 ssh2: RSA SHA256:"
        "kM2b0c9q1T3Xr8fYwQe7p5nGJtVh4aLzUo6iD",
    ),
    ("nvidia-persistenced", 1543, "Started Persistence Daemon"),
    ("systemd", 1, "Starting Cleanup of Temporary Directories..."),
    (
        "dockerd",
        1187,
        'time="{iso}" level=info msg="ignoring event" container=4f2a9c module=libcont'
        'ainerd namespace=moby topic=/tasks/delete type="*events.TaskDelete"',
    ),
    (
        "kernel",
        0,
        "[UFW BLOCK] IN=eth0 OUT= MAC=00:16:3e:5a:7b:9c SRC=185.220.101.4 DST=10.0.3.7 "
        "LEN=44 PROTO=TCP SPT=49152 DPT=22 WINDOW=1024 RES=0x00 SYN URGP=0",
    ),
    ("systemd", 1, "session-42.scope: Deactivated successfully."),
    (
        "node_exporter",
        1422,
        'ts={iso} caller=collector.go:169 level=error msg="collector failed" '
        'name=nvme err="open /sys/class/nvme: no such file or directory"',
    ),
)


def add_host_noise(ctx: Ctx, evs: list[Ev]) -> list[Ev]:
    if not evs:
        return evs
    evs = evs[:]
    for _ in range(ctx.rng.randrange(1, 5)):
        ident, pid, text = ctx.rng.choice(NOISE)
        i = ctx.rng.randrange(len(evs))
        t = evs[i].t
        iso = (ctx.start + timedelta(seconds=t)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        src = "kern" if ident == "kernel" else "other"
        evs.insert(
            i,
            Ev(
                src,
                text.replace("{iso}", iso),
                t,
                pid=pid or ctx.rng.randrange(2000, 99999),
                ident=ident,
            ),
        )
        if ident == "systemd":
            evs[i].src, evs[i].pid = "other", 1
    return evs
