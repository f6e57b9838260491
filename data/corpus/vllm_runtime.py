"""vLLM dying while serving: the engine-core and worker tracebacks and the API's reaction."""

from __future__ import annotations

from .context import Ctx
from .fmt import rid
from .tracebacks import TORCH_CALL, Frame, model_forward_frames, mpath, tb
from .vllm_failures import emit_merged, merge, worker_tb_records
from .vllm_frames import CORE, MPX, R1, W1, uniproc_frames
from .vllm_lines import is_v1, uv, vlog, vraw, vtb
from .vllm_serve import access_line


def v1_runtime_frames(ctx: Ctx) -> tuple[list[Frame], list[Frame]]:
    """(EngineCore frames down to the executor, worker frames down to the failing op)."""
    ec: list[Frame] = [
        (CORE, "run_engine_core", "engine_core.run_busy_loop()"),
        (CORE, "run_busy_loop", "self._process_engine_step()"),
        (CORE, "_process_engine_step", "outputs, model_executed = self.step_fn()"),
        (CORE, "step", "model_output = self.execute_model_with_error_logging("),
        (CORE, "execute_model_with_error_logging", "raise err"),
        (CORE, "execute_model_with_error_logging", "return model_fn(scheduler_output)"),
    ]
    wk: list[Frame] = [
        (W1, "execute_model", "output = self.model_runner.execute_model(scheduler_output,"),
        ("torch/utils/_contextlib.py", "decorate_context", "return func(*args, **kwargs)"),
    ]
    kind = ctx.rng.random()
    if kind < 0.5:
        wk += [
            (R1, "execute_model", "model_output = self.model("),
            *TORCH_CALL,
            *model_forward_frames(ctx),
        ]
    elif kind < 0.75:
        wk += [
            (R1, "execute_model", "logits = self.model.compute_logits(sample_hidden_states, None)"),
            (
                mpath(ctx),
                "compute_logits",
                "logits = self.logits_processor(self.lm_head, hidden_states,",
            ),
            *TORCH_CALL,
            (
                "vllm/model_executor/layers/logits_processor.py",
                "forward",
                "logits = self._get_logits(hidden_states, lm_head, embedding_bias)",
            ),
        ]
    else:
        wk += [
            (R1, "execute_model", "sampler_output = self.sampler("),
            *TORCH_CALL,
            ("vllm/v1/sample/sampler.py", "forward", "logits = logits.to(torch.float32)"),
        ]
    return ec, wk


def vllm_runtime_death(
    ctx: Ctx,
    exc: list[str],
    wk_tail: list[Frame] | None,
    keys: tuple[str, ...],
    worker_dies_hard: bool = False,
) -> None:
    """Engine death after readiness: worker/EngineCore tracebacks, API client shutdown, 500s."""
    rng, g = ctx.rng, ctx.grank
    if not is_v1(ctx):
        frames: list[Frame] = [
            ("vllm/engine/async_llm_engine.py", "run_engine_loop", "result = task.result()"),
            (
                "vllm/engine/async_llm_engine.py",
                "engine_step",
                "request_outputs = await self.engine.step_async(virtual_engine)",
            ),
            (
                "vllm/engine/async_llm_engine.py",
                "step_async",
                "outputs = await self.model_executor.execute_model_async(",
            ),
            (
                "vllm/worker/worker_base.py",
                "execute_model",
                "output = self.model_runner.execute_model(",
            ),
            ("torch/utils/_contextlib.py", "decorate_context", "return func(*args, **kwargs)"),
            (
                "vllm/worker/model_runner.py",
                "execute_model",
                "hidden_or_intermediate_states = model_executable(",
            ),
            *TORCH_CALL,
            *(wk_tail or model_forward_frames(ctx)),
        ]
        if ctx.chance(0.5):
            vlog(
                ctx,
                ctx.api,
                "ERROR",
                "async_llm_engine.py",
                "Engine background task failed\n" + "\n".join(tb(ctx, frames, exc)),
                keys=keys,
            )
        else:
            vraw(
                ctx,
                ctx.ec,
                [
                    "Process SpawnProcess-1:"
                    if ctx.chance(0.3)
                    else "ERROR:    Exception in ASGI application",
                    *tb(ctx, frames, exc),
                ],
                keys,
            )
        ctx.adv(0.01, 1)
        for _ in range(rng.randrange(1, 4)):
            if ctx.chance(0.5):
                vraw(
                    ctx,
                    ctx.api,
                    [
                        "vllm.engine.async_llm_engine.AsyncEngineDeadError: Background "
                        "loop has errored already."
                    ],
                    key_all=True,
                )
            else:
                vraw(
                    ctx,
                    ctx.api,
                    [
                        "vllm.engine.multiprocessing.MQEngineDeadError: Engine loop is not "
                        "running. Inspect the stacktrace to find the original error: "
                        f"{exc[0].split(':', 1)[0]}('{exc[0].split(': ', 1)[-1][:80]}')"
                    ],
                    key_all=True,
                )
            uv(ctx, access_line(ctx, "500 Internal Server Error"))
        return
    ec_frames, wk = v1_runtime_frames(ctx)
    if wk_tail is not None:
        wk = wk[:2] + wk_tail
    exname = "vllm/v1/executor/multiproc_executor.py" if ctx.tp > 1 else uniproc_frames(ctx)[0][0]
    if ctx.tp > 1:
        p = rng.choice(ctx.workers)
        if worker_dies_hard:
            vraw(ctx, p, exc, keys, key_all=True)
        else:
            rec = worker_tb_records(
                ctx,
                p,
                "WorkerProc hit an exception.",
                "multiproc_executor.py",
                tb(ctx, [(MPX, "worker_busy_loop", "output = func(*args, **kwargs)"), *wk], exc),
            )
            others = []
            if ctx.chance(0.3):
                q = rng.choice([w for w in ctx.workers if w is not p])
                others = worker_tb_records(
                    ctx,
                    q,
                    "WorkerProc hit an exception.",
                    "multiproc_executor.py",
                    tb(
                        ctx, [(MPX, "worker_busy_loop", "output = func(*args, **kwargs)"), *wk], exc
                    ),
                )
            emit_merged(ctx, merge(rng, [rec, others]), keys)
        ctx.adv(0.01, 2)
        if g <= 11 and ctx.chance(0.5):
            vlog(
                ctx,
                ctx.ec,
                "ERROR",
                "multiproc_executor.py",
                f"Worker proc VllmWorker-{p.rank} died unexpectedly, shutting down executor.",
            )
        elif g >= 33 and ctx.chance(0.5):
            vlog(
                ctx,
                ctx.ec,
                "ERROR",
                "multiproc_executor.py",
                f"Worker proc VllmWorker-{p.rank} died unexpectedly (exit code: "
                f"{rng.choice((1, -6, -9))}), shutting down executor.",
            )
        ec_lines = tb(
            ctx,
            [
                *ec_frames,
                (exname, "execute_model", "output = self.collective_rpc("),
                (MPX, "collective_rpc", "raise RuntimeError("),
            ],
            [
                f"RuntimeError: Worker failed with error '{exc[0].split(': ', 1)[-1][:120]}'"
                ", please check the stack trace above for the root cause"
            ],
        )
    else:
        ec_lines = tb(
            ctx,
            [
                *ec_frames,
                (exname, "execute_model", "output = self.collective_rpc("),
                *uniproc_frames(ctx)[1:],
                *wk,
            ],
            exc,
        )
    if g >= 9 and ctx.chance(0.5):
        vlog(
            ctx,
            ctx.ec,
            "ERROR",
            "dump_input.py",
            f"Dumping input data for V1 LLM engine (v{ctx.version}) with config: "
            f"model='{ctx.model.name}', tensor_parallel_size={ctx.tp}, "
            f"max_seq_len={ctx.max_len}, enforce_eager={ctx.enforce_eager}",
        )
        vlog(
            ctx,
            ctx.ec,
            "ERROR",
            "dump_input.py",
            "Dumping scheduler output for model execution: SchedulerOutput(scheduled_new_reqs="
            f"[NewRequestData(req_id={rid(rng)},prompt_token_ids_len={rng.randrange(20, 30000)},"
            f"...)], num_scheduled_tokens={{...}}, total_num_scheduled_tokens="
            f"{rng.randrange(100, 16384)})",
        )
    vtb(ctx, ctx.ec, "EngineCore encountered a fatal error.", "core.py", ec_lines, keys)
    ctx.adv(0.01, 1)
    if g >= 33:
        vlog(
            ctx,
            ctx.api,
            "WARNING",
            "core_client.py",
            "[shutdown] MPClient: engine core exited unexpectedly; starting cleanup",
            keys=("exited unexpectedly",),
        )
    elif g >= 10 and ctx.chance(0.6):
        name = "EngineCore_0" if g == 10 else ("EngineCore" if g >= 20 else "EngineCore_DP0")
        vlog(
            ctx,
            ctx.api,
            "ERROR",
            "core_client.py",
            f"Engine core proc {name} died unexpectedly, shutting down client.",
            keys=("died unexpectedly",),
        )
    dead = (
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See "
        "stack trace (above) for the root cause."
    )
    if ctx.chance(0.6):
        vlog(
            ctx,
            ctx.api,
            "ERROR",
            "async_llm.py",
            "AsyncLLM output_handler failed.\n"
            + "\n".join(
                tb(
                    ctx,
                    [
                        (
                            "vllm/v1/engine/async_llm.py",
                            "output_handler",
                            "outputs = await engine_core.get_output_async()",
                        ),
                        (
                            "vllm/v1/engine/core_client.py",
                            "get_output_async",
                            "raise self._format_exception(outputs) from None",
                        ),
                    ],
                    [dead],
                )
            ),
            keys=("EngineDeadError",),
        )
    for _ in range(rng.randrange(1, 4)):
        uv(ctx, access_line(ctx, "500 Internal Server Error"))
