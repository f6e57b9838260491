"""nccl_error: NCCL failures at init or at runtime, with the watchdog's lines."""

from __future__ import annotations

from ..context import Ctx, Proc
from ..family import Family
from ..fmt import hexs
from ..sglang import SG_MR, sg, sg_fail, sg_init_frames, sg_raw, sg_ready, sg_serve, sg_startup
from ..systemd import new_pids, sd_clean_exit, sd_fail, sd_start
from ..tgi import TG_FCL, tg_shard_fail, tg_startup
from ..tracebacks import Frame, model_forward_frames, mpath, tb
from ..vllm_failures import vllm_exit_after_startup_failure, vllm_startup_failure
from ..vllm_frames import MPX, W1
from ..vllm_lines import is_v1, model_procs, uv, vlog, vraw
from ..vllm_runtime import vllm_runtime_death
from ..vllm_serve import access_line, vllm_http_shutdown, vllm_serve
from ..vllm_startup import vllm_prelude, vllm_ready, vllm_startup


def nccl_tag(ctx: Ctx, p: Proc) -> str:
    return f"{ctx.host}:{p.pid}:{p.pid + ctx.rng.randrange(20, 400)} [{p.rank}]"


def nccl_error_text(ctx: Ctx) -> tuple[str, list[str]]:
    """(short NCCL error text, detail lines as torch/NCCL print them)."""
    rng = ctx.rng
    kind = rng.choice(("system", "cuda", "internal", "remote", "invalid"))
    peer = f"10.{rng.randrange(0, 255)}.{rng.randrange(0, 255)}.{rng.randrange(2, 250)}"
    if kind == "system":
        return (
            "unhandled system error (run with NCCL_DEBUG=INFO for details)",
            [
                "ncclSystemError: System call (e.g. socket, malloc) or external library call "
                "failed or device error. ",
                "Last error:",
                rng.choice(
                    (
                        f"socketStartConnect: Connect to {peer}<{rng.randrange(30000, 60000)}"
                        "> failed : Software caused connection abort",
                        "Error while creating shared memory segment /dev/shm/nccl-"
                        f"{hexs(rng, 6)} (size 9637888)",
                    )
                ),
            ],
        )
    if kind == "cuda":
        return (
            "unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
            [
                "ncclUnhandledCudaError: Call to CUDA function failed.",
                "Last error:",
                rng.choice(
                    (
                        "Cuda failure 'peer access is not supported between these two devices'",
                        "Cuda failure 'invalid argument'",
                        "Failed to CUDA calloc async 608 bytes",
                    )
                ),
            ],
        )
    if kind == "internal":
        return (
            "internal error - please report this issue to the NCCL developers",
            [
                "ncclInternalError: Internal check failed.",
                "Last error:",
                f"Message truncated : received {rng.randrange(1024, 9000)} bytes instead of 256",
            ],
        )
    if kind == "remote":
        return (
            "remote process exited or there was a network error",
            [
                "ncclRemoteError: A call failed possibly due to a network error or a remote "
                "process exiting prematurely.",
                "Last error:",
                f"NET/IB : Got completion from peer {peer}<{rng.randrange(30000, 60000)}> with "
                "status=12 opcode=0 len=0 vendor err 129 (Recv)",
            ],
        )
    return (
        "invalid usage (run with NCCL_DEBUG=WARN for details)",
        [
            "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
            "Last error:",
            "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000",
        ],
    )


def nccl_warn_lines(ctx: Ctx, p: Proc) -> list[str]:
    rng = ctx.rng
    t = nccl_tag(ctx, p)
    return [
        rng.choice(
            (
                f"{t} NCCL INFO Bootstrap : Using "
                f"eth0:10.0.{rng.randrange(255)}.{rng.randrange(255)}<0>",
                f"{t} NCCL INFO NET/Plugin: Could not find: libnccl-net.so.",
                f"{t} NCCL INFO cudaDriverVersion {rng.choice((12020, 12040, 12060, 12080))}",
            )
        ),
        rng.choice(
            (
                f"{t} transport/p2p.cc:{rng.randrange(200, 400)} NCCL WARN Cuda failure 'peer "
                "access is not supported between these two devices'",
                f"{t} misc/socket.cc:{rng.randrange(400, 600)} NCCL WARN socketStartConnect: "
                f"Connect to 10.0.0.{rng.randrange(2, 200)}<{rng.randrange(30000, 60000)}> "
                "failed : Connection refused",
                f"{t} include/shm.h:{rng.randrange(20, 60)} NCCL WARN Error while creating shared "
                f"memory segment /dev/shm/nccl-{hexs(rng, 6)} (size 9637888)",
                f"{t} proxy.cc:{rng.randrange(1000, 1600)} NCCL WARN [Proxy Service {p.rank}] "
                "Failed to execute operation Connect from rank 1, retcode 3",
            )
        ),
    ]


def pynccl_frames(init: bool) -> list[Frame]:
    pw = "vllm/distributed/device_communicators/pynccl_wrapper.py"
    if init:
        return [
            (
                "vllm/distributed/parallel_state.py",
                "__init__",
                "self.device_communicator = device_comm_cls(",
            ),
            (
                "vllm/distributed/device_communicators/cuda_communicator.py",
                "__init__",
                "self.pynccl_comm = PyNcclCommunicator(",
            ),
            (
                "vllm/distributed/device_communicators/pynccl.py",
                "__init__",
                "self.comm: ncclComm_t = self.nccl.ncclCommInitRank(",
            ),
            (
                pw,
                "ncclCommInitRank",
                'self.NCCL_CHECK(self._funcs["ncclCommInitRank"](ctypes.byref(comm),',
            ),
            (pw, "NCCL_CHECK", 'raise RuntimeError(f"NCCL error: {error_str}")'),
        ]
    return [
        (
            "vllm/distributed/communication_op.py",
            "tensor_model_parallel_all_reduce",
            "return get_tp_group().all_reduce(input_)",
        ),
        (
            "vllm/distributed/parallel_state.py",
            "all_reduce",
            "return self.device_communicator.all_reduce(input_)",
        ),
        (
            "vllm/distributed/device_communicators/cuda_communicator.py",
            "all_reduce",
            "out = pynccl_comm.all_reduce(input_)",
        ),
        (
            "vllm/distributed/device_communicators/pynccl.py",
            "all_reduce",
            "self.nccl.ncclAllReduce(buffer_type(in_tensor.data_ptr()),",
        ),
        (
            pw,
            "ncclAllReduce",
            'self.NCCL_CHECK(self._funcs["ncclAllReduce"](sendbuff, recvbuff, count,',
        ),
        (pw, "NCCL_CHECK", 'raise RuntimeError(f"NCCL error: {error_str}")'),
    ]


def dist_backend_lines(ctx: Ctx, short: str, detail: list[str]) -> list[str]:
    ver = ctx.rng.choice(("2.20.5", "2.21.5", "2.26.2", "2.27.3"))
    src = ctx.rng.choice(
        (
            "ProcessGroupNCCL.cpp:1970",
            "NCCLUtils.hpp:317",
            "ProcessGroupNCCL.cpp:2785",
            "NCCLUtils.cpp:77",
        )
    )
    return [
        f"torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
        f"{src}, {short}, NCCL version {ver}",
        *detail,
    ]


def watchdog_lines(ctx: Ctx, p: Proc) -> list[str]:
    rng = ctx.rng
    seq = rng.randrange(1000, 900000)
    op = rng.choice(("ALLREDUCE", "ALLGATHER", "_ALLGATHER_BASE", "BROADCAST", "ALLTOALL_BASE"))
    numel = rng.choice((8388608, 4194304, 1048576, 65536, 29360128))
    tmo = rng.choice((600000, 1800000, 300000))
    ran = tmo + rng.randrange(1, 900)
    ts = f"{ctx.now():%m%d %H:%M:%S}.{rng.randrange(10**6):06d}"
    pre = f"[rank{p.rank}]:[E{ts} {p.pid} ProcessGroupNCCL.cpp:{rng.randrange(600, 1900)}]"
    pg = f"[PG ID {rng.randrange(0, 3)} PG GUID {rng.randrange(0, 5)} Rank {p.rank}]"
    work = (
        f"WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, NumelOut={numel}, "
        f"Timeout(ms)={tmo}) ran for {ran} milliseconds before timing out."
    )
    msg = ctx.pick(
        f"Watchdog caught collective operation timeout: {work}",
        (
            f"collective {op} (SeqNum={seq}) timed out after {tmo} ms on rank {p.rank}",
            f"NCCL watchdog: operation {op} #{seq} exceeded its timeout ({tmo} ms)",
        ),
    )
    out = [
        f"{pre} {pg} {msg}",
        f"{pre} {pg} Exception (either an error or timeout) detected by watchdog at work: {seq},"
        f" last enqueued NCCL work: {seq + rng.randrange(0, 4)}, last completed NCCL work: "
        f"{seq - 1}.",
        f"{pre} {pg} Timeout at NCCL work: {seq}, last enqueued NCCL work: {seq}, last "
        f"completed NCCL work: {seq - 1}.",
        f"{pre} {pg} To avoid data inconsistency, we are taking the entire process down.",
    ]
    if ctx.chance(0.7):
        lib = f"{ctx.site}/torch/lib"
        out += [
            f"{pre} {pg} Process group watchdog thread terminated with exception: {pg} {msg}",
            "terminate called after throwing an instance of 'c10::DistBackendError'",
            f"  what():  {pg} Process group watchdog thread terminated with exception: {pg} {msg}",
            "Exception raised from checkTimeout at /pytorch/torch/csrc/distributed/c10d/"
            f"ProcessGroupNCCL.cpp:{rng.randrange(600, 700)} (most recent call first):",
            "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x98 "
            f"(0x7f{hexs(rng, 10)} in {lib}/libc10.so)",
            "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::"
            "chrono::duration<long, std::ratio<1l, 1000l> > >) + 0x23d "
            f"(0x7f{hexs(rng, 10)} in {lib}/libtorch_cuda.so)",
            "frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + "
            f"0x{rng.randrange(0x100, 0xFFF):x} (0x7f{hexs(rng, 10)} in "
            f"{lib}/libtorch_cuda.so)",
        ]
        if ctx.chance(0.6):
            out += ["", "Fatal Python error: Aborted", ""]
    return out


def vllm_nccl(ctx: Ctx) -> None:
    rng = ctx.rng
    if ctx.tp < 2:
        ctx.tp = 2
        new_pids(ctx)
    sd_start(ctx)
    short, detail = nccl_error_text(ctx)
    kind = rng.choice(("init", "init", "runtime", "watchdog", "watchdog"))
    keys = ("NCCL", "nccl", "Watchdog", "watchdog", "DistBackendError", "collective")
    if kind == "init":
        vllm_prelude(ctx)
        procs = model_procs(ctx)
        for p in procs:
            ver = rng.choice(("2.21.5", "2.26.2"))
            vlog(ctx, p, "INFO", "pynccl.py", f"vLLM is using nccl=={ver}")
        if ctx.chance(0.6):
            p = rng.choice(procs)
            vraw(ctx, p, nccl_warn_lines(ctx, p))
        if ctx.chance(0.5):
            exc = [f"RuntimeError: NCCL error: {short}"]
        else:
            exc = dist_backend_lines(ctx, short, detail)
        exc[0] = ctx.pick(
            exc[0],
            (
                f"RuntimeError: NCCL communicator failure: {short}",
                f"NcclError: ncclCommInitRank failed: {short}",
                "RuntimeError: failed to initialise the NCCL communicator "
                "(collective backend error)",
            ),
        )
        frames: list[Frame] = [
            (
                W1 if is_v1(ctx) else "vllm/worker/worker.py",
                "init_device",
                "init_worker_distributed_environment(self.vllm_config, self.rank,",
            ),
            (
                "vllm/distributed/parallel_state.py",
                "ensure_model_parallel_initialized",
                "initialize_model_parallel(tensor_model_parallel_size,",
            ),
            (
                "vllm/distributed/parallel_state.py",
                "initialize_model_parallel",
                "_TP = init_model_parallel_group(group_ranks,",
            ),
            (
                "vllm/distributed/parallel_state.py",
                "init_model_parallel_group",
                "return GroupCoordinator(",
            ),
            *pynccl_frames(True),
        ]
        if exc[0].startswith("torch.distributed"):
            frames = [
                *frames[:3],
                ("torch/distributed/c10d_logger.py", "wrapper", "return func(*args, **kwargs)"),
                (
                    "torch/distributed/distributed_c10d.py",
                    "barrier",
                    "work = group.barrier(opts=opts)",
                ),
            ]
        if is_v1(ctx):
            frames = [(MPX, "__init__", "self.worker.init_device()"), *frames]
        vllm_startup_failure(
            ctx,
            "load",
            exc,
            None,
            None,
            (*keys, *exc),
            frames[1:] if is_v1(ctx) else frames,
            n_fail=rng.randrange(1, ctx.tp + 1),
        )
        vllm_exit_after_startup_failure(ctx)
        return
    vllm_startup(ctx, "ready")
    vllm_ready(ctx)
    vllm_serve(ctx, rng.randrange(3, 20))
    ctx.adv(5, 3000)
    if kind == "runtime":
        exc = [
            ctx.pick(
                f"RuntimeError: NCCL error: {short}",
                (
                    f"RuntimeError: NCCL all_reduce failed: {short}",
                    "NcclError: collective all_reduce returned ncclSystemError",
                ),
            )
        ]
        tail = [
            *model_forward_frames(ctx)[:1],
            (mpath(ctx), "forward", "output_parallel = self.quant_method.apply("),
            *pynccl_frames(False),
        ]
        vllm_runtime_death(ctx, exc, tail, (*keys, exc[0]))
    else:
        p = rng.choice(model_procs(ctx))
        lines = watchdog_lines(ctx, p)
        vraw(ctx, p, lines, keys)
        ctx.adv(0.1, 3)
        if is_v1(ctx):
            vlog(
                ctx,
                ctx.ec,
                "ERROR",
                "multiproc_executor.py",
                f"Worker proc VllmWorker-{p.rank} died unexpectedly, shutting down executor.",
            )
            if ctx.chance(0.6):
                vlog(ctx, ctx.api, "ERROR", "async_llm.py", "AsyncLLM output_handler failed.")
                vraw(
                    ctx,
                    ctx.api,
                    [
                        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore "
                        "encountered an issue. See stack trace (above) for the root "
                        "cause."
                    ],
                )
        uv(ctx, access_line(ctx, "500 Internal Server Error"))
    ctx.adv(0.2, 5)
    if ctx.chance(0.5):
        vllm_http_shutdown(ctx)
        sd_clean_exit(ctx) if ctx.chance(0.3) else sd_fail(ctx)
    else:
        sd_fail(
            ctx,
            "dumped" if ctx.chance(0.4) else "killed",
            "6/ABRT",
            "core-dump" if ctx.chance(0.5) else "signal",
        )


def sg_nccl(ctx: Ctx) -> None:
    if ctx.tp < 2:
        ctx.tp = 2
        new_pids(ctx)
    sd_start(ctx)
    short, detail = nccl_error_text(ctx)
    if ctx.chance(0.5):
        sg_startup(ctx, "dist")
        exc = dist_backend_lines(ctx, short, detail)
        frames = [
            *sg_init_frames(ctx),
            (SG_MR, "__init__", "min_per_gpu_memory = self.init_torch_distributed()"),
            (
                SG_MR,
                "init_torch_distributed",
                "initialize_model_parallel(tensor_model_parallel_size=self.tp_size)",
            ),
            ("torch/distributed/distributed_c10d.py", "barrier", "work = group.barrier(opts=opts)"),
        ]
        sg_fail(
            ctx,
            tb(ctx, frames, exc),
            ("NCCL", "DistBackendError", "nccl"),
            rank=ctx.rng.randrange(ctx.tp),
        )
        return
    sg_startup(ctx, "ready")
    sg_ready(ctx)
    sg_serve(ctx, ctx.rng.randrange(3, 20))
    ctx.adv(60, 5000)
    p = ctx.workers[ctx.rng.randrange(ctx.tp)]
    sg_raw(ctx, watchdog_lines(ctx, p), ("Watchdog", "watchdog", "NCCL", "collective"))
    ctx.adv(0.1, 2)
    sg(ctx, None, "Received sigquit from a child process. It usually means the child failed.")
    sd_fail(ctx, "killed", "9/KILL", "signal")


def tg_nccl(ctx: Ctx) -> None:
    if ctx.tp < 2:
        ctx.tp = 2
        new_pids(ctx)
    sd_start(ctx)
    tg_startup(ctx, "load")
    short, detail = nccl_error_text(ctx)
    exc = dist_backend_lines(ctx, short, detail)
    frames = [
        ("text_generation_server/cli.py", "serve", "server.serve("),
        (
            "text_generation_server/server.py",
            "serve_inner",
            "model = get_model_with_lora_adapters(",
        ),
        (
            TG_FCL,
            "__init__",
            "self.process_group, rank, world_size = initialize_torch_distributed()",
        ),
        (
            "text_generation_server/utils/dist.py",
            "initialize_torch_distributed",
            "torch.distributed.barrier(group=process_group)",
        ),
        ("torch/distributed/distributed_c10d.py", "barrier", "work = group.barrier(opts=opts)"),
    ]
    tg_shard_fail(
        ctx,
        tb(ctx, frames, exc),
        ("NCCL", "nccl", "DistBackendError"),
        rank=ctx.rng.randrange(ctx.tp),
    )


FAMILY = Family(
    "nccl_error",
    7,
    {"vllm": vllm_nccl, "sglang": sg_nccl, "tgi": tg_nccl},
)
