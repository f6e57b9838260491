"""A start-up that got past its engine's last stage without an error is healthy, even where
the paste ends before the server says it is ready — `unknown` is for logs that show neither
failure nor success. A failure after that stage still wins. The logs are written from the
engines' format strings (vLLM V1's engine core, TGI's launcher and router)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.classifying import classify_lines

VLLM_V1 = [
    "INFO 05-02 11:00:00 [api_server.py:1043] vLLM API server version 0.9.1",
    "INFO 05-02 11:00:00 [cli_args.py:325] non-default args: {'model': 'Qwen/Qwen3-8B', "
    "'max_model_len': 32768}",
    "INFO 05-02 11:00:12 [gpu_model_runner.py:1595] Starting to load model Qwen/Qwen3-8B...",
    "INFO 05-02 11:00:40 [gpu_model_runner.py:1624] Model loading took 15.2683 GiB and 27.1 "
    "seconds",
    "INFO 05-02 11:00:55 [gpu_worker.py:227] Available KV cache memory: 52.11 GiB",
    "INFO 05-02 11:00:55 [kv_cache_utils.py:715] GPU KV cache size: 379,456 tokens",
    "INFO 05-02 11:01:20 [gpu_model_runner.py:2040] Graph capturing finished in 25 secs, took "
    "0.61 GiB",
    "INFO 05-02 11:01:20 [core.py:171] init engine (profile, create kv cache, warmup model) "
    "took 39.72 seconds",
]
VLLM_V1_THEN_OOM = [
    *VLLM_V1,
    "INFO:     Application startup complete.",
    "ERROR 05-02 11:09:00 [core.py:588] EngineCore encountered a fatal error.",
    "ERROR 05-02 11:09:00 [core.py:588] Traceback (most recent call last):",
    'ERROR 05-02 11:09:00 [core.py:588]   File "/usr/lib/python3/dist-packages/vllm/v1/worker/'
    'gpu_model_runner.py", line 1200, in execute_model',
    "ERROR 05-02 11:09:00 [core.py:588] torch.OutOfMemoryError: CUDA out of memory. Tried to "
    "allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 1.02 GiB is free.",
]
TGI = [
    '2025-05-01T10:00:00.000000Z  INFO text_generation_launcher: Args { model_id: "meta-llama/'
    'Llama-3.1-8B-Instruct", revision: None, validation_workers: 2, sharded: None, num_shard: '
    "Some(1) }",
    "2025-05-01T10:00:10.000000Z  INFO download: text_generation_launcher: Successfully "
    "downloaded weights for meta-llama/Llama-3.1-8B-Instruct",
    "2025-05-01T10:00:10.000000Z  INFO shard-manager: text_generation_launcher: Starting shard "
    "rank=0",
    "2025-05-01T10:00:40.000000Z  INFO shard-manager: text_generation_launcher: Shard ready in "
    "30.1s rank=0",
    "2025-05-01T10:00:41.000000Z  INFO text_generation_launcher: Starting Webserver",
    "2025-05-01T10:00:41.000000Z  INFO text_generation_router_v3: backends/v3/src/lib.rs:125: "
    "Warming up model",
]
TGI_THEN_WARMUP_FAILED = [
    *TGI,
    "2025-05-01T10:00:50.000000Z ERROR text_generation_launcher: Method Warmup encountered an "
    "error.",
    "2025-05-01T10:00:50.000000Z ERROR text_generation_router_v3: backends/v3/src/lib.rs:130: "
    "Not enough memory to handle `max_total_tokens=131072`",
    "2025-05-01T10:00:51.000000Z ERROR text_generation_launcher: Webserver Crashed",
    "2025-05-01T10:00:51.000000Z  INFO text_generation_launcher: Shutting down shards",
]


def _label(tmp_path: Path, lines: list[str]) -> str:
    return str(classify_lines(tmp_path, lines)["label"])


@pytest.mark.parametrize("lines", [VLLM_V1, TGI], ids=["vllm-v1-engine-up", "tgi-shards-up"])
def test_a_start_up_past_its_last_stage_without_an_error_is_healthy(
    tmp_path: Path, lines: list[str]
) -> None:
    assert _label(tmp_path, lines) == "healthy"


@pytest.mark.parametrize(
    ("lines", "label"),
    [(VLLM_V1_THEN_OOM, "runtime_oom"), (TGI_THEN_WARMUP_FAILED, "kv_cache_oom")],
    ids=["vllm-v1-then-oom", "tgi-then-warmup-oom"],
)
def test_a_failure_after_that_stage_still_wins(
    tmp_path: Path, lines: list[str], label: str
) -> None:
    assert _label(tmp_path, lines) == label
