"""Crashes that are the program's own: import errors, bad arguments, a missing executable,
Hugging Face access errors, bad values; and the crash loop systemd makes of them."""

from __future__ import annotations

from .context import Ctx
from .fmt import hexs
from .runs import engine_serve_generic
from .systemd import comm, sd_consumed, sd_fail, sd_restart, sd_start
from .tracebacks import Frame, tb
from .vllm_frames import bin_path
from .vllm_lines import vlog
from .vllm_serve import vllm_serve
from .vllm_startup import vllm_ready, vllm_startup

IMPORT_ERRORS = (
    "ModuleNotFoundError: No module named 'vllm._C'",
    "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory",
    "ImportError: {site}/vllm/_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEab",
    "ImportError: cannot import name 'AutoModelForVision2Seq' from 'transformers' "
    "({site}/transformers/__init__.py)",
    "ModuleNotFoundError: No module named 'flash_attn'",
    "ImportError: libcuda.so.1: cannot open shared object file: No such file or directory",
    "ModuleNotFoundError: No module named 'triton'",
    "ImportError: numpy.core.multiarray failed to import",
)


def other_import(ctx: Ctx) -> None:
    sd_start(ctx)
    err = ctx.rng.choice(IMPORT_ERRORS).format(site=ctx.site)
    mod = (
        "vllm"
        if ctx.engine == "vllm"
        else ("sglang" if ctx.engine == "sglang" else "text_generation_server")
    )
    frames: list[Frame] = [
        (
            bin_path(
                ctx,
                {"vllm": "vllm", "sglang": "python3", "tgi": "text-generation-server"}[ctx.engine],
            ),
            "<module>",
            f"from {mod}.entrypoints.cli.main import main"
            if ctx.engine == "vllm"
            else f"from {mod}.cli import app",
        ),
        (
            f"{mod}/__init__.py",
            "<module>",
            "from .version import __version__"
            if ctx.chance(0.5) or ctx.engine != "vllm"
            else f"from {mod}.engine.arg_utils import AsyncEngineArgs, EngineArgs",
        ),
        (
            f"{mod}/_custom_ops.py" if ctx.engine == "vllm" else f"{mod}/utils.py",
            "<module>",
            "import vllm._C  # noqa" if "_C" in err else "import torch",
        ),
    ]
    if ctx.engine == "vllm" and ctx.grank >= 8 and ctx.chance(0.4):
        vlog(ctx, ctx.api, "INFO", "__init__.py", "Automatically detected platform cuda.")
    ctx.adv(0.5, 6)
    lines = tb(ctx, frames[: ctx.rng.randrange(1, 4)], [err])
    ctx.apps(lines[:-1])
    ctx.app(lines[-1], key=True)
    sd_fail(ctx)
    crash_loop(ctx, 1.0, lines[-1:])


def crash_loop(ctx: Ctx, p: float, repeat: list[str], status: str = "1/FAILURE") -> None:
    """Restart a few times with the same failure; maybe hit the start limit."""
    if not ctx.chance(p):
        return
    for _ in range(ctx.rng.randrange(1, 5)):
        sd_restart(ctx, ctx.rng.choice((0.1, 0.1, 1, 5)))
        ctx.adv(0.3, 4)
        ctx.apps(repeat)
        sd_fail(ctx, status=status)
    if ctx.chance(0.4):
        ctx.restarts += 1
        ctx.sys(f"{ctx.unit}: Scheduled restart job, restart counter is at {ctx.restarts}.")
        ctx.sys(f"{ctx.unit}: Start request repeated too quickly.")
        ctx.sys(
            f"{ctx.unit}: Failed with result '{ctx.rng.choice(('exit-code', 'start-limit-hit'))}'."
        )
        ctx.sys(f"Failed to start {ctx.status}.")


def other_argparse(ctx: Ctx) -> None:
    rng = ctx.rng
    ln_ = rng.choice((8192, 32768))
    prog = {
        "vllm": rng.choice(("vllm serve", "api_server.py")),
        "sglang": "launch_server.py",
        "tgi": "text-generation-launcher",
    }[ctx.engine]
    if ctx.engine == "tgi":
        bad = rng.choice(("--max-model-len", "--gpu-memory-utilization", "--quantise"))
        sim = rng.choice(("max-input-tokens", "quantize"))
        lines = [
            f"error: unexpected argument '{bad}' found",
            "",
            f"  tip: a similar argument exists: '--{sim}'",
            "",
            "Usage: text-generation-launcher <--model-id <MODEL_ID>|--revision <REVISION>|"
            "--validation-workers <VALIDATION_WORKERS>|--sharded <SHARDED>>",
            "",
            "For more information, try '--help'.",
        ]
        key = lines[0]
    else:
        err = rng.choice(
            (
                f"{prog}: error: unrecognized arguments: --max-model-length {ln_}",
                f"{prog}: error: argument --dtype: invalid choice: 'bf16' (choose from 'auto', "
                "'half', 'float16', 'bfloat16', 'float', 'float32')",
                f"{prog}: error: argument --gpu-memory-utilization: invalid float value: '90%'",
                f"{prog}: error: the following arguments are required: --model-path",
                f"{prog}: error: argument --tensor-parallel-size/-tp: invalid int value: 'auto'",
            )
        )
        usage = (
            f"usage: {prog} [-h] [--host HOST] [--port PORT] [--model MODEL]"
            if ctx.engine == "vllm"
            else f"usage: {prog} [-h] --model-path MODEL_PATH [--tokenizer-path TOKENIZER_PATH]"
        )
        lines = [
            usage,
            " " * (len(prog) + 7) + "[--tensor-parallel-size TENSOR_PARALLEL_SIZE]",
            " " * (len(prog) + 7) + "[--gpu-memory-utilization GPU_MEMORY_UTILIZATION]",
            err,
        ]
        key = err
    sd_start(ctx)
    if ctx.engine == "vllm" and ctx.grank >= 8 and ctx.chance(0.5):
        vlog(ctx, ctx.api, "INFO", "__init__.py", "Automatically detected platform cuda.")
    ctx.adv(0.3, 3)
    for ln in lines:
        ctx.app(ln, key=ln == key)
    sd_fail(ctx, status="2/INVALIDARGUMENT")
    crash_loop(ctx, 0.8, [key], status="2/INVALIDARGUMENT")


def other_exec(ctx: Ctx) -> None:
    rng = ctx.rng
    step, code, why = rng.choice(
        (
            ("EXEC", "203/EXEC", "No such file or directory"),
            ("EXEC", "203/EXEC", "Permission denied"),
            ("EXEC", "203/EXEC", "Exec format error"),
            ("USER", "217/USER", "No such process"),
            ("CHDIR", "200/CHDIR", "No such file or directory"),
        )
    )
    path = rng.choice(
        (
            "/opt/vllm/bin/vllm",
            "/home/ubuntu/.venv/bin/vllm",
            "/usr/local/bin/vllm",
            "/srv/llm/venv/bin/python3",
            "/opt/sglang/bin/python",
            "/usr/local/bin/text-generation-launcher",
        )
    )
    ctx.needs_sys = True
    for i in range(rng.randrange(1, 6)):
        if i:
            ctx.adv(0.1, 5)
            ctx.restarts += 1
            ctx.sys(f"{ctx.unit}: Scheduled restart job, restart counter is at {ctx.restarts}.")
            if ctx.sysd < 253:
                ctx.sys(f"Stopped {ctx.status}.")
        if ctx.chance(0.3):
            ctx.sys(f"Starting {ctx.status}...")
        ctx.sys(f"Started {ctx.status}.")
        ctx.add(
            "sys",
            f"{ctx.unit}: Failed at step {step} spawning {path}: {why}",
            key=True,
            pid=ctx.api.pid + i * 3,
            ident="(vllm)" if ctx.chance(0.4) else "systemd",
        )
        ctx.sys(f"{ctx.unit}: Main process exited, code=exited, status={code}", key=True)
        ctx.sys(f"{ctx.unit}: Failed with result 'exit-code'.")
    if ctx.chance(0.6):
        ctx.sys(f"{ctx.unit}: Start request repeated too quickly.")
        ctx.sys(f"{ctx.unit}: Failed with result 'exit-code'.")
        ctx.sys(f"Failed to start {ctx.status}.")


def fault_lines(ctx: Ctx, sig: str = "Segmentation fault") -> list[str]:
    rng = ctx.rng
    out = [f"Fatal Python error: {sig}", ""]
    for t in range(rng.randrange(1, 3)):
        out.append(
            f"Thread 0x00007f{hexs(rng, 8)} (most recent call first):"
            if t
            else f"Current thread 0x00007f{hexs(rng, 8)} (most recent call first):"
        )
        for path, func in rng.sample(
            (
                ("torch/cuda/graphs.py", "replay"),
                ("vllm/v1/worker/gpu_model_runner.py", "execute_model"),
                ("threading.py", "wait"),
                ("vllm/_custom_ops.py", "paged_attention_v2"),
                ("torch/_ops.py", "__call__"),
                ("flashinfer/decode.py", "run"),
                ("vllm/v1/engine/core.py", "run_busy_loop"),
                ("zmq/sugar/socket.py", "recv_multipart"),
                ("multiprocessing/connection.py", "_recv_bytes"),
            ),
            rng.randrange(3, 6),
        ):
            out.append(f'  File "{ctx.site}/{path}", line {ctx.lineno(path + func)} in {func}')
        out.append("")
    if ctx.chance(0.5):
        out.append(
            "Extension modules: numpy.core._multiarray_umath, torch._C, zmq.backend.cython."
            "context, psutil._psutil_linux, msgspec._core, sentencepiece._sentencepiece "
            f"(total: {rng.randrange(20, 90)})"
        )
    return out


def coredump_lines(ctx: Ctx, pid: int, comm_: str, sig: int) -> None:
    rng = ctx.rng
    ctx.add(
        "other",
        f"Process {pid} ({comm_}) of user {rng.choice((0, 998, 1000))} dumped core.",
        key=True,
        pid=rng.randrange(100000, 300000),
        ident="systemd-coredump",
    )
    if ctx.chance(0.6):
        ctx.add(
            "other",
            f"\nModule libcuda.so.1 without build-id.\nStack trace of thread {pid}:\n"
            f"#0  0x00007f{hexs(rng, 10)} n/a (libcuda.so.1 + 0x{hexs(rng, 6)})\n"
            f"#1  0x00007f{hexs(rng, 10)} n/a (libtorch_cuda.so + 0x{hexs(rng, 7)})\n"
            f"#2  0x00007f{hexs(rng, 10)} n/a (libpython3.12.so.1.0 + 0x"
            f"{hexs(rng, 6)})\nELF object binary architecture: AMD x86-64",
            pid=rng.randrange(100000, 300000),
            ident="systemd-coredump",
        )


def other_segv(ctx: Ctx) -> None:
    rng = ctx.rng
    sd_start(ctx)
    if ctx.engine == "vllm":
        if ctx.chance(0.5):
            vllm_startup(ctx, "ready")
            vllm_ready(ctx)
            vllm_serve(ctx, rng.randrange(2, 12))
        else:
            vllm_startup(ctx, rng.choice(("kv", "graphs")))
    else:
        engine_serve_generic(ctx)
    ctx.adv(1, 900)
    sig, num, name = rng.choice(
        (
            ("Segmentation fault", 11, "SEGV"),
            ("Segmentation fault", 11, "SEGV"),
            ("Bus error", 7, "BUS"),
            ("Aborted", 6, "ABRT"),
        )
    )
    lines = fault_lines(ctx, sig)
    for ln in lines:
        ctx.app(ln, key=ln.startswith("Fatal Python error"))
    ctx.sys(f"{ctx.unit}: Main process exited, code=dumped, status={num}/{name}", key=True)
    if ctx.chance(0.6):
        coredump_lines(ctx, ctx.api.pid, comm(ctx, ctx.api), num)
    ctx.sys(f"{ctx.unit}: Failed with result 'core-dump'.", key=True)
    if ctx.chance(0.5):
        sd_consumed(ctx)
