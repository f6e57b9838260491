"""vLLM 0.15.1's own texts, for the simulated server to print.

Kept apart from the server's control flow so that the wording can be read and checked in one
place. Message formats are the real ones; file:line tags and traceback frames follow the seed
journal (``tests/fixtures/seed-minimax-m25.journal.jsonl``) and vLLM 0.15's source layout.

Stdlib only (imported by the server process); sentences other generators print too come
from ``advisor.sim.texts``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Final

from advisor.sim import texts
from advisor.sim.models import GIB, ModelCard, format_size, gib_str
from advisor.sim.texts import NO_CACHE_BLOCKS, sampler_warmup_oom, torch_oom_tail

VERSION: Final = "0.15.1"
CYAN: Final = "\x1b[0;36m"  # 0.15 colours the prefix with ESC[0;36m even off a TTY
RESET: Final = "\x1b[0;0m"
SITE: Final = "/opt/vllm/lib/python3.12/site-packages/vllm"
API: Final = "APIServer"
CORE: Final = "EngineCore_DP0"


def worker_name(rank: int, tensor_parallel_size: int) -> str:
    """With TP 1 the model runs inside the EngineCore process itself."""
    return f"Worker_TP{rank}" if tensor_parallel_size > 1 else CORE


@dataclass(frozen=True, slots=True)
class Printer:
    """Formats lines as vLLM's logger and its per-process stdout wrapper do."""

    pid: int

    def prefix(self, proc: str) -> str:
        return f"{CYAN}({proc} pid={self.pid}){RESET} "

    def record(self, proc: str, level: str, src: str, text: str) -> str:
        """One logger record; NewLineFormatter repeats the header after every ``\\r\\n``."""
        head = f"{self.prefix(proc)}{level} {time.strftime('%m-%d %H:%M:%S')} [{src}] "
        return head + text.replace("\n", "\r\n" + head) + "\n"

    def raw(self, proc: str, text: str) -> str:
        """A line written to the stream directly (uvicorn, tqdm, uncaught tracebacks)."""
        return self.prefix(proc) + text + "\n"


def non_default_args(given: dict[str, object]) -> str:
    """``non-default args: {...}``: the options set on the command line, as a dict repr —
    argparse dests to parsed values (lists for ``nargs="+"``, dicts for JSON options), nothing
    redacted (vLLM redacts secrets only from 0.33 on)."""
    return f"non-default args: {given!r}"


def engine_config(
    card: ModelCard,
    max_model_len: int,
    tensor_parallel_size: int,
    trust_remote_code: bool,
    served_model_name: str | None = None,
) -> str:
    m = card.name
    return (
        f"Initializing a V1 LLM engine (v{VERSION}) with config: model='{m}', "
        f"speculative_config=None, tokenizer='{m}', skip_tokenizer_init=False, "
        f"tokenizer_mode=auto, revision=None, trust_remote_code={trust_remote_code}, "
        f"dtype={card.dtype}, max_seq_len={max_model_len}, download_dir=None, "
        f"load_format=auto, tensor_parallel_size={tensor_parallel_size}, "
        "pipeline_parallel_size=1, data_parallel_size=1, disable_custom_all_reduce=False, "
        f"quantization={card.quantization}, enforce_eager=False, kv_cache_dtype=auto, "
        f"device_config=cuda, seed=0, served_model_name={served_model_name or m}, "
        "enable_prefix_caching=True"
    )


def cuda_graph_bar() -> str:
    """The CUDA-graph capture progress bar: tqdm refreshes separated by ``\\r``."""
    desc = "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)"
    return (
        f"{desc}:   0%|          | 0/51 [00:00<?, ?it/s]\r"
        f"{desc}:  51%|█████     | 26/51 [00:00<00:00, 33.12it/s]\r"
        f"{desc}: 100%|██████████| 51/51 [00:01<00:00, 33.44it/s]"
    )


@dataclass(frozen=True, slots=True)
class OomFigures:
    """What PyTorch's caching allocator reports when an allocation fails."""

    device: int
    tried: int
    total: int
    free: int
    own: int
    others: tuple[tuple[int, int], ...]  # (pid, bytes) of other processes on the GPU
    graph_pool: int


def torch_oom(f: OomFigures) -> str:
    """``torch.OutOfMemoryError`` as torch 2.4 – 2.9 words it (vLLM 0.15 pins torch 2.9)."""
    others = "".join(f"Process {pid} has {format_size(b)} memory in use. " for pid, b in f.others)
    unallocated = min(f.own // 256, 512 * 1024**2)
    allocated = max(0, f.own - unallocated - int(0.5 * GIB))
    pools = (
        f"with {format_size(f.graph_pool)} allocated in private pools (e.g., CUDA Graphs), "
        if f.graph_pool
        else ""
    )
    return (
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
        f"{format_size(f.tried)}. GPU {f.device} has a total capacity of "
        f"{format_size(f.total)} of which {format_size(f.free)} is free. {others}"
        f"Including non-PyTorch memory, this process has {format_size(f.own)} memory in "
        f"use. Of the allocated memory {format_size(allocated)} is allocated by PyTorch, "
        f"{pools}and {format_size(unallocated)} is reserved by PyTorch but unallocated. "
        f"{torch_oom_tail()}"
    )


def sampler_traceback(oom: str, dummy_requests: int) -> list[str]:
    """The warm-up failure: the torch OOM, then vLLM's RuntimeError raised ``from`` it."""
    return [
        "Traceback (most recent call last):",
        f'  File "{SITE}/v1/worker/gpu_model_runner.py", line 3208, in _dummy_sampler_run',
        "    sampler_output = self.sampler(logits=logits,",
        f'  File "{SITE}/v1/sample/sampler.py", line 98, in forward',
        "    logits = self.apply_temperature(logits, sampling_metadata.temperature)",
        oom,
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        f'  File "{SITE}/v1/worker/gpu_worker.py", line 412, in compile_or_warm_up_model',
        "    self.model_runner._dummy_sampler_run(hidden_states=last_hidden_states)",
        f'  File "{SITE}/v1/worker/gpu_model_runner.py", line 3213, in _dummy_sampler_run',
        "    raise RuntimeError(",
        sampler_warmup_oom(dummy_requests),
    ]


_OOM_FRAMES: Final[dict[str, tuple[str, ...]]] = {
    "load": (
        f'  File "{SITE}/v1/worker/gpu_worker.py", line 261, in load_model',
        "    self.model_runner.load_model(eep_scale_up=eep_scale_up)",
        f'  File "{SITE}/v1/worker/gpu_model_runner.py", line 2617, in load_model',
        "    self.model = model_loader.load_model(",
        f'  File "{SITE}/model_executor/model_loader/base_loader.py", line 56, in load_model',
        "    self.load_weights(model, model_config)",
    ),
    "profile": (
        f'  File "{SITE}/v1/worker/gpu_worker.py", line 288, in determine_available_memory',
        "    self.model_runner.profile_run()",
        f'  File "{SITE}/v1/worker/gpu_model_runner.py", line 3390, in profile_run',
        "    hidden_states, last_hidden_states = self._dummy_run(",
    ),
    "kv": (
        f'  File "{SITE}/v1/worker/gpu_worker.py", line 330, in initialize_from_config',
        "    self.model_runner.initialize_kv_cache(kv_cache_config)",
        f'  File "{SITE}/v1/worker/gpu_model_runner.py", line 4390, in initialize_kv_cache',
        "    kv_caches = self.initialize_kv_cache_tensors(",
    ),
    "graphs": (
        f'  File "{SITE}/v1/worker/gpu_worker.py", line 402, in compile_or_warm_up_model',
        "    cuda_graph_memory_bytes = self.model_runner.capture_model()",
        f'  File "{SITE}/v1/worker/gpu_model_runner.py", line 4021, in capture_model',
        "    self._capture_cudagraphs(",
        f'  File "{SITE}/v1/worker/gpu_model_runner.py", line 4105, in _capture_cudagraphs',
        "    self._dummy_run(",
    ),
}


def oom_traceback(phase: str, oom: str) -> list[str]:
    """A plain CUDA OOM in a start-up phase other than the sampler warm-up: ``load``,
    ``profile``, ``kv`` or ``graphs`` (the frames tell the diagnosis where it happened)."""
    return ["Traceback (most recent call last):", *_OOM_FRAMES[phase], oom]


def free_memory_traceback(free: int, total: int, utilization: float, budget: int) -> list[str]:
    """The start-up check that another process holds the memory (vLLM's ``init_device``)."""
    return [
        "Traceback (most recent call last):",
        f'  File "{SITE}/v1/executor/multiproc_executor.py", line 571, in worker_main',
        "    worker = WorkerProc(*args, **kwargs)",
        f'  File "{SITE}/v1/worker/gpu_worker.py", line 226, in init_device',
        "    raise ValueError(",
        f"ValueError: Free memory on device ({gib_str(free)}/{gib_str(total)} GiB) on startup "
        f"is less than desired GPU memory utilization ({utilization}, {gib_str(budget)} GiB). "
        "Decrease GPU memory utilization or reduce GPU memory used by other processes.",
    ]


def _kv_frames(check: str) -> list[str]:
    return [
        "Traceback (most recent call last):",
        f'  File "{SITE}/v1/engine/core.py", line 699, in run_engine_core',
        "    engine_core = EngineCoreProc(*args, **kwargs)",
        f'  File "{SITE}/v1/engine/core.py", line 92, in __init__',
        "    self._initialize_kv_caches(vllm_config)",
        f'  File "{SITE}/v1/engine/core.py", line 199, in _initialize_kv_caches',
        "    kv_cache_configs = get_kv_cache_configs(vllm_config, kv_cache_specs,",
        f'  File "{SITE}/v1/core/kv_cache_utils.py", line 716, in {check}',
        "    raise ValueError(",
    ]


def no_cache_blocks_traceback() -> list[str]:
    return [*_kv_frames("check_enough_kv_cache_memory"), NO_CACHE_BLOCKS]


def kv_needed_traceback(
    max_model_len: int, needed: int, available: int, estimated: int
) -> list[str]:
    """V1 0.10 – 0.25: one request of ``max_model_len`` does not fit (note ``models's``)."""
    based = (
        f"Based on the available memory, the estimated maximum model length is {estimated}."
        if estimated > 0
        else ""
    )
    return [
        *_kv_frames("check_enough_kv_cache_memory"),
        f"ValueError: To serve at least one request with the models's max seq len "
        f"({max_model_len}), ({needed / GIB:.2f} GiB KV cache is needed, which is larger "
        f"than the available KV cache memory ({available / GIB:.2f} GiB). {based} Try "
        "increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
        "initializing the engine.",
    ]


def engine_init_failed(failed: str) -> str:
    """The API server's error naming the engine cores that died."""
    return texts.engine_init_failed(failed)
