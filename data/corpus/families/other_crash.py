"""other_crash: every other crash (imports, arguments, segfaults, host OOM kills...)."""

from __future__ import annotations

from collections.abc import Callable

from ..context import Ctx
from ..crashes_fault import (
    other_driver,
    other_hf,
    other_host_oom,
    other_illegal,
    other_timeout,
    other_value,
)
from ..crashes_start import other_argparse, other_exec, other_import, other_segv
from ..family import Family
from ..fmt import hexs
from ..systemd import sd_fail, sd_start
from ..tgi import tg, tg_startup
from ..tracebacks import tb


def vllm_other(ctx: Ctx) -> None:
    fams: list[tuple[Callable[[Ctx], None], float]] = [
        (other_import, 1.0),
        (other_argparse, 1.0),
        (other_exec, 0.8),
        (other_segv, 1.0),
        (other_hf, 1.0),
        (other_value, 1.2),
        (other_host_oom, 1.0),
        (other_illegal, 1.0),
        (other_driver, 0.8),
    ]
    if ctx.grank >= 33:
        fams.append((other_timeout, 0.6))
    funcs = [f for f, _ in fams]
    ctx.rng.choices(funcs, weights=[w for _, w in fams])[0](ctx)


def sg_other(ctx: Ctx) -> None:
    fams: list[Callable[[Ctx], None]] = [
        other_import,
        other_argparse,
        other_exec,
        other_segv,
        other_hf,
        other_value,
        other_host_oom,
    ]
    ctx.rng.choice(fams)(ctx)


def tg_other(ctx: Ctx) -> None:
    rng = ctx.rng
    if ctx.chance(0.25):
        sd_start(ctx)
        tg_startup(ctx, "download")
        m = ctx.model.name
        tg(ctx, "ERROR", "download: text_generation_launcher", "Download encountered an error:")
        ctx.evs[-1].tag = "tbhead"
        for ln in tb(
            ctx,
            [
                (
                    "text_generation_server/cli.py",
                    "download_weights",
                    "utils.weight_files(model_id, revision, extension)",
                ),
                (
                    "huggingface_hub/utils/_http.py",
                    "hf_raise_for_status",
                    "raise _format(GatedRepoError, message, response) from e",
                ),
            ],
            [
                f"huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request ID: "
                f"Root=1-{hexs(rng, 8)}-{hexs(rng, 24)})",
                "",
                f"Cannot access gated repo for url https://huggingface.co/api/models/{m}.",
                f"Access to model {m} is restricted. You must have access to it and be "
                "authenticated to access it. Please log in.",
            ],
        ):
            ctx.app(ln, "401" in ln or "gated" in ln)
        ctx.app("Error: DownloadError", key=True)
        sd_fail(ctx)
        return
    ctx.rng.choice((other_argparse, other_exec, other_segv, other_host_oom, other_import))(ctx)


FAMILY = Family(
    "other_crash",
    9,
    {"vllm": vllm_other, "sglang": sg_other, "tgi": tg_other},
)
