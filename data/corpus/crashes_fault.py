"""Crashes from outside the program: segfaults with core dumps, the host's OOM killer,
illegal memory accesses, driver mismatches and start-up timeouts."""

from __future__ import annotations

from .context import Ctx, Proc
from .crashes_start import crash_loop
from .fmt import hexs
from .runs import engine_serve_generic
from .systemd import (
    all_procs,
    comm,
    sd_clean_exit,
    sd_consumed,
    sd_fail,
    sd_restart,
    sd_start,
    xid_line,
)
from .torch_errors import cuda_error_lines
from .tracebacks import Frame, chained, mpath, tb
from .vllm_frames import loader_frames
from .vllm_lines import model_procs, vlog, vraw
from .vllm_runtime import vllm_runtime_death
from .vllm_serve import vllm_http_shutdown, vllm_serve
from .vllm_startup import vllm_dist_init, vllm_load, vllm_prelude, vllm_ready, vllm_startup


def other_hf(ctx: Ctx) -> None:
    rng = ctx.rng
    sd_start(ctx)
    m = rng.choice(
        (
            "meta-llama/Llama-3.1-8B-Instruct",
            "meta-llama/Llama-3.3-70B-Instruct",
            "google/gemma-2-27b-it",
            "mistralai/Mistral-Small-24B-Instruct-2501",
            "acme-corp/internal-llm-13b",
        )
    )
    rid_ = f"Root=1-{hexs(rng, 8)}-{hexs(rng, 24)}"
    url = f"https://huggingface.co/{m}/resolve/main/config.json"
    kind = rng.random()
    if kind < 0.45:
        exc = [
            f"huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request ID: {rid_})",
            "",
            f"Cannot access gated repo for url {url}.",
            f"Access to model {m} is restricted. You must have access to it and be "
            "authenticated to access it. Please log in.",
        ]
    elif kind < 0.7:
        exc = [
            f"huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error. (Request ID: "
            f"{rid_})",
            "",
            f"Repository Not Found for url: {url}.",
            "Please make sure you specified the correct `repo_id` and `repo_type`.",
            "If you are trying to access a private or gated repo, make sure you are authenticated.",
            "Invalid username or password.",
        ]
    elif kind < 0.85:
        exc = [
            f"OSError: You are trying to access a gated repo.\nMake sure to have access to it "
            f"at https://huggingface.co/{m}.",
            f"401 Client Error. (Request ID: {rid_})",
        ]
        exc = [*exc[0].split("\n"), exc[1]]
    else:
        exc = [
            f"OSError: We couldn't connect to 'https://huggingface.co' to load this file, "
            f"couldn't find it in the cached files and it looks like {m} is not the path to a "
            "directory containing a file named config.json.",
            "Checkout your internet connection or see how to run the library in offline mode "
            "at 'https://huggingface.co/docs/transformers/installation#offline-mode'.",
        ]
    frames: list[Frame] = [
        ("transformers/utils/hub.py", "cached_file", "resolved_file = hf_hub_download("),
        ("huggingface_hub/utils/_validators.py", "_inner_fn", "return fn(*args, **kwargs)"),
        (
            "huggingface_hub/file_download.py",
            "hf_hub_download",
            "return _hf_hub_download_to_cache_dir(",
        ),
        ("huggingface_hub/file_download.py", "_raise_on_head_call_error", "raise head_call_error"),
        (
            "huggingface_hub/utils/_http.py",
            "hf_raise_for_status",
            "raise _format(GatedRepoError, message, response) from e",
        ),
    ]
    if ctx.chance(0.5):
        first = tb(
            ctx,
            [
                (
                    "huggingface_hub/utils/_http.py",
                    "hf_raise_for_status",
                    "response.raise_for_status()",
                ),
                (
                    "requests/models.py",
                    "raise_for_status",
                    "raise HTTPError(http_error_msg, response=self)",
                ),
            ],
            [f"requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: {url}"],
        )
        lines = chained(first, tb(ctx, frames, exc), cause=True)
    else:
        lines = tb(ctx, frames[rng.randrange(0, 3) :], exc)
    if ctx.engine == "vllm" and ctx.grank >= 8:
        vlog(ctx, ctx.api, "INFO", "__init__.py", "Automatically detected platform cuda.")
    ctx.adv(0.5, 8)
    for ln in lines:
        ctx.app(
            ln,
            key=any(
                s in ln
                for s in ("401", "gated", "Gated", "Repository Not Found", "couldn't connect")
            ),
        )
    sd_fail(ctx)
    crash_loop(ctx, 0.4, exc[:1])


def other_value(ctx: Ctx) -> None:
    rng = ctx.rng
    sd_start(ctx)
    cap = rng.choice(("7.0", "7.5"))
    arch = rng.choice(("MambaForCausalLM", "FooLMForCausalLM", "Qwen3NextForCausalLM"))
    exc = rng.choice(
        (
            f"ValueError: Model architectures ['{arch}'] are not "
            "supported for now. Supported architectures: dict_keys(['AquilaModel', "
            "'AquilaForCausalLM', 'ArcticForCausalLM', 'BaiChuanForCausalLM', ...])",
            "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least "
            f"8.0. Your Tesla V100-SXM2-32GB GPU has compute capability {cap}. You can use float16 "
            "instead by explicitly setting the `dtype` flag in CLI, for example: --dtype=half.",
            f"ValueError: Total number of attention heads ({rng.choice((32, 40, 64))}) must be "
            f"divisible by tensor parallel size ({rng.choice((3, 6))}).",
            f"ValueError: User-specified max_model_len ({rng.choice((65536, 262144))}) is greater "
            "than the derived max_model_len (max_position_embeddings=32768 or "
            "model_max_length=None in model's config.json). This may lead to incorrect model "
            "outputs or CUDA errors. To allow overriding this maximum, set the env var "
            "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
            "ValueError: The quantization method fp8 is not supported for the current GPU. "
            f"Minimum capability: 80. Current capability: {cap.replace('.', '')}.",
            "ValueError: Tokenizer class Qwen2Tokenizer does not exist or is not currently "
            "imported.",
            f"KeyError: 'model.layers.{rng.randrange(0, 40)}.mlp.experts.0.gate_proj.weight'",
            "NotImplementedError: Speculative decoding is not supported with pipeline parallelism.",
        )
    )
    if ctx.engine == "vllm":
        vllm_prelude(ctx)
        frames: list[Frame] = [
            (
                "vllm/engine/arg_utils.py",
                "create_engine_config",
                "model_config = self.create_model_config()",
            ),
            (
                "vllm/config.py" if ctx.grank < 10 else "vllm/config/model.py",
                "__post_init__",
                "self._verify_quantization()"
                if "quantization" in exc
                else "self.max_model_len = _get_and_verify_max_len(",
            ),
        ]
        if exc.startswith("KeyError"):
            frames = [
                *loader_frames(ctx)[:1],
                (mpath(ctx), "load_weights", "param = params_dict[name]"),
            ]
    else:
        frames = [
            (
                "sglang/srt/configs/model_config.py"
                if ctx.engine == "sglang"
                else "text_generation_server/models/__init__.py",
                "__init__" if ctx.engine == "sglang" else "get_model",
                "raise ValueError(",
            )
        ]
    ctx.adv(0.5, 20)
    for ln in tb(ctx, frames, [exc]):
        ctx.app(ln, key=ln == exc)
    sd_fail(ctx)
    crash_loop(ctx, 0.3, [exc])


def oom_killer(ctx: Ctx, victim: Proc) -> None:
    rng = ctx.rng
    c = comm(ctx, victim)
    memcg = ctx.chance(0.6)
    ctx.kern(
        f"{c} invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), "
        f"order=0, oom_score_adj=0",
        key=True,
    )
    if ctx.chance(0.5):
        ctx.kern(
            f"CPU: {rng.randrange(0, 128)} PID: {victim.pid} Comm: {c} Tainted: P           "
            "OE      6.8.0-45-generic #45-Ubuntu"
        )
        ctx.kern("Call Trace:")
        ctx.kern(" <TASK>")
        ctx.kern(" dump_stack_lvl+0x76/0xa0")
        ctx.kern(" dump_header+0x4a/0x240")
        ctx.kern(" oom_kill_process+0x101/0x180")
    cg = f"/system.slice/{ctx.unit}"
    ctx.kern(
        f"oom-kill:constraint=CONSTRAINT_{'MEMCG' if memcg else 'NONE'},nodemask=(null),"
        f"cpuset={ctx.unit},mems_allowed=0-1,oom_memcg={cg if memcg else '/'},"
        f"task_memcg={cg},task={c},pid={victim.pid},uid={rng.choice((0, 998, 1000))}"
    )
    rss = rng.randrange(40, 480) * 1024 * 1024
    pre = "Memory cgroup out of memory: " if memcg else "Out of memory: "
    ctx.kern(
        f"{pre}Killed process {victim.pid} ({c}) total-vm:{rss * 3}kB, anon-rss:{rss}kB, "
        f"file-rss:{rng.randrange(10000, 900000)}kB, shmem-rss:{rng.randrange(0, 9000000)}kB, "
        f"UID:{rng.choice((0, 998, 1000))} pgtables:{rng.randrange(1000, 90000)}kB "
        "oom_score_adj:0",
        key=True,
    )


def other_host_oom(ctx: Ctx) -> None:
    rng = ctx.rng
    sd_start(ctx)
    if ctx.engine == "vllm":
        vllm_prelude(ctx)
        vllm_dist_init(ctx)
        vllm_load(ctx, fail_after=rng.randrange(1, 9))
    else:
        engine_serve_generic(ctx)
    ctx.adv(1, 60)
    victim = ctx.api if ctx.chance(0.6) else (ctx.ec if ctx.engine == "vllm" else ctx.api)
    oom_killer(ctx, victim)
    ctx.sys(f"{ctx.unit}: A process of this unit has been killed by the OOM killer.", key=True)
    ctx.needs_sys = True
    if ctx.chance(0.5):
        for p in all_procs(ctx)[1:]:
            if p is not victim and ctx.chance(0.7):
                ctx.sys(
                    f"{ctx.unit}: Killing process {p.pid} ({comm(ctx, p)}) with signal SIGKILL."
                )
    if victim is ctx.api:
        ctx.sys(f"{ctx.unit}: Main process exited, code=killed, status=9/KILL")
    ctx.sys(f"{ctx.unit}: Failed with result 'oom-kill'.", key=True)
    if ctx.chance(0.6):
        sd_consumed(ctx)
    if ctx.chance(0.4):
        sd_restart(ctx)


def other_illegal(ctx: Ctx) -> None:
    rng = ctx.rng
    sd_start(ctx)
    vllm_startup(ctx, "ready")
    vllm_ready(ctx)
    vllm_serve(ctx, rng.randrange(2, 15))
    ctx.adv(5, 2000)
    procs = model_procs(ctx)
    rank = rng.randrange(len(procs))
    if ctx.chance(0.7):
        xid = rng.choice((13, 31, 43))
        text = {
            13: f"Graphics SM Warp Exception on (GPC {rng.randrange(0, 8)}, TPC "
            f"{rng.randrange(0, 9)}, SM {rng.randrange(0, 2)}): Out Of Range Address",
            31: f"Ch 000000{rng.randrange(10, 99)}, intr 00000000. MMU Fault: ENGINE GRAPHICS "
            f"GPCCLIENT_T1_{rng.randrange(0, 16)} faulted @ "
            f"0x7f{hexs(rng, 2)}_{hexs(rng, 8)}"
            ". Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
            43: f"Ch 000000{rng.randrange(10, 99)}",
        }[xid]
        ctx.kern(xid_line(ctx, rank, xid, text, procs[rank]))
    what = rng.choice(
        (
            "an illegal memory access was encountered",
            "an illegal memory access was encountered",
            "misaligned address",
            "an illegal instruction was encountered",
            "device-side assert triggered",
        )
    )
    exc = cuda_error_lines(ctx, what)
    keys = ("CUDA error", exc[0])
    vllm_runtime_death(ctx, exc, None, keys)
    vllm_http_shutdown(ctx, complete=ctx.chance(0.6))
    sd_fail(ctx) if ctx.chance(0.7) else sd_clean_exit(ctx)


def other_driver(ctx: Ctx) -> None:
    rng = ctx.rng
    pre = ctx.api.pid - rng.randrange(2, 30)
    if ctx.chance(0.5):
        ctx.sys(f"Starting {ctx.status}...")
        if ctx.chance(0.5):
            ctx.add(
                "pre",
                "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                "driver. Make sure that the latest NVIDIA driver is installed and "
                "running.",
                key=True,
                pid=pre,
                ident="nvidia-smi",
            )
            code = "9/n/a"
        else:
            ctx.add(
                "pre",
                "Failed to initialize NVML: Driver/library version mismatch",
                key=True,
                pid=pre,
                ident="nvidia-smi",
            )
            ctx.add(
                "pre",
                f"NVML library version: {rng.choice(('550.127', '560.35', '570.86'))}",
                pid=pre,
                ident="nvidia-smi",
            )
            code = "18/n/a"
        ctx.sys(f"{ctx.unit}: Control process exited, code=exited, status={code}", key=True)
        ctx.sys(f"{ctx.unit}: Failed with result 'exit-code'.")
        ctx.sys(f"Failed to start {ctx.status}.")
        ctx.needs_sys = True
        return
    sd_start(ctx)
    exc = rng.choice(
        (
            "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an "
            "NVIDIA GPU and installed a driver from http://www.nvidia.com/Download/index.aspx",
            f"RuntimeError: The NVIDIA driver on your system is too old (found version "
            f"{rng.choice((11040, 12020, 11080))}). Please update your GPU driver by downloading "
            "and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx "
            "Alternatively, go to: https://pytorch.org to install a PyTorch version that has been "
            "compiled with your version of the CUDA driver.",
            "RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with "
            "multiprocessing, you must use the 'spawn' start method",
            "OSError: [Errno 98] error while attempting to bind on address ('0.0.0.0', "
            f"{ctx.port}): address already in use",
            "RuntimeError: CUDA error: no kernel image is available for execution on the device",
        )
    )
    if ctx.engine == "vllm":
        vllm_prelude(ctx)
    ctx.adv(0.3, 10)
    frames: list[Frame] = [("torch/cuda/__init__.py", "_lazy_init", "torch._C._cuda_init()")]
    if "bind" in exc:
        frames = [
            ("vllm/entrypoints/openai/api_server.py", "create_server_socket", "sock.bind(addr)")
        ]
    for ln in tb(ctx, frames, [exc]):
        ctx.app(ln, key=ln == exc)
    sd_fail(ctx)
    crash_loop(ctx, 0.3, [exc])


def other_timeout(ctx: Ctx) -> None:
    """vLLM 0.33: the API server gives up waiting for the engine (slow weight loading)."""
    rng = ctx.rng
    sd_start(ctx)
    vllm_prelude(ctx)
    vllm_dist_init(ctx)
    vllm_load(ctx, fail_after=rng.randrange(3, 12))
    ctx.adv(600)
    exc = (
        "TimeoutError: Timed out waiting for engine core processes to start. This is often "
        "caused by slow weight loading for large models. Waited 600s (configured by "
        "VLLM_ENGINE_READY_TIMEOUT_S). To increase the timeout, set the environment variable: "
        "VLLM_ENGINE_READY_TIMEOUT_S=<seconds>"
    )
    for ln in tb(
        ctx,
        [("vllm/v1/engine/core_client.py", "_wait_for_engine_startup", "raise TimeoutError(")],
        [exc],
    ):
        vraw(ctx, ctx.api, [ln], key_all=ln == exc)
    sd_fail(ctx)
