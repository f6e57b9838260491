"""Line shapes: how an example is pasted (journalctl short forms, raw, docker/kubectl with
timestamps, dmesg, ``systemctl status``), and fitting it to the length bounds."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta

from .catalog import DAYS, MONTHS
from .context import Ctx, Ev
from .fmt import ago, hexs, timespan
from .perturb import add_host_noise, perturb
from .systemd import all_procs, comm

SHAPES = (
    "journalctl-short",
    "journalctl-short-iso",
    "journalctl-short-precise",
    "raw",
    "docker",
    "kubectl",
    "compose",
    "systemctl-status",
    "terminal",
)

MIN_LINES, MAX_LINES = 15, 120  # an example outside these bounds is drawn again


SHAPE_WEIGHTS = (36, 6, 6, 20, 10, 6, 4, 12, 6)
# A terminal's widths (tmux and terminal defaults) that cut the raw output's long lines into
# rows; tmux's copy-mode pads each row with spaces to the width.
TERMINAL_WIDTHS = (80, 100, 120, 160, 200)
TERMINAL_PADDED = 0.3


JOURNAL_SHAPES = SHAPES[:3]


def pick_shape(ctx: Ctx) -> str:
    if ctx.block:
        return "systemctl-status"
    if "kernel_only" in ctx.flags and ctx.rng.random() < 0.6:
        return "dmesg"
    allowed = []
    has_app = any(e.src == "app" for e in ctx.evs)
    has_kern = any(e.src == "kern" for e in ctx.evs)
    key_in_app = any(e.key and e.src == "app" for e in ctx.evs)
    for s, w in zip(SHAPES, SHAPE_WEIGHTS, strict=True):
        plain = s not in JOURNAL_SHAPES and s != "systemctl-status"
        weak = not key_in_app and not has_kern and ctx.label != "healthy"
        if plain and (ctx.needs_sys or not has_app or weak):
            continue
        if s == "systemctl-status" and (
            ctx.needs_kern or (has_kern and not key_in_app and not ctx.needs_sys)
        ):
            continue
        if plain and ctx.engine != "vllm" and s == "compose" and ctx.rng.random() < 0.5:
            continue
        allowed.append((s, w))
    return ctx.rng.choices([s for s, _ in allowed], weights=[w for _, w in allowed])[0]


@dataclass
class Out:
    text: str
    key: bool


def jtime(ctx: Ctx, t: float, style: str) -> str:
    d = ctx.start + timedelta(seconds=t)
    if style == "journalctl-short-iso":
        tz = "+00:00" if ctx.sysd >= 257 else "+0000"
        return d.strftime("%Y-%m-%dT%H:%M:%S") + tz
    base = f"{MONTHS[d.month - 1]} {d.day:02d} {d:%H:%M:%S}"
    if style == "journalctl-short-precise":
        return f"{base}.{d.microsecond:06d}"
    return base


def app_text(ctx: Ctx, e: Ev, journal: bool, blob: bool) -> str | None:
    text = e.text.replace("\r", "")
    if journal and not text.strip():
        return None  # journald drops lines that are empty after stripping
    if journal and e.tag == "tqdm" and blob:
        return f"[{len(e.text.encode()) + 1}B blob data]"
    if not ctx.keep_ansi:
        text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return text


def render_journal(ctx: Ctx, evs: list[Ev], style: str, kern_inline: bool) -> list[Out]:
    out: list[Out] = []
    blob = ctx.rng.random() < 0.4
    kern_block: list[Ev] = []
    for e in evs:
        if e.src == "kern" and not kern_inline:
            kern_block.append(e)
            continue
        if e.src == "app":
            text = app_text(ctx, e, True, blob)
            if text is None:
                continue
            who = f"{e.ident}[{e.pid}]"
        elif e.src == "kern":
            text, who = e.text, "kernel"
        elif e.ident == "systemd" and e.src == "sys":
            text, who = e.text, "systemd[1]"
        else:
            text, who = e.text, f"{e.ident}[{e.pid}]"
        head = f"{jtime(ctx, e.t, style)} {ctx.host} {who}: "
        parts = text.split("\n")
        out.append(Out(head + parts[0], e.key))
        out += [Out(" " * len(head) + p, e.key) for p in parts[1:]]
    if kern_block:
        if ctx.rng.random() < 0.5:
            out.append(
                Out(
                    ctx.rng.choice(("---", "", "$ journalctl -k --since today", "kernel log:")),
                    False,
                )
            )
        for e in kern_block:
            out.append(Out(f"{jtime(ctx, e.t, style)} {ctx.host} kernel: {e.text}", e.key))
    return out


def dmesg_block(ctx: Ctx, evs: list[Ev]) -> list[Out]:
    kern = [e for e in evs if e.src == "kern"]
    if not kern:
        return []
    rng = ctx.rng
    out = []
    head = rng.choice(
        (
            "",
            "$ sudo dmesg -T | tail -n 30",
            "dmesg:",
            "$ dmesg | grep -i nvrm",
            "--- dmesg ---",
            "$ journalctl -k -n 20",
        )
    )
    if head:
        out.append(Out(head, False))
    human = rng.random() < 0.5
    for e in kern:
        if human:
            d = ctx.start + timedelta(seconds=e.t)
            pre = f"[{DAYS[d.weekday()]} {MONTHS[d.month - 1]} {d.day:2d} {d:%H:%M:%S} {d.year}]"
        else:
            pre = f"[{ctx.kbase + e.t:12.6f}]"
        out.append(Out(f"{pre} {e.text}", e.key))
    return out


def render_plain(ctx: Ctx, evs: list[Ev], shape: str) -> list[Out]:
    rng = ctx.rng
    pod = f"{ctx.unit.split('.')[0].replace('@', '-')}-{hexs(rng, 9)}-{hexs(rng, 5)}"
    svc = ctx.engine if ctx.engine != "tgi" else "tgi"
    kube_ts = rng.random() < 0.6
    kube_prefix = rng.random() < 0.4
    out: list[Out] = []
    for e in evs:
        if e.src != "app":
            continue
        text = app_text(ctx, e, False, False)
        if text is None:
            continue
        d = ctx.start + timedelta(seconds=e.t)
        nano = f"{d:%Y-%m-%dT%H:%M:%S}.{d.microsecond:06d}{rng.randrange(1000):03d}Z"
        if shape == "docker":
            text = f"{nano} {text}"
        elif shape == "kubectl":
            text = (f"{nano} " if kube_ts else "") + text
            if kube_prefix:
                text = f"[pod/{pod}/{svc}] {text}"
        elif shape == "compose":
            text = f"{svc}-1  | {text}"
        out.append(Out(text.rstrip() if shape not in ("raw", "terminal") else text, e.key))
    if any(e.src == "kern" for e in evs) and (ctx.needs_kern or rng.random() < 0.6):
        out += dmesg_block(ctx, evs)
    return out


def unit_state(ctx: Ctx, evs: list[Ev]) -> tuple[str, str, float]:
    """(Active: text, Main PID: text, since-time) from the last systemd lines shown."""
    state, main, since = "active (running)", f"{ctx.api.pid} ({comm(ctx, ctx.api)})", 0.0
    exit_part = ""
    for e in evs:
        if e.src != "sys":
            continue
        m = re.search(r"Main process exited, code=(\w+), status=(\S+)", e.text)
        if m:
            exit_part = f"code={m.group(1)}, status={m.group(2)}"
        if e.text.startswith("Started "):
            state, since, exit_part = "active (running)", e.t, ""
            main = f"{e.pid if e.pid != 1 else ctx.api.pid} ({comm(ctx, ctx.api)})"
        elif e.text.startswith("Stopping "):
            state, since = "deactivating (stop-sigterm)", e.t
        elif "Failed with result" in e.text:
            res = e.text.split("'")[1]
            state, since = f"failed (Result: {res})", e.t
        elif "Scheduled restart job" in e.text:
            state, since = "activating (auto-restart) (Result: exit-code)", e.t
        elif e.text.endswith(("Deactivated successfully.", "Succeeded.")):
            state, since = "inactive (dead)", e.t
    if exit_part and not state.startswith("active"):
        main = f"{ctx.api.pid} ({exit_part})"
    return state, main, since


def render_status(ctx: Ctx, evs: list[Ev], now_extra: float, state_evs: list[Ev]) -> list[Out]:
    rng = ctx.rng
    state, main, since = unit_state(ctx, state_evs)
    d = ctx.start + timedelta(seconds=since)
    preset = "preset" if ctx.sysd >= 252 else "vendor preset"
    out = [
        Out(f"{'●' if not state.startswith('failed') else '×'} {ctx.unit} - {ctx.desc}", False),
        Out(
            f"     Loaded: loaded (/etc/systemd/system/{ctx.unit}; enabled; {preset}: enabled)",
            False,
        ),
    ]
    if rng.random() < 0.3:
        out += [
            Out(f"    Drop-In: /etc/systemd/system/{ctx.unit}.d", False),
            Out("             └─override.conf", False),
        ]
    out.append(
        Out(
            f"     Active: {state} since {DAYS[d.weekday()]} {d:%Y-%m-%d %H:%M:%S} UTC; "
            f"{ago(now_extra)}",
            state.startswith("deactivating"),
        )
    )
    running = state.startswith(("active", "deactivating"))
    if running:
        out.append(Out(f"   Main PID: {ctx.api.pid} ({comm(ctx, ctx.api)})", False))
        limit = rng.randrange(10**5, 10**6)
        out.append(Out(f"      Tasks: {rng.randrange(40, 900)} (limit: {limit})", False))
        out.append(Out(f"     Memory: {rng.uniform(2, 90):.1f}G", False))
        out.append(Out(f"        CPU: {timespan(ctx.cpu_s)}", False))
        out.append(Out(f"     CGroup: /system.slice/{ctx.unit}", False))
        procs = all_procs(ctx)
        for i, p in enumerate(procs):
            branch = "└─" if i == len(procs) - 1 else "├─"
            cmd = (
                {
                    "vllm": f"/opt/venv/bin/python3 /opt/venv/bin/vllm serve {ctx.model.name}",
                    "sglang": f"/opt/venv/bin/python3 -m sglang.launch_server --model-path "
                    f"{ctx.model.name} --tp {ctx.tp}",
                    "tgi": f"/usr/local/bin/text-generation-launcher --model-id {ctx.model.name}",
                }.get(ctx.engine, ctx.ident)
                if p.role == "api"
                else comm(ctx, p)
            )
            out.append(Out(f"             {branch}{p.pid} {cmd}", False))
    else:
        if ctx.sysd >= 252 and rng.random() < 0.5:
            dur = max(since - ctx.run_start, 1.0)
            out.append(Out(f"   Duration: {timespan(dur)}", False))
        out.append(Out(f"   Main PID: {main}", False))
        out.append(Out(f"        CPU: {timespan(ctx.cpu_s)}", False))
    out.append(Out("", False))
    body = render_journal(ctx, [e for e in evs if e.src != "kern"], "journalctl-short", True)
    n = rng.choice((10, 10, 20, 30, 50))
    keys = [i for i, o in enumerate(body) if o.key]
    if keys:
        n = max(n, len(body) - keys[0])
    body = body[-n:]
    if rng.random() < 0.25:
        width = rng.randrange(200, 260)
        body = [
            Out(o.text[: width - 1] + "…" if len(o.text) > width else o.text, o.key) for o in body
        ]
    return out + body


def assemble(ctx: Ctx, shape: str) -> tuple[list[str], list[str]]:
    if ctx.block:
        return [t for t, _ in ctx.block], []
    if shape == "dmesg":
        return [o.text for o in dmesg_block(ctx, ctx.evs)], []
    rng = ctx.rng
    journal = shape in JOURNAL_SHAPES
    evs = ctx.evs
    now_extra = rng.uniform(2, 7200)
    if shape == "systemctl-status" and ctx.label == "wedged_stop" and rng.random() < 0.5:
        cut = next((i for i, e in enumerate(evs) if "timed out" in e.text and e.src == "sys"), None)
        stop = next((i for i, e in enumerate(evs) if e.text.startswith("Stopping ")), None)
        if cut is not None and stop is not None:
            evs = evs[:cut]
            now_extra = rng.uniform(60, 900)
    if shape == "systemctl-status":
        evs = [e for e in evs if e.src != "kern"]
    state_evs = evs
    evs, done = perturb(
        ctx, evs, journal or shape == "systemctl-status", window=shape == "systemctl-status"
    )
    if shape == "systemctl-status":
        out = render_status(ctx, evs, now_extra, state_evs)
    elif journal:
        inline = rng.random() < 0.7
        if inline and rng.random() < 0.25:
            evs = add_host_noise(ctx, evs)
            done.append("other_units_noise")
        out = render_journal(ctx, evs, shape, inline)
        if rng.random() < 0.06 and ctx.sysd <= 249 and "head_truncated" not in done:
            d = ctx.start - timedelta(days=rng.randrange(1, 40))
            word = "Logs begin at" if ctx.sysd <= 247 else "Journal begins at"
            out.insert(
                0, Out(f"-- {word} {DAYS[d.weekday()]} {d:%Y-%m-%d %H:%M:%S} UTC. --", False)
            )
    else:
        out = render_plain(ctx, evs, shape)
    if rng.random() < 0.08:
        cmd = {
            "systemctl-status": f"$ systemctl status {ctx.unit.removesuffix('.service')}",
            "docker": "$ docker logs --timestamps --tail 200 llm",
            "raw": "$ tail -n 80 /var/log/llm/server.log",
            "kubectl": "$ kubectl logs deploy/llm --timestamps",
            "compose": "$ docker compose logs --tail 100",
        }.get(shape, f"$ journalctl -u {ctx.unit} --no-pager -n 100")
        out.insert(0, Out(cmd, False))
        done.append("shell_prompt")
    out = fit_length(ctx, out)
    if shape == "terminal":
        return cut_rows(ctx, [o.text for o in out]), done
    return [o.text for o in out], done


def cut_rows(ctx: Ctx, texts: list[str]) -> list[str]:
    """Raw output as a terminal showed it and a person copied it: each line cut into rows of
    the terminal's width, padded with spaces to it as tmux's copy-mode does."""
    width = ctx.rng.choice(TERMINAL_WIDTHS)
    padded = ctx.rng.random() < TERMINAL_PADDED
    rows = []
    for text in texts:
        text = text.expandtabs()
        for i in range(0, max(len(text), 1), width):
            row = text[i : i + width]
            rows.append(row.ljust(width) if padded else row)
    return rows


def fit_length(ctx: Ctx, out: list[Out]) -> list[Out]:
    if len(out) <= MAX_LINES:
        return out
    keys = [i for i, o in enumerate(out) if o.key]
    first = keys[0] if keys else len(out) - MAX_LINES
    cut = min(len(out) - MAX_LINES, first)
    out = out[cut:]
    if len(out) > MAX_LINES:
        extra = len(out) - MAX_LINES
        cand = [i for i, o in enumerate(out) if not o.key]
        drop = set(ctx.rng.sample(cand, min(extra, len(cand))))
        out = [o for i, o in enumerate(out) if i not in drop]
    return out[-MAX_LINES:]
