"""healthy: runs that start, serve and stop cleanly."""

from __future__ import annotations

from advisor.sim.texts import (
    READY_SENTENCE,
    UVICORN_SHUTDOWN_COMPLETE,
    UVICORN_SHUTTING_DOWN,
    UVICORN_WAITING_SHUTDOWN,
    uvicorn_finished,
)

from ..context import Ctx, Proc
from ..family import Family
from ..runs import leftover_lines
from ..sglang import sg_serve, sg_startup, sg_uv
from ..systemd import new_pids, sd_clean_exit, sd_start
from ..tgi import tg, tg_serve, tg_startup
from ..tracebacks import tb
from ..vllm_frames import MPX, stdlib
from ..vllm_lines import is_v1, model_procs, vlog, vraw
from ..vllm_serve import vllm_http_shutdown, vllm_serve
from ..vllm_startup import vllm_ready, vllm_startup


def vllm_stop_noise(ctx: Ctx) -> None:
    """Harmless lines after SIGTERM reached every process: shutdown notices and
    the workers' and engine core's exits that a clean stop prints."""
    rng = ctx.rng
    procs = model_procs(ctx)
    if ctx.tp > 1 and ctx.chance(0.4):
        p = rng.choice(procs)
        vraw(
            ctx,
            p,
            tb(
                ctx,
                [
                    (
                        MPX if is_v1(ctx) else "vllm/executor/multiproc_worker_utils.py",
                        "worker_busy_loop" if is_v1(ctx) else "_run_worker_process",
                        "method, args, kwargs, output_rank = self.rpc_broadcast_mq.dequeue("
                        if is_v1(ctx)
                        else "for items in iter(task_queue.get, _TERMINATE):",
                    ),
                    (
                        "vllm/distributed/device_communicators/shm_broadcast.py",
                        "acquire_read",
                        "time.sleep(RINGBUFFER_SLEEP_INTERVAL)",
                    ),
                ],
                ["KeyboardInterrupt"],
            ),
        )
    if ctx.tp > 1 and ctx.chance(0.5):
        p = rng.choice(procs)
        vraw(
            ctx,
            p,
            [
                f"[rank{p.rank}]:[W{ctx.now():%m%d %H:%M:%S}.{rng.randrange(10**6):06d} "
                f"{p.pid} ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group has "
                "NOT been destroyed before we destruct ProcessGroupNCCL. On normal program "
                "exit, the application should call destroy_process_group to ensure that any "
                "pending NCCL operations have finished in this process. In rare cases this "
                "process can exit before this point and block the progress of another "
                "member of the process group. This constraint has always been present,  but "
                "this warning has only recently been added. For more info, please see "
                "https://pytorch.org/docs/stable/distributed.html#shutdown (function "
                "operator())"
            ],
        )
    if not is_v1(ctx) and ctx.tp > 1 and ctx.chance(0.6):
        for p in ctx.workers[1:]:
            vlog(ctx, p, "INFO", "multiproc_worker_utils.py", "Worker exiting")
    if ctx.chance(0.35):
        vraw(
            ctx,
            ctx.api,
            [
                f"{stdlib(ctx)}/multiprocessing/resource_tracker.py:279: UserWarning: "
                f"resource_tracker: There appear to be {rng.randrange(1, 4)} leaked semaphore "
                "objects to clean up at shutdown",
                "  warnings.warn('resource_tracker: There appear to be %d '",
            ],
        )


def vllm_healthy(ctx: Ctx) -> None:
    rng = ctx.rng
    kind = rng.choice(("ready", "ready", "serve", "stop", "stop", "restart", "busy"))
    if kind != "busy" and ctx.chance(0.06):
        # left-overs of an earlier run that exit in time: the start still succeeds
        old = [Proc("ec", ctx.api.pid - rng.randrange(300, 3000))]
        ctx.sys(f"Starting {ctx.status}...")
        leftover_lines(ctx, old)
        ctx.needs_sys = False
        ctx.sys(f"Started {ctx.status}.")
    elif kind != "busy" or ctx.chance(0.3):
        sd_start(ctx)
    if kind == "busy":
        ctx.t += rng.uniform(3600, 86400)
        vllm_serve(ctx, rng.randrange(40, 110))
        return
    vllm_startup(ctx, "ready")
    vllm_ready(ctx)
    vllm_serve(ctx, rng.randrange(0, 8) if kind == "ready" else rng.randrange(8, 60))
    if kind in ("stop", "restart"):
        ctx.adv(30, 90000)
        ctx.sys(f"Stopping {ctx.status}...")
        ctx.adv(0.05, 1)
        vllm_http_shutdown(ctx)
        vllm_stop_noise(ctx)
        ctx.adv(0.5, 12)
        sd_clean_exit(ctx)
        ctx.sys(f"Stopped {ctx.status}.")
        if kind == "restart":
            new_pids(ctx)
            sd_start(ctx)
            vllm_startup(ctx, "ready")
            vllm_ready(ctx)
            vllm_serve(ctx, rng.randrange(0, 6))


def sg_healthy(ctx: Ctx) -> None:
    rng = ctx.rng
    kind = rng.choice(("ready", "serve", "stop", "busy"))
    if kind == "busy":
        ctx.t += rng.uniform(600, 80000)
        sg_serve(ctx, rng.randrange(40, 100))
        return
    sd_start(ctx)
    sg_startup(ctx, "serve")
    sg_serve(ctx, rng.randrange(0, 6) if kind == "ready" else rng.randrange(6, 50))
    if kind == "stop":
        ctx.adv(60, 80000)
        ctx.sys(f"Stopping {ctx.status}...")
        ctx.adv(0.1, 2)
        for ln in (
            UVICORN_SHUTTING_DOWN,
            UVICORN_WAITING_SHUTDOWN,
            UVICORN_SHUTDOWN_COMPLETE,
            uvicorn_finished(ctx.api.pid),
        ):
            sg_uv(ctx, ln)
        sd_clean_exit(ctx)
        ctx.sys(f"Stopped {ctx.status}.")


def tg_healthy(ctx: Ctx) -> None:
    rng = ctx.rng
    kind = rng.choice(("ready", "serve", "stop", "busy"))
    if kind == "busy":
        ctx.t += rng.uniform(600, 80000)
        tg_serve(ctx, rng.randrange(30, 90))
        return
    sd_start(ctx)
    tg_startup(ctx, "serve")
    tg_serve(ctx, rng.randrange(0, 6) if kind == "ready" else rng.randrange(6, 40))
    if kind == "stop":
        ctx.adv(60, 80000)
        ctx.sys(f"Stopping {ctx.status}...")
        tg(ctx, "INFO", "text_generation_launcher", "Terminating webserver")
        tg(ctx, "INFO", "text_generation_launcher", "Waiting for webserver to gracefully shutdown")
        tg(
            ctx,
            "INFO",
            "text_generation_router::server",
            f"router/src/server.rs:{ctx.lineno('sig')}: signal received, starting graceful "
            "shutdown",
        )
        tg(ctx, "INFO", "text_generation_launcher", "webserver terminated")
        tg(ctx, "INFO", "text_generation_launcher", "Shutting down shards")
        for r in range(ctx.tp):
            tg(
                ctx,
                "INFO",
                "shard-manager: text_generation_launcher",
                f"Terminating shard rank={r}",
            )
            tg(ctx, "INFO", "shard-manager: text_generation_launcher", f"shard terminated rank={r}")
        sd_clean_exit(ctx)
        ctx.sys(f"Stopped {ctx.status}.")


READY_MARKS = (READY_SENTENCE, "ready to roll!", "ready to serve requests.", ": Connected")


def mark_keys(ctx: Ctx) -> None:
    """A healthy run is told by its readiness line and its clean deactivation."""
    for e in ctx.evs:
        if e.src == "sys" and e.text.endswith(("Deactivated successfully.", "Succeeded.")):
            e.key = True
        if e.src == "app" and e.text.endswith(READY_MARKS):
            e.key = True


FAMILY = Family(
    "healthy",
    10,
    {"vllm": vllm_healthy, "sglang": sg_healthy, "tgi": tg_healthy},
    count=320,
    engine_weights=(68, 18, 14),
    reword=0.08,
    finish=mark_keys,
)
