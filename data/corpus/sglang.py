"""SGLang's line formats, start-up, readiness, serving and failure tails."""

from __future__ import annotations

from advisor.sim.texts import UVICORN_READY, UVICORN_WAITING, uvicorn_started

from .catalog import IPS
from .context import Ctx
from .fmt import tqdm_line
from .systemd import sd_fail, sd_restart
from .tracebacks import Frame
from .vllm_lines import _is_tb_head


def sg(ctx: Ctx, rank: int | None, msg: str, key: bool = False, dp: bool = False) -> None:
    ts = ctx.now().strftime("%Y-%m-%d %H:%M:%S")
    if "ms" in ctx.flags:
        ts += f".{int((ctx.t % 1) * 1000):03d}"
    pre = "" if rank is None else (f" DP0 TP{rank}" if dp else f" TP{rank}")
    for part in msg.split("\n"):
        ctx.app(f"[{ts}{pre}] {part}".rstrip(), key)


def sg_raw(ctx: Ctx, lines: list[str], keys: tuple[str, ...] = ()) -> None:
    for ln in lines:
        ctx.app(
            ln,
            any(k in ln for k in keys),
            "blank" if not ln else ("tbhead" if _is_tb_head(ln) else ""),
        )


def sg_startup(ctx: Ctx, upto: str) -> None:
    """SGLang launch: args, distributed init, weights, memory pool, CUDA graphs, ready."""
    rng = ctx.rng
    new = ctx.version.startswith("0.5")
    ranks = list(range(ctx.tp))
    frac = ctx.util
    sg(
        ctx,
        None,
        f"server_args=ServerArgs(model_path='{ctx.model.name}', tokenizer_path="
        f"'{ctx.model.name}', tokenizer_mode='auto', load_format='auto', dtype='auto', "
        f"trust_remote_code=False, context_length=None, host='0.0.0.0', "
        f"port={ctx.port}, mem_fraction_static={frac}, max_running_requests=None, "
        f"chunked_prefill_size=8192, tp_size={ctx.tp}, stream_interval=1, "
        f"random_seed={rng.randrange(10**8, 10**9)}, log_level='info', "
        "disable_cuda_graph=False, enable_torch_compile=False)",
    )
    ctx.adv(2, 10)
    if not new and ctx.chance(0.5):
        sg(ctx, 0, "Attention backend not set. Use flashinfer backend by default.")
    for r in ranks:
        sg(ctx, r, "Init torch distributed begin.")
    ctx.adv(1, 6)
    if upto == "dist":
        return
    if new:
        for r in ranks:
            sg(ctx, r, f"Init torch distributed ends. mem usage={rng.uniform(0.1, 1.2):.2f} GB")
    avail0 = ctx.gpu.gib * rng.uniform(0.97, 0.995)
    for r in ranks:
        sg(ctx, r, f"Load weight begin. avail mem={avail0:.2f} GB")
    if upto == "load":
        return
    shards = rng.choice((2, 4, 5, 8))
    per = rng.uniform(0.5, 6)
    for i in range(0, shards + 1, rng.choice((1, 2))):
        ctx.app(
            tqdm_line("Loading safetensors checkpoint shards", i, shards, per, True), tag="tqdm"
        )
        ctx.adv(per)
    w = ctx.model.gib / ctx.tp
    avail1 = avail0 - w
    for r in ranks:
        if new:
            sg(
                ctx,
                r,
                f"Load weight end. elapsed={per * shards:.2f} s, type={ctx.model.arch}, "
                f"dtype=torch.bfloat16, avail mem={avail1:.2f} GB, mem usage={w:.2f} GB.",
            )
        else:
            sg(
                ctx,
                r,
                f"Load weight end. type={ctx.model.arch}, dtype=torch.bfloat16, avail "
                f"mem={avail1:.2f} GB",
            )
    if upto == "pool":
        return
    tokens = rng.randrange(50000, 1500000)
    if new:
        kvs = rng.uniform(2, 60)
        sg(
            ctx,
            0,
            f"KV Cache is allocated. #tokens: {tokens}, K size: {kvs:.2f} GB, V size: {kvs:.2f} GB",
        )
    avail2 = ctx.gpu.gib * (1 - frac) + rng.uniform(-0.5, 1.5)
    for r in ranks:
        sg(ctx, r, f"Memory pool end. avail mem={avail2:.2f} GB")
    if upto == "graphs":
        return
    if ctx.enforce_eager:
        pass
    else:
        sg(ctx, 0, "Capture cuda graph begin. This can take up to several minutes.")
        secs = rng.uniform(3, 60)
        if new:
            n = rng.choice((23, 35, 52))
            ctx.app(
                tqdm_line(
                    f"Capturing batches (bs=1 avail_mem={avail2 - 1:.2f} GB)", n, n, secs / n, False
                ),
                tag="tqdm",
            )
        ctx.adv(secs)
        sg(ctx, 0, f"Capture cuda graph end. Time elapsed: {secs:.2f} s")
    sg(
        ctx,
        0,
        f"max_total_num_tokens={tokens}, chunked_prefill_size=8192, max_prefill_tokens="
        f"16384, max_running_requests={rng.choice((2048, 4097, 1024))}, context_len="
        f"{ctx.max_len}",
    )
    if upto == "ready":
        return
    sg_ready(ctx)


def sg_uv(ctx: Ctx, text: str) -> None:
    if "uvts" in ctx.flags:
        sg(ctx, None, text)
    else:
        ctx.app(text)


def sg_ready(ctx: Ctx, key: bool = False) -> None:
    sg_uv(ctx, uvicorn_started(ctx.api.pid))
    sg_uv(ctx, UVICORN_WAITING)
    sg_uv(ctx, UVICORN_READY)
    sg_uv(ctx, f"INFO:     Uvicorn running on http://0.0.0.0:{ctx.port} (Press CTRL+C to quit)")
    ctx.adv(0.5, 3)
    sg_uv(ctx, 'INFO:     127.0.0.1:51234 - "GET /get_model_info HTTP/1.1" 200 OK')
    sg(
        ctx,
        0,
        "Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, "
        "#running-req: 0, #queue-req: 0",
    )
    sg_uv(
        ctx,
        f'INFO:     127.0.0.1:{ctx.rng.randrange(30000, 60000)} - "POST /generate HTTP/1.1" 200 OK',
    )
    sg(
        ctx,
        None,
        ctx.pick(
            "The server is fired up and ready to roll!",
            ("The server is up and ready to serve requests.",),
        ),
        key=key,
    )


def sg_serve(ctx: Ctx, n: int) -> None:
    rng = ctx.rng
    for _ in range(n):
        ctx.adv(0.05, 10)
        r = rng.random()
        run = rng.randrange(0, 120)
        if r < 0.35:
            sg(
                ctx,
                0,
                f"Decode batch. #running-req: {run}, #token: {rng.randrange(100, 400000)}, "
                f"token usage: {rng.uniform(0, 0.97):.2f}, "
                f"gen throughput (token/s): {rng.uniform(5, 4000):.2f}, #queue-req: "
                f"{rng.choice((0, 0, rng.randrange(1, 50)))}",
            )
        elif r < 0.6:
            sg(
                ctx,
                0,
                f"Prefill batch. #new-seq: {rng.randrange(1, 9)}, #new-token: "
                f"{rng.randrange(5, 8192)}, #cached-token: {rng.randrange(0, 4000)}, "
                f"token usage: {rng.uniform(0, 0.97):.2f}, #running-req: {run}, "
                f"#queue-req: {rng.choice((0, 0, rng.randrange(1, 50)))}",
            )
        else:
            path = rng.choice(
                ("/v1/chat/completions", "/generate", "/v1/completions", "/health", "/flush_cache")
            )
            sg_uv(
                ctx,
                f'INFO:     {rng.choice(IPS)}:{rng.randrange(30000, 65000)} - "POST {path} '
                'HTTP/1.1" 200 OK',
            )


SG_SCHED = "sglang/srt/managers/scheduler.py"


SG_MR = "sglang/srt/model_executor/model_runner.py"


def sg_init_frames(ctx: Ctx) -> list[Frame]:
    return [
        (
            SG_SCHED,
            "run_scheduler_process",
            "scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)",
        ),
        (SG_SCHED, "__init__", "self.tp_worker = TpWorkerClass("),
        (
            "sglang/srt/managers/tp_worker_overlap_thread.py",
            "__init__",
            "self.worker = TpModelWorker(server_args, gpu_id, tp_rank, dp_rank, nccl_port)",
        ),
        ("sglang/srt/managers/tp_worker.py", "__init__", "self.model_runner = ModelRunner("),
        (SG_MR, "__init__", "self.initialize(min_per_gpu_memory)"),
    ]


def sg_fail(
    ctx: Ctx, lines: list[str], keys: tuple[str, ...], rank: int = 0, died: bool = True
) -> None:
    """Scheduler exception with its traceback, the SIGQUIT to the launcher, exit."""
    sg(ctx, rank, "Scheduler hit an exception: " + lines[0])
    ctx.evs[-1].tag = "tbhead"
    sg_raw(ctx, lines[1:], keys)
    if ctx.chance(0.3) and ctx.tp > 1:
        other = ctx.rng.choice([r for r in range(ctx.tp) if r != rank])
        sg(ctx, other, "Scheduler hit an exception: " + lines[0])
        sg_raw(ctx, lines[1 : len(lines) // 2])
    ctx.adv(0.05, 2)
    sg(ctx, None, "Received sigquit from a child process. It usually means the child failed.")
    if ctx.chance(0.3):
        ctx.app("Killed")
    if died:
        if ctx.chance(0.6):
            sd_fail(ctx, "killed", "9/KILL", "signal")
        else:
            sd_fail(ctx)
        if ctx.chance(0.35):
            sd_restart(ctx)
