"""llama.cpp's server and the NVIDIA driver's kernel log as first-class producers: short logs
written from their format strings (rules/catalog/llamacpp.toml, rules/catalog/kernel.toml,
with made-up values) classified end to end, each with the line that decides it as evidence."""

from __future__ import annotations

from pathlib import Path

from tests.classifying import classify_lines

LOADING = [
    "main: loading model",
    "srv    load_model: loading model '/models/llama-3-8b-q4_k_m.gguf'",
    "llama_model_loader: loaded meta data with 30 key-value pairs and 291 tensors from "
    "/models/llama-3-8b-q4_k_m.gguf (version GGUF V3 (latest))",
]
READY = [
    *LOADING,
    "load_tensors: offloaded 33/33 layers to GPU",
    "load_tensors:        CUDA0 model buffer size =  4403.49 MiB",
    "llama_kv_cache:      CUDA0 KV buffer size =  1024.00 MiB",
    "llama_context:      CUDA0 compute buffer size =   304.00 MiB",
    "main: model loaded",
    "main: server is listening on http://127.0.0.1:8080 - starting the main loop",
    "srv  update_slots: all slots are idle",
]
MODEL_LOAD_FAILED = [
    "srv    load_model: failed to load model, '/models/llama-3-8b-q4_k_m.gguf'",
    "main: exiting due to model loading error",
]


def _evidence(answer: dict[str, object]) -> list[str]:
    return [e["text"] for e in answer["evidence"]]  # type: ignore[attr-defined]


def test_a_cuda_oom_while_llama_server_loads_the_weights(tmp_path: Path) -> None:
    oom = (
        "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 7605.33 MiB on device 0: "
        "cudaMalloc failed: out of memory"
    )
    answer = classify_lines(
        tmp_path,
        [
            *LOADING,
            "load_tensors: offloading 32 repeating layers to GPU",
            oom,
            "alloc_tensor_range: failed to allocate CUDA0 buffer of size 7974813696",
            "llama_model_load: error loading model: unable to allocate CUDA0 buffer",
            "llama_model_load_from_file_impl: failed to load model",
            *MODEL_LOAD_FAILED,
        ],
    )
    assert answer["label"] == "weights_load_oom", answer
    evidence: list[dict[str, object]] = answer["evidence"]  # type: ignore[assignment]
    assert any(
        e["text"] == oom and e["message"] == "llamacpp.cuda.malloc-failed" for e in evidence
    ), evidence


def test_a_ggml_assert_after_readiness_is_a_crash(tmp_path: Path) -> None:
    assert_line = (
        "/app/ggml/src/ggml-cuda/ggml-cuda.cu:1290: GGML_ASSERT(src1->type == GGML_TYPE_F32) failed"
    )
    answer = classify_lines(
        tmp_path,
        [
            *READY,
            "slot launch_slot_: id  0 | task 0 | processing task",
            assert_line,
            "Aborted (core dumped)",
        ],
    )
    assert answer["label"] == "other_crash", answer
    assert any("GGML_ASSERT(src1->type == GGML_TYPE_F32) failed" in t for t in _evidence(answer))


def test_a_context_too_large_for_the_gpu_is_a_kv_cache_oom(tmp_path: Path) -> None:
    """-c 131072: the weights fit, the KV cache for that context does not."""
    answer = classify_lines(
        tmp_path,
        [
            *LOADING,
            "load_tensors:        CUDA0 model buffer size =  4403.49 MiB",
            "srv    load_model: the slot context (131072) exceeds the training context of the "
            "model (8192) - capping",
            "llama_context: n_ctx_seq (131072) > n_ctx_train (8192) -- possible training context "
            "overflow",
            "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 16384.00 MiB on device 0: "
            "cudaMalloc failed: out of memory",
            "alloc_tensor_range: failed to allocate CUDA0 buffer of size 17179869184",
            "llama_init_from_model: failed to initialize the context: failed to allocate buffer "
            "for kv cache",
            "common_init_from_params: failed to create context with model "
            "'/models/llama-3-8b-q4_k_m.gguf'",
            *MODEL_LOAD_FAILED,
        ],
    )
    assert answer["label"] == "kv_cache_oom", answer
    assert any("failed to allocate buffer for kv cache" in t for t in _evidence(answer)), answer


def test_a_prompt_larger_than_the_context_is_refused_and_the_server_goes_on(
    tmp_path: Path,
) -> None:
    answer = classify_lines(
        tmp_path,
        [
            *READY,
            "srv    send_error: task id = 12, error: request (9000 tokens) exceeds the available "
            "context size (8192 tokens), try increasing it",
            "srv  update_slots: all slots are idle",
        ],
    )
    assert answer["label"] == "healthy", answer


def test_a_driver_log_with_a_stale_gsp_heartbeat_is_a_hardware_fault(tmp_path: Path) -> None:
    answer = classify_lines(
        tmp_path,
        [
            "[81234.567890] NVRM: _kgspIsHeartbeatTimedOut: Heartbeat timed out, currentTimeMs "
            "81234567 heartbeat 81224000 heartbeatWithOffsetMs 81224000 diff 10567 timeout 10000",
            "[81234.567901] NVRM: _kgspRpcRecvPoll: GSP RM heartbeat timed out",
        ],
    )
    assert answer["label"] == "gpu_hardware_fault", answer
    assert any("heartbeat timed out" in t.lower() for t in _evidence(answer)), answer


def test_an_xid_no_process_owns_is_a_hardware_fault(tmp_path: Path) -> None:
    """Xid 109 is not a hardware-class code by itself; raised with no process, it is the GPU's."""
    xid = (
        "NVRM: Xid (PCI:0000:41:00): 109, pid='<unknown>', name=<unknown>, Ch 00000008, "
        "errorString CTX SWITCH TIMEOUT, Info 0x3c014"
    )
    answer = classify_lines(tmp_path, [f"[ 5123.000001] {xid}"])
    assert answer["label"] == "gpu_hardware_fault", answer
    assert any("pid='<unknown>'" in t for t in _evidence(answer)), answer
