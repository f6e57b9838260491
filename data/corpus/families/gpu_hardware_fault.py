"""gpu_hardware_fault: Xid errors in the kernel log and the CUDA errors they cause."""

from __future__ import annotations

from ..context import Ctx, Proc
from ..family import Family
from ..fmt import hexs
from ..runs import wedged_stop_tail
from ..sglang import SG_SCHED, sg_fail, sg_ready, sg_serve, sg_startup
from ..systemd import pci_of, sd_clean_exit, sd_fail, sd_start, xid_line
from ..tgi import tg, tg_ready, tg_serve, tg_shard_tb, tg_shutdown_failed, tg_startup
from ..torch_errors import cuda_error_lines
from ..tracebacks import Frame, tb
from ..vllm_failures import vllm_exit_after_startup_failure, vllm_startup_failure
from ..vllm_frames import R1, W1, loader_frames
from ..vllm_lines import is_v1, model_procs, vraw
from ..vllm_runtime import vllm_runtime_death
from ..vllm_serve import vllm_http_shutdown, vllm_serve
from ..vllm_startup import vllm_dist_init, vllm_load, vllm_prelude, vllm_ready, vllm_startup

HW_XIDS = {
    79: "GPU has fallen off the bus.",
    48: "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at "
    "partition {a}, subpartition {b}.",
    94: "Contained: SM (0x1). RST: No, D-RST: No",
    95: "Uncontained: FBHUB. RST: Yes, D-RST: No",
    63: "Row Remapper: New row marked for remapping, reset gpu to activate.",
    64: "Row Remapper: Failed to remap row, reset gpu to activate.",
    74: "NVLink: fatal error detected on link {a}(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
    92: "High single-bit ECC error rate",
    119: "Timeout after 6s of waiting for RPC response from GPU{a} GSP! Expected function 76 "
    "(GSP_RM_CONTROL) (0x20800a4c 0x4).",
    120: "GSP task exception: task 1 raised error code 0x{b}5 at 0x6d03f78 (0 more errors skipped)",
}


HW_CUDA = {
    79: ("unspecified launch failure", "unknown error", "an illegal memory access was encountered"),
    48: ("uncorrectable ECC error encountered",),
    94: ("uncorrectable ECC error encountered",),
    95: ("uncorrectable ECC error encountered", "unspecified launch failure"),
    63: ("uncorrectable ECC error encountered",),
    64: ("uncorrectable ECC error encountered",),
    74: ("unspecified launch failure", "unknown error"),
    92: ("unknown error",),
    119: ("unspecified launch failure", "unknown error"),
    120: ("unspecified launch failure",),
}


def hw_kernel(ctx: Ctx, xid: int, rank: int, p: Proc | None) -> None:
    rng = ctx.rng
    pci = pci_of(ctx, rank)
    if xid == 79 and ctx.chance(0.5):
        ctx.kern(
            f"NVRM: GPU at PCI:{pci}: GPU-{hexs(rng, 8)}-{hexs(rng, 4)}-{hexs(rng, 4)}-"
            f"{hexs(rng, 4)}-{hexs(rng, 12)}"
        )
        ctx.kern(f"NVRM: GPU Board Serial Number: {rng.randrange(10**12, 10**13)}")
    text = HW_XIDS[xid].format(a=rng.randrange(0, 8), b=rng.randrange(0, 2))
    text = (
        ctx.pick(text, ())
        if xid != 79
        else ctx.pick(text, ("GPU has fallen off the bus", "GPU fell off the bus."))
    )
    ctx.kern(xid_line(ctx, rank, xid, text, p), key=True)
    if xid == 79:
        ctx.kern(f"NVRM: GPU {pci}.0: GPU has fallen off the bus.", key=True)
        if ctx.chance(0.5):
            ctx.kern("NVRM: A GPU crash dump has been created. If possible, please run")
            ctx.kern("NVRM: nvidia-bug-report.sh as root to collect this data before")
            ctx.kern("NVRM: the NVIDIA kernel module is unloaded.")
    elif xid in (48, 94, 95) and ctx.chance(0.4):
        ctx.adv(0.001, 0.05)
        ctx.kern(xid_line(ctx, rank, 63, HW_XIDS[63], p), key=True)


def hw_app_error(ctx: Ctx, xid: int) -> list[str]:
    what = ctx.rng.choice(HW_CUDA[xid])
    lines = cuda_error_lines(ctx, what)
    if ctx.reword and "ECC" in what:
        lines[0] = lines[0].replace(
            "uncorrectable ECC error encountered",
            ctx.rng.choice(
                (
                    "GPU reported an uncorrectable memory (ECC) error",
                    "uncorrectable ECC error detected on device",
                )
            ),
        )
    return lines


def vllm_hw_fault(ctx: Ctx) -> None:
    rng = ctx.rng
    xid = rng.choice((79, 79, 79, 48, 94, 95, 63, 74, 119, 64, 92, 120))
    variant = rng.random()
    if variant < 0.15:
        # ExecStartPre nvidia-smi check finds the GPU lost
        hw_kernel(ctx, 79, rng.randrange(ctx.tp), None)
        ctx.adv(60, 3600)
        ctx.sys(f"Starting {ctx.status}...")
        pre = ctx.api.pid - rng.randrange(2, 30)
        for r in range(ctx.tp if ctx.chance(0.5) else 1):
            ctx.add(
                "pre",
                f"Unable to determine the device handle for GPU "
                f"{pci_of(ctx, r).upper()}.0: GPU is lost.  Reboot the system to "
                "recover this GPU",
                key=True,
                pid=pre,
                ident="nvidia-smi",
            )
        ctx.sys(f"{ctx.unit}: Control process exited, code=exited, status=15/n/a", key=True)
        ctx.sys(f"{ctx.unit}: Failed with result 'exit-code'.")
        ctx.sys(f"Failed to start {ctx.status}.")
        ctx.needs_sys = True
        if ctx.chance(0.5):
            sd_restart_pre_fail(ctx, pre)
        return
    if variant < 0.3:
        sd_start(ctx)
        vllm_prelude(ctx)
        ctx.adv(0.5, 3)
        exc = [
            "pynvml.NVMLError_GpuIsLost: GPU is lost"
            if ctx.chance(0.6)
            else "vllm.third_party.pynvml.NVMLError_GpuIsLost: GPU is lost"
        ]
        frames: list[Frame] = [
            (
                "vllm/platforms/cuda.py",
                "get_device_name",
                "return cls._get_physical_device_name(physical_device_id)",
            ),
            (
                "vllm/platforms/cuda.py",
                "_get_physical_device_name",
                "return pynvml.nvmlDeviceGetName(handle)",
            ),
            (
                "vllm/third_party/pynvml.py" if ctx.grank >= 11 else "pynvml.py",
                "nvmlDeviceGetName",
                "_nvmlCheckReturn(ret)",
            ),
            (
                "vllm/third_party/pynvml.py" if ctx.grank >= 11 else "pynvml.py",
                "_nvmlCheckReturn",
                "raise NVMLError(ret)",
            ),
        ]
        if ctx.chance(0.5):
            hw_kernel(ctx, 79, 0, None)
        vraw(ctx, ctx.api, tb(ctx, frames, exc), key_all=False, keys=("GPU is lost",))
        sd_fail(ctx)
        return
    sd_start(ctx)
    runtime = variant < 0.8
    if runtime:
        vllm_startup(ctx, "ready")
        vllm_ready(ctx)
        vllm_serve(ctx, rng.randrange(2, 20))
        ctx.adv(10, 5000)
    else:
        vllm_prelude(ctx)
        vllm_dist_init(ctx)
        vllm_load(ctx, fail_after=rng.randrange(0, 5))
    procs = model_procs(ctx)
    rank = rng.randrange(len(procs))
    hw_kernel(ctx, xid, rank, procs[rank])
    ctx.needs_kern = True
    ctx.adv(0.01, 2)
    exc = hw_app_error(ctx, xid)
    keys = ("ECC", "fallen off", "GPU is lost", exc[0])
    if "ECC" in exc[0]:
        ctx.needs_kern = False
    if runtime:
        vllm_runtime_death(ctx, exc, None, keys)
        ctx.adv(0.2, 4)
        if ctx.chance(0.3) and xid == 79:
            ctx.sys(f"Stopping {ctx.status}...")
            wedged_stop_tail(ctx, 90)
            return
        vllm_http_shutdown(ctx, complete=ctx.chance(0.6))
        sd_fail(ctx) if ctx.chance(0.7) else sd_clean_exit(ctx)
    else:
        wf = (
            [
                (W1, "load_model", "self.model_runner.load_model()"),
                (R1, "load_model", "self.model = model_loader.load_model("),
                *loader_frames(ctx),
            ]
            if is_v1(ctx)
            else loader_frames(ctx)
        )
        vllm_startup_failure(ctx, "load", exc, None, None, keys, wf, n_fail=1)
        vllm_exit_after_startup_failure(ctx)


def sd_restart_pre_fail(ctx: Ctx, pre: int) -> None:
    ctx.adv(5, 30)
    ctx.restarts += 1
    ctx.sys(f"{ctx.unit}: Scheduled restart job, restart counter is at {ctx.restarts}.")
    ctx.sys(f"Starting {ctx.status}...")
    ctx.add(
        "pre",
        f"Unable to determine the device handle for GPU {pci_of(ctx, 0).upper()}.0: "
        "GPU is lost.  Reboot the system to recover this GPU",
        pid=pre + 40,
        ident="nvidia-smi",
    )
    ctx.sys(f"{ctx.unit}: Control process exited, code=exited, status=15/n/a")
    ctx.sys(f"{ctx.unit}: Failed with result 'exit-code'.")
    ctx.sys(f"Failed to start {ctx.status}.")


def sg_hw(ctx: Ctx) -> None:
    sd_start(ctx)
    sg_startup(ctx, "ready")
    sg_ready(ctx)
    sg_serve(ctx, ctx.rng.randrange(2, 20))
    ctx.adv(60, 5000)
    xid = ctx.rng.choice((79, 79, 48, 94, 95, 74, 119))
    rank = ctx.rng.randrange(ctx.tp)
    hw_kernel(ctx, xid, rank, ctx.workers[rank])
    exc = hw_app_error(ctx, xid)
    ctx.needs_kern = "ECC" not in exc[0]
    frames = [
        (SG_SCHED, "event_loop_normal", "result = self.run_batch(batch)"),
        (
            "sglang/srt/managers/tp_worker.py",
            "forward_batch_generation",
            "logits_output, can_run_cuda_graph = self.model_runner.forward(",
        ),
    ]
    sg_fail(ctx, tb(ctx, frames, exc), ("ECC", exc[0]), rank=rank)


def tg_hw(ctx: Ctx) -> None:
    sd_start(ctx)
    tg_startup(ctx, "connected")
    tg_ready(ctx)
    tg_serve(ctx, ctx.rng.randrange(2, 15))
    ctx.adv(10, 5000)
    xid = ctx.rng.choice((79, 79, 48, 94, 95, 119))
    hw_kernel(ctx, xid, 0, ctx.ec)
    exc = hw_app_error(ctx, xid)
    ctx.needs_kern = "ECC" not in exc[0]
    tg_shard_tb(
        ctx,
        "Decode",
        [
            (
                "text_generation_server/server.py",
                "Decode",
                "generations, next_batch, timings = self.model.generate_token(batch)",
            )
        ],
        exc,
        ("ECC", exc[0]),
    )
    tg(ctx, "ERROR", "text_generation_launcher", "Shard 0 crashed")
    tg_shutdown_failed(ctx, "ShardFailed")


FAMILY = Family(
    "gpu_hardware_fault",
    8,
    {"vllm": vllm_hw_fault, "sglang": sg_hw, "tgi": tg_hw},
)
