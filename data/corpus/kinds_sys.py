"""New example kinds told by the system around the engine: systemd's older wording of a stop
that timed out, ``systemctl status`` alone, the Docker daemon giving up on a container, the
kernel's hung-task report of a process stuck in exit, and healthy runs logging at DEBUG."""

from __future__ import annotations

from .context import Ctx
from .fmt import hexs
from .hosts import VERSIONS, host_run
from .producers import iso
from .runs import hung_task
from .status import status_alone
from .systemd import all_procs
from .vllm_lines import model_procs, vlog


def old_systemd_wedged(ctx: Ctx) -> None:
    """systemd 219 (CentOS 7 era): ``UNIT stopping timed out. Terminating.`` and
    ``Unit UNIT entered failed state.``"""
    ctx.sysd, ctx.status_fmt = 219, "description"
    host_run(ctx, "ready")
    ctx.adv(60, 40000)
    ctx.sys(f"Stopping {ctx.desc}...", key=True)
    ctx.adv(90)
    u = ctx.unit
    if ctx.chance(0.5):
        ctx.sys(f"{u} stopping timed out. Terminating.", key=True)
        ctx.adv(90)
    ctx.sys(f"{u} stop-sigterm timed out. Killing.", key=True)
    ctx.sys(f"{u}: main process exited, code=killed, status=9/KILL")
    if ctx.chance(0.4):
        ctx.adv(90)
        ctx.sys(f"{u} still around after SIGKILL. Ignoring.", key=True)
    ctx.sys(f"Stopped {ctx.desc}.")
    ctx.sys(f"Unit {u} entered failed state.", key=True)
    ctx.sys(f"{u} failed.")
    ctx.needs_sys = True


def status_wedged(ctx: Ctx) -> None:
    status_alone(ctx, "wedged_stop")


def status_crash(ctx: Ctx) -> None:
    status_alone(ctx, "other_crash")


def docker_wedged(ctx: Ctx) -> None:
    """dockerd's lines as ``docker stop`` times out on the container."""
    rng = ctx.rng
    ctx.rec_engine = "docker"
    ctx.rec_version = rng.choice(VERSIONS["docker"])
    host_run(ctx, "ready")
    ctx.adv(60, 30000)
    cid = hexs(rng, 64)
    new = ctx.rec_version >= "20.10.10"
    timeout = rng.choice((10, 10, 30))

    def d(level: str, msg: str, key: bool = True) -> None:
        extra = f" container={cid}" if new else ""
        line = f'time="{iso(ctx, True)}" level={level} msg="{msg}"{extra}'
        ctx.add("other", line, key, pid=1187, ident="dockerd")

    if new:
        d("info", f"Container failed to exit within {timeout}s of signal 15 - using the force")
    else:
        d(
            "info",
            f"Container {cid} failed to exit within {timeout} seconds of signal 15 - using the "
            "force",
        )
    ctx.adv(10, 30)
    if ctx.chance(0.6):
        d("error", f"Container {cid[:12]} refused to die, giving up after SIGKILL")
    if ctx.chance(0.5):
        d(
            "error",
            f"Handler for POST /v1.{rng.randrange(40, 47)}/containers/{cid[:12]}/stop returned "
            "error: cannot stop container: tried to kill container, but did not receive an "
            "exit event",
        )
    if ctx.chance(0.4):
        ctx.kern(f"docker0: port 1(veth{hexs(rng, 7)}) entered disabled state")
    ctx.needs_sys = True


HUNG_STACK = (
    "__schedule+0x{a}/0x{b}",
    "schedule+0x{a}/0x{b}",
    "schedule_timeout+0x{a}/0x{b}",
    "wait_for_completion+0x{a}/0x{b}",
    "uvm_va_space_destroy+0x{a}/0x{b} [nvidia_uvm]",
    "uvm_release+0x{a}/0x{b} [nvidia_uvm]",
    "__fput+0x{a}/0x{b}",
    "task_work_run+0x{a}/0x{b}",
    "do_exit+0x{a}/0x{b}",
    "do_group_exit+0x{a}/0x{b}",
    "get_signal+0x{a}/0x{b}",
    "arch_do_signal_or_restart+0x{a}/0x{b}",
    "exit_to_user_mode_prepare+0x{a}/0x{b}",
    "syscall_exit_to_user_mode+0x{a}/0x{b}",
    "do_syscall_64+0x{a}/0x{b}",
    "entry_SYSCALL_64_after_hwframe+0x{a}/0x{b}",
)


def kernel_hung_exit(ctx: Ctx) -> None:
    """``INFO: task python3:N blocked for more than 120 seconds.`` with a stack in exit."""
    rng = ctx.rng
    ctx.rec_engine, ctx.rec_version = "kernel", rng.choice(("5.15.0", "6.5.0", "6.8.0"))
    alone = ctx.chance(0.6)
    if alone:
        ctx.flags.update(("kernel_only", "short_ok"))
        ctx.t += rng.uniform(100, 90000)
    else:
        host_run(ctx, "ready")
        ctx.adv(60, 9000)
        ctx.sys(f"Stopping {ctx.status}...")
        ctx.adv(120, 130)
    procs = all_procs(ctx)
    p = rng.choice(procs[1:] or procs)
    for _ in range(rng.choice((1, 1, 2))):
        hung_task(ctx, p)
        ctx.evs[-4].key = True
        ctx.kern("Call Trace:")
        ctx.kern(" <TASK>")
        for fr in HUNG_STACK[rng.randrange(0, 4) :]:
            ctx.kern(
                " " + fr.format(a=hex(rng.randrange(16, 2000)), b=hex(rng.randrange(2000, 4000))),
                key="do_exit" in fr or "get_signal" in fr,
            )
        ctx.kern(" </TASK>")
        ctx.adv(120, 125)
    ctx.needs_kern = True


def healthy_debug(ctx: Ctx) -> None:
    """A healthy vLLM run at ``VLLM_LOGGING_LEVEL=DEBUG``: free memory, KV cache and CUDA graph
    lines that read like trouble and are not."""
    rng = ctx.rng
    host_run(ctx, "ready")
    if ctx.engine != "vllm":
        return
    p = model_procs(ctx)[0]
    total = ctx.gpu.gib
    free = total * rng.uniform(0.9, 0.99)
    lines = [
        (
            "gpu_worker.py",
            f"Initial free memory: {free:.2f} GiB; Requested memory: {ctx.util:.2f} (util), "
            f"{total * ctx.util:.2f} GiB",
        ),
        (
            "gpu_worker.py",
            f"Free memory on device ({free:.2f}/{total:.2f} GiB) on startup. Desired GPU memory "
            f"utilization is ({ctx.util}, {total * ctx.util:.2f} GiB).",
        ),
        (
            "gpu_worker.py",
            f"Memory profiling takes {rng.uniform(2, 20):.2f} seconds. Total non KV cache memory: "
            f"{rng.uniform(15, 40):.2f}GiB; torch peak memory increase: "
            f"{rng.uniform(0.5, 4):.2f}GiB",
        ),
        (
            "kv_cache_utils.py",
            f"KV cache: {rng.randrange(1000, 90000)} free blocks, {rng.randrange(0, 50)} in use, "
            f"prefix cache hit rate {rng.uniform(0, 60):.1f}%",
        ),
        (
            "cuda_graph.py",
            "Capturing a cudagraph for batch size "
            f"{rng.choice((1, 2, 4, 8, 16, 32, 64, 128, 256, 512))}",
        ),
        ("backends.py", f"Compiling a graph for dynamic shape takes {rng.uniform(2, 40):.2f} s"),
        ("core.py", "EngineCore waiting for work."),
        ("core.py", "EngineCore loop active."),
        (
            "gpu_model_runner.py",
            f"Graph capturing finished in {rng.randrange(5, 60)} secs, took "
            f"{rng.uniform(0.1, 2):.2f} GiB",
        ),
        (
            "block_pool.py",
            f"Freed {rng.randrange(1, 200)} KV cache blocks; {rng.randrange(1000, 90000)} free",
        ),
    ]
    for _ in range(rng.randrange(8, 20)):
        ctx.adv(0.05, 30)
        f, text = rng.choice(lines)
        vlog(ctx, p, "DEBUG", f, text)
