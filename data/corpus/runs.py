"""Whole runs shared by families: a healthy earlier run, leftovers of a previous run, hung
tasks and systemd giving up on a stop."""

from __future__ import annotations

from .context import Ctx, Proc
from .sglang import sg_serve, sg_startup
from .systemd import all_procs, comm, new_pids, sd_clean_exit, sd_consumed, sd_start
from .tgi import tg_serve, tg_startup
from .vllm_serve import vllm_http_shutdown, vllm_serve
from .vllm_startup import vllm_ready, vllm_startup


def leftover_lines(ctx: Ctx, procs: list[Proc]) -> None:
    ctx.needs_sys = True
    for p in procs:
        ctx.sys(
            f"{ctx.unit}: Found left-over process {p.pid} ({comm(ctx, p)}) in control group "
            "while starting unit. Ignoring.\nThis usually indicates unclean termination of a "
            "previous run, or service implementation deficiencies.",
            key=True,
        )


def previous_run_leftovers(ctx: Ctx) -> list[Proc]:
    """An earlier run whose children outlived it (KillMode=process, or killed main PID)."""
    rng = ctx.rng
    old = [ctx.ec, *ctx.workers] if ctx.tp > 1 and ctx.engine == "vllm" else [ctx.ec]
    old = [Proc(p.role, p.pid, p.rank) for p in old]
    if ctx.chance(0.5):
        ctx.sys(f"Stopping {ctx.status}...")
        ctx.adv(0.5, 8)
        if ctx.engine == "vllm" and ctx.group:
            vllm_http_shutdown(ctx, complete=ctx.chance(0.5))
        for p in old:
            ctx.sys(
                f"{ctx.unit}: Unit process {p.pid} ({comm(ctx, p)}) remains running after "
                "unit stopped."
            )
        sd_clean_exit(ctx)
        ctx.sys(f"Stopped {ctx.status}.")
        ctx.adv(2, 400)
    new_pids(ctx)
    if rng.random() < 0.8:
        ctx.sys(f"Starting {ctx.status}...")
    leftover_lines(ctx, old[: rng.randrange(1, len(old) + 1)])
    ctx.sys(f"Started {ctx.status}.")
    ctx.needs_sys = True
    return old


def hung_task(ctx: Ctx, p: Proc) -> None:
    secs = ctx.rng.choice((120, 122, 241, 245, 362, 483))
    ctx.kern(f"INFO: task {comm(ctx, p)}:{p.pid} blocked for more than {secs} seconds.")
    kv = ctx.rng.choice(
        (
            "6.8.0-45-generic #45-Ubuntu",
            "5.15.0-119-generic #129-Ubuntu",
            "6.1.0-25-amd64 #1 Debian 6.1.106-3",
            "5.14.0-427.13.1.el9_4.x86_64 #1",
        )
    )
    ctx.kern(f"      Tainted: P           OE      {kv}")
    ctx.kern('"echo 0 > /proc/sys/kernel/hung_task_timeout_secs" disables this message.')
    ctx.kern(f"task:{comm(ctx, p)} state:D stack:0     pid:{p.pid}  ppid:1      flags:0x00004002")


def wedged_stop_tail(ctx: Ctx, timeout: float) -> None:
    """systemd giving up on a stop: ``TimeoutStopSec`` elapses, the main process and then the
    rest of the cgroup get SIGKILL, and the unit fails with result 'timeout'."""
    rng = ctx.rng
    ctx.adv(timeout)
    skip = ctx.chance(0.07)
    abort = not skip and ctx.chance(0.05)
    verb = "Skipping SIGKILL" if skip else ("Aborting" if abort else "Killing")
    ctx.sys(
        ctx.pick(
            f"{ctx.unit}: State 'stop-sigterm' timed out. {verb}.",
            (
                f"{ctx.unit}: stop-sigterm timed out after {timeout:.0f}s, sending SIGKILL.",
                f"{ctx.unit}: Stop operation timed out. Killing remaining processes.",
                f"{ctx.unit}: Timeout while waiting for processes to exit after SIGTERM. Killing.",
            ),
        ),
        key=True,
    )
    procs = all_procs(ctx)
    if not skip:
        sig = "SIGABRT" if abort else "SIGKILL"
        for p in procs:
            if ctx.chance(0.9):
                ctx.sys(
                    f"{ctx.unit}: Killing process {p.pid} ({comm(ctx, p)}) with signal {sig}.",
                    key=True,
                )
    ctx.adv(0.01, 1)
    stuck = ctx.chance(0.35)
    if ctx.chance(0.85):
        sig = "6/ABRT" if abort else "9/KILL"
        ctx.sys(
            f"{ctx.unit}: Main process exited, code={'dumped' if abort else 'killed'}, status={sig}"
        )
    if stuck:
        if ctx.chance(0.4):
            hung_task(ctx, rng.choice(procs[1:] or procs))
        ctx.adv(timeout)
        ctx.sys(f"{ctx.unit}: Processes still around after SIGKILL. Ignoring.", key=True)
        if ctx.chance(0.5):
            ctx.adv(timeout)
            ctx.sys(f"{ctx.unit}: State 'final-sigterm' timed out. Killing.", key=True)
            ctx.adv(timeout)
            ctx.sys(
                f"{ctx.unit}: Processes still around after final SIGKILL. Entering failed mode.",
                key=True,
            )
    ctx.sys(f"{ctx.unit}: Failed with result 'timeout'.", key=True)
    if ctx.chance(0.7):
        ctx.sys(
            f"Stopped {ctx.status}." if ctx.chance(0.8) else f"Timed out stopping {ctx.status}."
        )
    if ctx.chance(0.6):
        sd_consumed(ctx)


def engine_serve_generic(ctx: Ctx) -> None:
    if ctx.engine == "sglang":
        sg_startup(ctx, "serve")
        sg_serve(ctx, ctx.rng.randrange(2, 10))
    elif ctx.engine == "tgi":
        tg_startup(ctx, "serve")
        tg_serve(ctx, ctx.rng.randrange(2, 10))
    else:
        vllm_startup(ctx, "ready")
        vllm_ready(ctx)
        vllm_serve(ctx, ctx.rng.randrange(2, 10))


def prior_healthy_run(ctx: Ctx) -> None:
    """An earlier run of the unit that started, served and stopped cleanly."""
    rng = ctx.rng
    sd_start(ctx)
    engine_serve_generic(ctx)
    ctx.adv(60, 200000)
    ctx.sys(f"Stopping {ctx.status}...")
    if ctx.engine == "vllm":
        vllm_http_shutdown(ctx)
    sd_clean_exit(ctx)
    ctx.sys(f"Stopped {ctx.status}.")
    ctx.adv(5, 90000)
    new_pids(ctx)
    if rng.random() < 0.3:
        ctx.evs = ctx.evs[rng.randrange(0, max(1, len(ctx.evs) // 2)) :]
