"""vLLM failing during start-up: worker and engine-core tracebacks interleaved, then the
API server's own error and exit."""

from __future__ import annotations

import random
from collections.abc import Callable

from advisor.sim.texts import ENGINE_CORE_FAILED, ENGINE_INIT_FAILED, engine_init_failed

from .context import Ctx, Proc
from .systemd import sd_fail, sd_restart
from .tracebacks import Frame, chained, tb
from .vllm_frames import (
    CORE,
    MPX,
    bin_path,
    mp_boot,
    stdlib,
    uniproc_frames,
    v0_api_frames,
    v0_engine_frames,
    v1_ec_frames,
)
from .vllm_lines import vlog, vprefix, vraw, vtb
from .vllm_startup import vllm_prelude


def merge(rng: random.Random, seqs: list[list[tuple[Proc, str]]]) -> list[tuple[Proc, str]]:
    """Interleave several processes' output in bursts, keeping each one's order."""
    seqs = [list(s) for s in seqs if s]
    out: list[tuple[Proc, str]] = []
    while seqs:
        i = rng.randrange(len(seqs))
        burst = rng.randrange(1, 6)
        out += seqs[i][:burst]
        del seqs[i][:burst]
        seqs = [s for s in seqs if s]
    return out


def worker_tb_records(
    ctx: Ctx, p: Proc, header: str, file: str, lines: list[str]
) -> list[tuple[Proc, str]]:
    """Pre-render a logger.exception record of one worker (for interleaving)."""
    assert ctx.group is not None
    ts = ctx.now().strftime("%m-%d %H:%M:%S")
    site = f"{file}:{ctx.lineno(file + ':' + header[:24])}"
    head = f"ERROR {ts} {site}] " if ctx.group.fmt == "plain" else f"ERROR {ts} [{site}] "
    pre = vprefix(ctx, p, raw=False)
    return [(p, (pre + head + ln).rstrip()) for ln in [header, *lines]]


def emit_merged(ctx: Ctx, recs: list[tuple[Proc, str]], keys: tuple[str, ...]) -> None:
    for _, text in recs:
        ctx.app(
            text,
            any(k in text for k in keys),
            "tbhead"
            if any(
                h in text
                for h in (
                    "Traceback (most recent",
                    "WorkerProc hit",
                    "Exception in worker",
                    "WorkerProc failed to start",
                )
            )
            else "",
        )


def vllm_startup_failure(
    ctx: Ctx,
    phase: str,
    exc: list[str],
    inner: list[Frame] | None,
    inner_exc: list[str] | None,
    keys: tuple[str, ...],
    worker_frames: list[Frame],
    n_fail: int = 1,
) -> None:
    """Propagate a startup exception through the version's process layout: workers (logged,
    interleaved), EngineCore (logged and raw), API server, then exit."""
    rng, g = ctx.rng, ctx.grank

    def body(frames: list[Frame]) -> list[str]:
        if inner is not None and inner_exc is not None:
            return chained(tb(ctx, inner, inner_exc), tb(ctx, frames, exc))
        return tb(ctx, frames, exc)

    final = exc[0]
    if ctx.v0 or not (ctx.group and ctx.group.v1):
        vllm_v0_failure(ctx, phase, body, worker_frames, keys, n_fail)
        return
    if ctx.tp > 1:
        workers = ctx.workers[:]
        rng.shuffle(workers)
        failing = sorted(workers[: max(1, min(n_fail, ctx.tp, 3))], key=lambda p: p.rank)
        header = (
            "WorkerProc failed to start." if phase == "load" else "WorkerProc hit an exception."
        )
        init = bool(worker_frames) and worker_frames[0][1] == "init_device"
        start = (
            [(MPX, "__init__", "self.worker.init_device()" if init else "self.worker.load_model()")]
            if phase == "load"
            else [(MPX, "worker_busy_loop", "output = func(*args, **kwargs)")]
        )
        recs = [
            worker_tb_records(ctx, p, header, "multiproc_executor.py", body(start + worker_frames))
            for p in failing
        ]
        emit_merged(ctx, merge(rng, recs), keys)
        ctx.adv(0.05, 0.6)
        if phase == "load":
            ec_exc = [
                "Exception: WorkerProc initialization failed due to an exception in a "
                "background process. See stack trace for root cause."
            ]
            ec_frames = [
                *v1_ec_frames(ctx, "load"),
                (
                    MPX,
                    "_init_executor",
                    "self.workers = WorkerProc.wait_for_ready(unready_workers)",
                ),
                (MPX, "wait_for_ready", "raise e from None"),
            ]
        else:
            short = final.split(": ", 1)[-1][:160]
            ec_exc = [
                f"RuntimeError: Worker failed with error '{short}', please check the "
                "stack trace above for the root cause"
            ]
            ec_frames = [*v1_ec_frames(ctx, phase), (MPX, "collective_rpc", "raise RuntimeError(")]
            if phase == "kv":
                ec_frames = v1_ec_frames(ctx, "kv")
                ec_exc = exc
        ec_lines = tb(ctx, ec_frames, ec_exc)
    else:
        frames = v1_ec_frames(ctx, phase)
        if phase != "kv":
            frames = frames + uniproc_frames(ctx) + worker_frames
        ec_lines = body(frames)
    vtb(
        ctx,
        ctx.ec,
        ENGINE_CORE_FAILED
        if g >= 8
        else "EngineCore hit an exception: Traceback (most recent call last):",
        "core.py",
        ec_lines,
        keys,
    )
    if ctx.chance(0.55):
        name = {10: "EngineCore_0"}.get(g, "EngineCore" if g >= 20 else "EngineCore_DP0")
        if g <= 9:
            name = "EngineCore_0"
        raw = tb(
            ctx,
            [*mp_boot(ctx), (CORE, "run_engine_core", "raise e")],
            ec_lines[-len(exc) :] if len(ec_lines) >= len(exc) else exc,
        )
        vraw(ctx, ctx.ec, [f"Process {name}:", *raw], keys)
    if ctx.tp > 1 and ctx.chance(0.3):
        vraw(
            ctx,
            ctx.ec,
            [
                f"[rank0]:[W{ctx.now():%m%d %H:%M:%S}.{rng.randrange(10**6):06d} "
                f"{ctx.ec.pid} ProcessGroupNCCL.cpp:1496] Warning: WARNING: "
                "destroy_process_group() was not called before program exit, which "
                "can leak resources. For more info, please see "
                "https://pytorch.org/docs/stable/distributed.html#shutdown "
                "(function operator())"
            ],
        )
    ctx.adv(0.3, 3)
    vllm_api_init_failed(ctx)


def vllm_api_init_failed(ctx: Ctx) -> None:
    g = ctx.grank
    name = "EngineCore_0" if g <= 10 else ("EngineCore" if g >= 20 else "EngineCore_DP0")
    if g <= 9:
        msg = ENGINE_INIT_FAILED
    else:
        msg = engine_init_failed(f"{{'{name}': 1}}" if ctx.chance(0.7) else "{}")
    api = "vllm/entrypoints/openai/api_server.py"
    frames: list[Frame] = [
        (bin_path(ctx, "vllm"), "<module>", "sys.exit(main())"),
        ("vllm/entrypoints/cli/main.py", "main", "args.dispatch_function(args)"),
        ("vllm/entrypoints/cli/serve.py", "cmd", "uvloop.run(run_server(args))"),
        ("uvloop/__init__.py", "run", "return __asyncio.run("),
        (
            api,
            "run_server",
            "await run_server_worker(listen_address, sock, args, **uvicorn_kwargs)",
        ),
        (api, "run_server_worker", "async with build_async_engine_client("),
        (
            api,
            "build_async_engine_client_from_engine_args",
            "async_llm = AsyncLLM.from_vllm_config(",
        ),
        (
            "vllm/v1/engine/async_llm.py",
            "__init__",
            "self.engine_core = EngineCoreClient.make_async_mp_client(",
        ),
        (
            "vllm/v1/engine/core_client.py",
            "__init__",
            "with launch_core_engines(vllm_config, executor_class,",
        ),
        (
            "vllm/v1/engine/utils.py" if g >= 10 else "vllm/v1/engine/core_client.py",
            "wait_for_engine_startup",
            "raise RuntimeError(",
        ),
    ]
    if ctx.chance(0.35):
        vlog(ctx, ctx.api, "ERROR", "api_server.py", msg, keys=("initialization failed",))
    else:
        vraw(ctx, ctx.api, tb(ctx, frames if ctx.chance(0.7) else frames[-4:], [msg]))
    if ctx.chance(0.3):
        vraw(
            ctx,
            ctx.api,
            [
                f"{stdlib(ctx)}/multiprocessing/resource_tracker.py:279: UserWarning: "
                "resource_tracker: There appear to be 1 leaked shared_memory objects to clean up "
                "at shutdown",
                "  warnings.warn('resource_tracker: There appear to be %d '",
            ],
        )


def vllm_v0_failure(
    ctx: Ctx,
    phase: str,
    body: Callable[[list[Frame]], list[str]],
    worker_frames: list[Frame],
    keys: tuple[str, ...],
    n_fail: int,
) -> None:
    rng = ctx.rng
    v0w = {
        "load": "load_model",
        "kv": "initialize_cache",
        "graphs": "initialize_cache",
        "profile": "determine_num_available_blocks",
    }.get(phase, "initialize_cache")
    if ctx.tp > 1 and phase != "kv":
        failing = ctx.workers[1:][: max(1, min(n_fail, 3))]
        recs = []
        for p in failing:
            lines = body(
                [
                    (
                        "vllm/executor/multiproc_worker_utils.py",
                        "_run_worker_process",
                        "output = run_method(worker, method, args, kwargs)",
                    ),
                    ("vllm/utils.py", "run_method", "return func(*args, **kwargs)"),
                    *worker_frames,
                ]
            )
            recs.append(
                worker_tb_records(
                    ctx,
                    p,
                    f"Exception in worker VllmWorkerProcess while processing method {v0w}.",
                    "multiproc_worker_utils.py",
                    lines,
                )
            )
        emit_merged(ctx, merge(rng, recs), keys)
    mq = ctx.grank >= 6 and ctx.chance(0.6)
    eng_frames = v0_engine_frames(ctx, phase) + (worker_frames if phase != "kv" else [])
    if phase == "load":
        eng_frames = v0_engine_frames(ctx, "load") + worker_frames
    if mq:
        frames = [
            *mp_boot(ctx),
            (
                "vllm/engine/multiprocessing/engine.py",
                "run_mp_engine",
                "engine = MQLLMEngine.from_engine_args(engine_args=engine_args,",
            ),
            ("vllm/engine/multiprocessing/engine.py", "from_engine_args", "return cls("),
            (
                "vllm/engine/multiprocessing/engine.py",
                "__init__",
                "self.engine = LLMEngine(*args, **kwargs)",
            ),
            *eng_frames,
        ]
        vraw(ctx, ctx.ec, ["Process SpawnProcess-1:", *body(frames)], keys)
        ctx.adv(0.5, 3)
        vraw(
            ctx,
            ctx.api,
            tb(
                ctx,
                v0_api_frames(ctx, True),
                [
                    "RuntimeError: Engine process failed to start. See stack trace for the root "
                    "cause."
                ],
            ),
        )
    else:
        vraw(ctx, ctx.api, body(v0_api_frames(ctx, False) + eng_frames), keys)
    if ctx.tp > 1 and ctx.chance(0.6):
        for p in ctx.workers[1:]:
            vlog(
                ctx,
                ctx.api,
                "ERROR",
                "multiproc_worker_utils.py",
                f"Worker VllmWorkerProcess pid {p.pid} died, exit code: -15",
            )
        vlog(
            ctx, ctx.api, "INFO", "multiproc_worker_utils.py", "Killing local vLLM worker processes"
        )


def vllm_exit_after_startup_failure(ctx: Ctx) -> None:
    sd_fail(ctx, status="1/FAILURE")
    if ctx.chance(0.45):
        sd_restart(ctx)
        if ctx.chance(0.6):
            vllm_prelude(ctx)
