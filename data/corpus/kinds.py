"""New example kinds per label: (builder, host engine, count), appended after a family's own
examples (``corpus.build``)."""

from __future__ import annotations

from . import kinds_engine as ke
from . import kinds_sys as ks
from .family import Builder

KINDS: dict[str, tuple[tuple[Builder, str, int], ...]] = {
    "kv_cache_oom": (
        (ke.vllm_kv_negative, "vllm", 16),
        (ke.sglang_profiled_negative, "sglang", 12),
        (ke.llama_kv_oom, "vllm", 12),
    ),
    "weights_load_oom": ((ke.llama_model_oom, "vllm", 12),),
    "cuda_graph_oom": ((ke.capture_bare_oom, "vllm", 12), (ke.capture_bare_oom, "sglang", 4)),
    "runtime_oom": (
        (ke.transformers_generate_oom, "vllm", 16),
        (ke.tgi_request_failed, "tgi", 14),
    ),
    "wedged_stop": (
        (ks.old_systemd_wedged, "vllm", 8),
        (ks.old_systemd_wedged, "tgi", 4),
        (ks.status_wedged, "vllm", 14),
        (ks.docker_wedged, "vllm", 8),
        (ks.docker_wedged, "sglang", 4),
        (ks.kernel_hung_exit, "vllm", 14),
    ),
    "nccl_error": (
        (ke.nccl_socket_trace, "vllm", 10),
        (ke.nccl_socket_trace, "sglang", 4),
        (ke.sglang_gloo_capture, "sglang", 12),
    ),
    "other_crash": (
        (ks.status_crash, "vllm", 14),
        (ke.capture_cuda_error, "vllm", 12),
        (ke.capture_cuda_error, "sglang", 4),
        (ke.config_error, "tgi", 8),
        (ke.config_error, "vllm", 8),
    ),
    "healthy": ((ks.healthy_debug, "vllm", 24),),
}


def kind_jobs(label: str) -> tuple[tuple[Builder, str], ...]:
    """(builder, host engine) of each new-kind example of ``label``, in order."""
    return tuple((b, host) for b, host, n in KINDS.get(label, ()) for _ in range(n))
