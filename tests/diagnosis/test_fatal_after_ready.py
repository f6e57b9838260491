"""Anything fatal after readiness is a runtime failure, whatever shutdown lines follow: a
server that said it was ready, then logged its engine's death at a fatal level (or in words
that say so) and shut down in good order, crashed. The logs are written from the engines'
format strings (vLLM 0.6's launcher, uvicorn's shutdown lines, TGI's launcher)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.classifying import classify_lines

READY = [
    "INFO 03-11 09:14:02 [api_server.py:1024] Starting vLLM API server on http://0.0.0.0:8000",
    "INFO:     Started server process [2211]",
    "INFO:     Waiting for application startup.",
    "INFO:     Application startup complete.",
    "INFO 03-11 09:20:11 [logger.py:39] Received request cmpl-5: prompt: 'hi', params: "
    "SamplingParams(n=1)",
]
ENGINE_ASSERTION = [
    "ERROR 03-11 09:20:12 [engine.py:160] AssertionError()",
    "ERROR 03-11 09:20:12 [engine.py:160] Traceback (most recent call last):",
    'ERROR 03-11 09:20:12 [engine.py:160]   File "/usr/lib/python3/dist-packages/vllm/engine/'
    'multiprocessing/engine.py", line 158, in start',
    "ERROR 03-11 09:20:12 [engine.py:160]     self.run_engine_loop()",
    "ERROR 03-11 09:20:12 [engine.py:160] AssertionError",
]
ORDERLY = [
    'INFO:     10.0.0.5:51234 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error',
    "INFO:     Shutting down",
    "INFO:     Waiting for application shutdown.",
    "INFO:     Application shutdown complete.",
    "INFO:     Finished server process [2211]",
]
TGI = [
    "2025-05-01T10:00:00.000000Z  INFO text_generation_launcher: Sharding model on 2 processes",
    "2025-05-01T10:00:30.000000Z  INFO shard-manager: text_generation_launcher: Shard ready in "
    "30.1s rank=0",
    "2025-05-01T10:00:31.000000Z  INFO text_generation_launcher: Starting Webserver",
    "2025-05-01T10:00:40.000000Z  INFO text_generation_router::server: router/src/server.rs:2000: "
    "Connected",
    "thread 'tokio-runtime-worker' panicked at router/src/infer/mod.rs:120:45:",
    "called `Option::unwrap()` on a `None` value",
    "2025-05-01T10:05:00.000000Z ERROR text_generation_launcher: Webserver Crashed",
    "2025-05-01T10:05:00.000000Z  INFO text_generation_launcher: Shutting down shards",
    "2025-05-01T10:05:01.000000Z  INFO shard-manager: text_generation_launcher: Terminating "
    "shard rank=0",
]


@pytest.mark.parametrize(
    "fatal",
    [
        "CRITICAL 03-11 09:20:13 [launcher.py:101] MQLLMEngine is already dead, terminating "
        "server process",
        "CRITICAL 03-11 09:20:13 [launcher.py:101] AsyncLLMEngine has failed, terminating "
        "server process",
        "CRITICAL 03-11 09:20:13 [launcher.py:99] the engine stopped answering",  # the level
    ],
    ids=["mq-engine-dead", "async-engine-failed", "any-critical-line"],
)
def test_an_engine_death_then_an_orderly_shutdown_is_a_crash(tmp_path: Path, fatal: str) -> None:
    answer = classify_lines(tmp_path, [*READY, *ENGINE_ASSERTION, fatal, *ORDERLY])
    assert answer["label"] == "other_crash", answer
    texts = [e["text"] for e in answer["evidence"]]  # type: ignore[attr-defined]
    assert any("AssertionError" in t for t in texts), texts


def test_without_the_death_the_same_server_is_healthy(tmp_path: Path) -> None:
    """A request's error the server survives, then a stop: healthy (the cue is the death)."""
    answer = classify_lines(tmp_path, [*READY, *ORDERLY])
    assert answer["label"] == "healthy", answer


def test_a_tgi_router_that_crashed_after_connecting_is_not_healthy_nor_an_oom(
    tmp_path: Path,
) -> None:
    answer = classify_lines(tmp_path, TGI)
    assert answer["label"] == "other_crash", answer
