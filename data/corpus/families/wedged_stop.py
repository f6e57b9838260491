"""wedged_stop: the unit does not stop; systemd times out and kills it."""

from __future__ import annotations

from advisor.sim.texts import UVICORN_SHUTTING_DOWN

from ..context import Ctx
from ..family import Family
from ..runs import wedged_stop_tail
from ..sglang import sg_serve, sg_startup, sg_uv
from ..systemd import new_pids, sd_start
from ..tgi import tg, tg_serve, tg_startup
from ..vllm_lines import vlog
from ..vllm_serve import vllm_http_shutdown, vllm_serve
from ..vllm_startup import vllm_dist_init, vllm_load, vllm_prelude, vllm_ready, vllm_startup


def vllm_wedged(ctx: Ctx) -> None:
    rng = ctx.rng
    sd_start(ctx)
    where = rng.random()
    if where < 0.65:
        vllm_startup(ctx, "ready")
        vllm_ready(ctx)
        vllm_serve(ctx, rng.randrange(2, 30))
    elif where < 0.85:
        vllm_startup(ctx, rng.choice(("profile", "graphs", "done")))
    else:
        vllm_prelude(ctx)
        vllm_dist_init(ctx)
        vllm_load(ctx, fail_after=rng.randrange(1, 8))
    ctx.adv(1, 300)
    ctx.sys(f"Stopping {ctx.status}...", key=True)
    ctx.adv(0.05, 1)
    if where < 0.65 and ctx.chance(0.7):
        vllm_http_shutdown(ctx, complete=False)
    if ctx.grank >= 33 and ctx.chance(0.5):
        vlog(
            ctx,
            ctx.api,
            "WARNING",
            "multiproc_executor.py",
            "[shutdown] Executor: workers still running after grace period; sending SIGKILL",
        )
    ctx.needs_sys = True
    wedged_stop_tail(ctx, rng.choice((90, 90, 90, 45, 30, 120, 300)))
    if ctx.chance(0.25):
        ctx.adv(1, 60)
        new_pids(ctx)
        sd_start(ctx)
        vllm_prelude(ctx)


def sg_wedged(ctx: Ctx) -> None:
    sd_start(ctx)
    sg_startup(ctx, "serve" if ctx.chance(0.7) else "graphs")
    sg_serve(ctx, ctx.rng.randrange(0, 25))
    ctx.adv(60, 50000)
    ctx.sys(f"Stopping {ctx.status}...", key=True)
    if ctx.chance(0.5):
        sg_uv(ctx, UVICORN_SHUTTING_DOWN)
        sg_uv(ctx, "INFO:     Waiting for application shutdown.")
    ctx.needs_sys = True
    wedged_stop_tail(ctx, ctx.rng.choice((90, 90, 45, 120)))


def tg_wedged(ctx: Ctx) -> None:
    sd_start(ctx)
    tg_startup(ctx, "serve")
    tg_serve(ctx, ctx.rng.randrange(0, 20))
    ctx.adv(60, 50000)
    ctx.sys(f"Stopping {ctx.status}...", key=True)
    if ctx.chance(0.6):
        tg(ctx, "INFO", "text_generation_launcher", "Terminating webserver")
        tg(ctx, "INFO", "text_generation_launcher", "Waiting for webserver to gracefully shutdown")
    ctx.needs_sys = True
    wedged_stop_tail(ctx, ctx.rng.choice((90, 90, 45, 120)))


FAMILY = Family(
    "wedged_stop",
    6,
    {"vllm": vllm_wedged, "sglang": sg_wedged, "tgi": tg_wedged},
)
