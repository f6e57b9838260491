"""A ``systemctl status`` block pasted alone (no journal lines below it): its Active: and
Main PID: lines tell the story — a stop that timed out and was killed (wedged_stop), a unit
waiting to restart after its main process failed (other_crash), a dump (other_crash)."""

from __future__ import annotations

from datetime import timedelta

from advisor.parsing.catalog import Message

from .catalog import DAYS
from .context import Ctx
from .fmt import ago, timespan
from .messages import render

STATES = {
    "wedged_stop": (
        ("failed (Result: timeout)", "code=killed, signal=KILL"),
        ("deactivating (stop-sigkill)", ""),
        ("failed (Result: timeout)", "code=dumped, signal=ABRT"),
    ),
    "other_crash": (
        ("activating (auto-restart) (Result: exit-code)", "code=exited, status=1/FAILURE"),
        ("failed (Result: exit-code)", "code=exited, status=1/FAILURE"),
        ("failed (Result: core-dump)", "code=dumped, signal=SEGV"),
        ("activating (auto-restart) (Result: signal)", "code=killed, signal=SEGV"),
    ),
}


def status_alone(ctx: Ctx, label: str, msg: Message | None = None) -> None:
    """The block for ``label``; with ``msg`` (an Active: or Main PID: message) that line."""
    rng = ctx.rng
    ctx.rec_engine, ctx.rec_version = "systemd", str(ctx.sysd)
    ctx.flags.add("short_ok")
    state, main = rng.choice(STATES.get(label, STATES["other_crash"]))
    given = render(ctx, msg).strip() if msg is not None else ""
    if given.startswith("Active:"):
        state = given.removeprefix("Active:").split(" since ")[0].strip()
    if given.startswith("Main PID:"):
        main = given.split("(", 1)[1].rstrip(")")
    since = ctx.start + timedelta(seconds=rng.uniform(60, 90000))
    preset = "preset" if ctx.sysd >= 252 else "vendor preset"
    mark = "×" if state.startswith("failed") and ctx.sysd >= 247 else "●"
    block = [
        (f"{mark} {ctx.unit} - {ctx.desc}", False),
        (
            f"     Loaded: loaded (/etc/systemd/system/{ctx.unit}; enabled; {preset}: enabled)",
            False,
        ),
        (
            f"     Active: {state} since {DAYS[since.weekday()]} {since:%Y-%m-%d %H:%M:%S} UTC; "
            f"{ago(rng.uniform(2, 4000))}",
            True,
        ),
    ]
    if ctx.sysd >= 252 and rng.random() < 0.5:
        block.append((f"   Duration: {timespan(rng.uniform(30, 400000))}", False))
    pid = ctx.api.pid
    block.append(
        (
            f"    Process: {pid - 3} ExecStartPre=/usr/bin/nvidia-smi (code=exited, "
            "status=0/SUCCESS)",
            False,
        )
    )
    if main:
        block.append((f"   Main PID: {pid} ({main})", True))
    else:
        block.append((f"   Main PID: {pid} (python3)", False))
    block.append((f"        CPU: {timespan(ctx.cpu_s)}", False))
    if rng.random() < 0.4:
        block.append(("", False))
        block.append((f"{since:%b %d %H:%M:%S} {ctx.host} systemd[1]: Started {ctx.desc}.", False))
    ctx.block = block
