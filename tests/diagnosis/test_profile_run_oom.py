"""An OOM in vLLM's memory profiling run (`profile_run`, under `determine_available_memory`)
is `kv_cache_oom` in phase `memory_profiling`: the weights and one batch of the prefill
budget left no room, so no KV cache could be sized. Its remedy halves
`--max-num-batched-tokens` when the log states it, within what the engine accepts. The logs
are written from vLLM's format strings (the V1 engine core's traceback, torch's OOM text)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.classifying import classify_lines

SITE = "/usr/local/lib/python3.12/dist-packages/vllm"
ERR = "ERROR 12-03 10:00:25 [core.py:586] "
OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.91 GiB. GPU 0 has a total "
    "capacity of 23.55 GiB of which 1.22 GiB is free. Including non-PyTorch memory, this "
    "process has 22.31 GiB memory in use. Of the allocated memory 21.70 GiB is allocated by "
    "PyTorch, and 153.41 MiB is reserved by PyTorch but unallocated."
)


def _log(version: str, batched: int | None, frames: list[str], max_len: int = 131072) -> list[str]:
    head = [
        f"INFO 12-03 10:00:01 [core.py:71] Initializing a V1 LLM engine (v{version}) with "
        f"config: model='meta-llama/Llama-3.1-8B-Instruct', max_seq_len={max_len}, "
        "tensor_parallel_size=1",
    ]
    if batched is not None:
        head.append(
            "INFO 12-03 10:00:01 [config.py:2101] Chunked prefill is enabled with "
            f"max_num_batched_tokens={batched}."
        )
    return [
        *head,
        "INFO 12-03 10:00:20 [gpu_model_runner.py:1770] Model loading took 14.99 GiB and 5.1 "
        "seconds",
        f"{ERR}EngineCore failed to start.",
        f"{ERR}Traceback (most recent call last):",
        f'{ERR}  File "{SITE}/v1/engine/core.py", line 144, in _initialize_kv_caches',
        f"{ERR}    available_gpu_memory = self.model_executor.determine_available_memory()",
        f'{ERR}  File "{SITE}/v1/worker/gpu_worker.py", line 210, in determine_available_memory',
        f"{ERR}    self.model_runner.profile_run()",
        *frames,
        f"{ERR}{OOM}",
    ]


DUMMY_RUN = [
    f'{ERR}  File "{SITE}/v1/worker/gpu_model_runner.py", line 2052, in profile_run',
    f"{ERR}    hidden_states = self._dummy_run(self.max_num_tokens)",
]
SAMPLER_RUN = [
    f'{ERR}  File "{SITE}/v1/worker/gpu_model_runner.py", line 2060, in profile_run',
    f"{ERR}    output = self._dummy_sampler_run(hidden_states)",
    f'{ERR}  File "{SITE}/v1/worker/gpu_model_runner.py", line 1990, in _dummy_sampler_run',
    f"{ERR}    raise RuntimeError(",
]


def _set_flags(got: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(a["flag"], a["value"]) for a in got["actions"] if a["kind"] == "set_flag"]


def test_an_oom_in_the_profiling_run_is_a_kv_cache_oom(tmp_path: Path) -> None:
    got = classify_lines(tmp_path, _log("0.9.2", 16384, DUMMY_RUN))
    assert (got["label"], got["facts"]["phase"]) == ("kv_cache_oom", "memory_profiling")
    assert any(c.get("rule") == "vllm.kv-cache.profile-oom" for c in got["candidates"])
    assert got["confidence"] >= 0.7
    assert _set_flags(got) == [("--max-num-batched-tokens", 8192)]
    step = next(a for a in got["actions"] if a["kind"] == "set_flag")
    assert step["from_value"] == 16384


def test_without_the_batch_size_the_plan_says_which_flags_to_lower(tmp_path: Path) -> None:
    got = classify_lines(tmp_path, _log("0.9.2", None, DUMMY_RUN))
    assert got["label"] == "kv_cache_oom"
    assert _set_flags(got) == []
    assert [a["kind"] for a in got["actions"]] == ["notify"]
    assert "--max-num-batched-tokens" in got["actions"][0]["why"]


def test_before_v1_the_batch_is_not_halved_below_the_model_length(tmp_path: Path) -> None:
    """vLLM V0 without chunked prefill refuses max_num_batched_tokens < max_model_len."""
    got = classify_lines(tmp_path, _log("0.6.3", 8192, DUMMY_RUN, max_len=8192))
    assert got["label"] == "kv_cache_oom"
    assert _set_flags(got) == []


def test_the_sampler_warmup_inside_profile_run_keeps_its_own_label(tmp_path: Path) -> None:
    got = classify_lines(tmp_path, _log("0.9.2", 16384, SAMPLER_RUN))
    assert got["label"] == "sampler_warmup_oom"
