"""systemd's lines for a unit (start, failure, restart, resources consumed) and kernel lines."""

from __future__ import annotations

from .context import Ctx, Proc
from .fmt import timespan


def sd_start(ctx: Ctx, starting: bool | None = None) -> None:
    if starting if starting is not None else ctx.chance(0.35):
        ctx.sys(f"Starting {ctx.status}...")
    ctx.adv(0.01, 0.2)
    ctx.sys(f"Started {ctx.status}.")
    ctx.run_start = ctx.t
    ctx.adv(0.2, 1.5)


def sd_consumed(ctx: Ctx) -> None:
    cpu = max(ctx.t - ctx.run_start, 3.0) * ctx.rng.uniform(0.4, 2.5)
    if ctx.sysd >= 255:
        peak = f"{ctx.rng.uniform(2, 90):.1f}G"
        extra = ", 0B memory swap peak" if ctx.sysd == 255 else ""
        ctx.sys(f"{ctx.unit}: Consumed {timespan(cpu)} CPU time, {peak} memory peak{extra}.")
    else:
        ctx.sys(f"{ctx.unit}: Consumed {timespan(cpu)} CPU time.")


def sd_fail(
    ctx: Ctx,
    code: str = "exited",
    status: str = "1/FAILURE",
    result: str = "exit-code",
    key: bool = False,
) -> None:
    ctx.adv(0.2, 3)
    ctx.sys(f"{ctx.unit}: Main process exited, code={code}, status={status}", key)
    ctx.sys(f"{ctx.unit}: Failed with result '{result}'.", key)
    if ctx.chance(0.8):
        sd_consumed(ctx)


def sd_clean_exit(ctx: Ctx) -> None:
    ctx.adv(0.2, 2)
    ctx.sys(f"{ctx.unit}: {'Deactivated successfully' if ctx.sysd >= 248 else 'Succeeded'}.")
    if ctx.chance(0.7):
        sd_consumed(ctx)


def sd_restart(ctx: Ctx, restart_sec: float | None = None) -> None:
    ctx.adv(restart_sec if restart_sec is not None else ctx.rng.choice((0.1, 5, 10, 30)))
    ctx.restarts += 1
    ctx.sys(f"{ctx.unit}: Scheduled restart job, restart counter is at {ctx.restarts}.")
    if ctx.sysd < 253:
        ctx.sys(f"Stopped {ctx.status}.")
    new_pids(ctx)
    sd_start(ctx, starting=ctx.chance(0.3))


def new_pids(ctx: Ctx) -> None:
    base = ctx.api.pid + ctx.rng.randrange(300, 4000)
    ctx.api = Proc("api", base)
    ctx.ec = Proc(ctx.ec.role, base + ctx.rng.randrange(60, 200))
    w0 = ctx.ec.pid + ctx.rng.randrange(30, 90)
    ctx.workers = [Proc("worker", w0 + r * ctx.rng.choice((1, 1, 2)), r) for r in range(ctx.tp)]


def comm(ctx: Ctx, p: Proc) -> str:
    """The 15-char kernel comm of a process, as systemd prints it."""
    if ctx.engine == "vllm":
        if p.role == "api":
            return ctx.ident if ctx.ident != "docker" else "python3"
        if ctx.grank >= 10:
            return "VLLM::EngineCor" if p.role == "ec" else "VLLM::Worker_TP"
        return "python3"
    if ctx.engine == "sglang":
        return "python3" if p.role == "api" else "sglang::schedul"
    return "text-generation" if p.role == "api" else "python3"


def all_procs(ctx: Ctx) -> list[Proc]:
    procs = [ctx.api]
    if ctx.engine != "vllm" or (ctx.group and ctx.group.v1 and not ctx.v0) or ctx.grank >= 6:
        procs.append(ctx.ec)
    if ctx.tp > 1:
        procs += (
            ctx.workers if ctx.engine == "vllm" and ctx.group and ctx.group.v1 else ctx.workers[1:]
        )
    return procs


def pci_of(ctx: Ctx, rank: int) -> str:
    while len(ctx.pci) <= rank:
        ctx.pci.append(
            ctx.rng.choice(
                (
                    "0000:07:00",
                    "0000:0f:00",
                    "0000:3b:00",
                    "0000:41:00",
                    "0000:47:00",
                    "0000:4e:00",
                    "0000:87:00",
                    "0000:90:00",
                    "0000:b7:00",
                    "0000:bd:00",
                    "0000:c1:00",
                    "0000:ca:00",
                    "0000:18:00",
                    "0000:86:00",
                    "0000:af:00",
                    "0000:d8:00",
                )
            )
        )
    return ctx.pci[rank]


def xid_line(ctx: Ctx, rank: int, xid: int, text: str, p: Proc | None) -> str:
    who = ""
    if p is not None:
        style = ctx.rng.random()
        if style < 0.8:
            who = f"pid={p.pid}, name={comm(ctx, p)}, "
        elif style < 0.9:
            who = "pid='<unknown>', name=<unknown>, "
    return f"NVRM: Xid (PCI:{pci_of(ctx, rank)}): {xid}, {who}{text}"
