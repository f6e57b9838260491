"""The principles of docs/diagnosis.md, each held against the rules, the catalogue and the
model together. The logs are written from the engines' format strings."""

from __future__ import annotations

import re

import pytest

from advisor.core.taxonomy import OUT_OF_MEMORY_LABELS
from advisor.diagnosis.classify import RuleVote, RunVerdict, diagnose, final_label
from advisor.diagnosis.model import load_model
from advisor.diagnosis.rules import load_rules
from advisor.parsing.catalog import shipped_catalog
from advisor.parsing.pasted import lines_from_paste
from advisor.parsing.tracebacks import stitch

# What a pattern must speak of to be an out-of-memory label's evidence.
_MEMORY_WORDS = re.compile(
    r"memory|OutOfMemory|ALLOC_FAILED|KV ?cache|[cm]alloc|\boom\b|mem|buffer", re.IGNORECASE
)


def _judge(lines: list[str]) -> tuple[RunVerdict, list[str]]:
    """The primary run's verdict, and the texts of its evidence lines."""
    diagnosis = diagnose(lines_from_paste(lines), load_rules(), load_model())
    verdict = diagnosis.primary
    assert verdict is not None
    return verdict, [diagnosis.parsed[i].line.text for i in verdict.evidence]


def test_every_out_of_memory_rule_speaks_of_memory() -> None:
    """An OOM label needs an out-of-memory error: every pattern of every rule that gives one
    (hand-written or catalogued) names memory, unless the rule's conditions read a memory
    figure from the line (a profiled budget of no tokens)."""
    catalog = shipped_catalog()
    rules = [r for r in load_rules().rules if r.spec.label in OUT_OF_MEMORY_LABELS]
    assert len(rules) >= 50
    silent = []
    for rule in rules:
        if rule.when:
            continue
        message = catalog.by_id(rule.message) if rule.message else None
        # A catalogued line is read with its message's whole format string (a memory
        # error's second line is still that error) beside its template.
        patterns = [p.pattern for p in rule.patterns]
        texts = [f"{message.spec.format} {patterns[0]}"] if message else patterns
        silent += [
            (rule.id, t[:80])
            for t in texts
            if not _MEMORY_WORDS.search(t.replace(" +", " ").replace(" ?", " "))
        ]
    assert silent == []


def test_the_model_alone_names_no_oom_where_no_line_speaks_of_memory() -> None:
    probabilities = {"kv_cache_oom": 0.9, "other_crash": 0.08, "unknown": 0.02}
    vote = RuleVote("other_crash", 0.68, "generic.exception")
    shown, _, _ = final_label(vote, probabilities, healthy_seen=False, trouble=True)
    assert shown == "kv_cache_oom"
    label, _, candidates = final_label(
        vote,
        probabilities,
        healthy_seen=False,
        trouble=True,
        lacking=lambda: OUT_OF_MEMORY_LABELS,
    )
    assert label == "other_crash"
    assert all(c.label not in OUT_OF_MEMORY_LABELS for c in candidates)


VLLMRS_NO_DEVICE = [
    "2025-06-01T10:00:00.000000Z  INFO vllm_rs::core::runner: Loading model Qwen/Qwen3-8B",
    'Failed to allocate KVCache: Msg("KVCache allocation failed: Platform error: no device")',
    "Tips: Try reducing --max-model-len or --max-num-seqs, or free GPU resources.",
    "thread 'main' panicked at src/core/engine.rs:211:14:",
    'called `Result::unwrap()` on an `Err` value: Msg("no device")',
    "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace",
]
SGLANG_CAPTURE_TYPE_ERROR = [
    "[2025-06-01 10:00:00 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, "
    "avail mem=61.20 GB, mem usage=15.08 GB.",
    "[2025-06-01 10:00:02 TP0] Capture cuda graph begin. This can take up to several minutes. "
    "avail mem=44.95 GB",
    "[2025-06-01 10:00:09 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/model_executor/'
    'cuda_graph_runner.py", line 310, in __init__',
    "    self.capture()",
    "Exception: Capture cuda graph failed: expected Tensor as element 0 in argument 0, but "
    "got NoneType",
    "Possible solutions:",
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
    "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)",
    "3. disable torch compile by not using --enable-torch-compile",
    "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)",
]
VLLM_CAPTURE_SHAPE_ERROR = [
    "INFO 06-01 10:00:00 [gpu_model_runner.py:1624] Model loading took 15.27 GiB and 27.1 seconds",
    "INFO 06-01 10:00:20 [gpu_worker.py:227] Available KV cache memory: 52.11 GiB",
    "DEBUG 06-01 10:00:21 [gpu_worker.py:391] If out-of-memory occurs during CUDA graph capture "
    "or serving, lower --gpu-memory-utilization or --max-num-seqs.",
    "ERROR 06-01 10:00:30 [core.py:588] EngineCore failed to start.",
    "ERROR 06-01 10:00:30 [core.py:588] Traceback (most recent call last):",
    'ERROR 06-01 10:00:30 [core.py:588]   File "/usr/lib/python3/dist-packages/vllm/v1/worker/'
    'gpu_model_runner.py", line 2040, in capture_model',
    "ERROR 06-01 10:00:30 [core.py:588]     self._dummy_run(num_tokens)",
    "ERROR 06-01 10:00:30 [core.py:588] RuntimeError: shape '[8, -1, 128]' is invalid for "
    "input of size 5120",
]
LLAMACPP_TERMINATE = [
    "main: loading model",
    "llama_model_loader: loaded meta data with 30 key-value pairs and 291 tensors",
    "terminate called after throwing an instance of 'std::runtime_error'",
    "  what():  unknown model architecture: 'qwen3moe'",
]


@pytest.mark.parametrize(
    ("lines", "fatal"),
    [
        (VLLMRS_NO_DEVICE, "thread 'main' panicked at"),
        (SGLANG_CAPTURE_TYPE_ERROR, "Capture cuda graph failed: expected Tensor"),
        (VLLM_CAPTURE_SHAPE_ERROR, "RuntimeError: shape"),
        (LLAMACPP_TERMINATE, "terminate called after throwing"),
    ],
    ids=["vllmrs-no-device", "sglang-capture-type-error", "vllm-capture-shape", "llamacpp-abort"],
)
def test_a_hint_is_advice_and_a_clear_fatal_error_is_other_crash(
    lines: list[str], fatal: str
) -> None:
    """Each log has memory advice in it (a "Tips: … free GPU resources", SGLang's "set
    --mem-fraction-static to a smaller value", vLLM's "If out-of-memory occurs …") and a
    fatal error that is no lack of memory: `other_crash`, with the error among the
    evidence."""
    verdict, evidence = _judge(lines)
    assert verdict.label == "other_crash", verdict.candidates
    assert any(fatal in t for t in evidence), evidence


FOREIGN = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 0 has a total "
    "capacity of 79.19 GiB of which 1.02 GiB is free. Process 51022 has 60.11 GiB memory in "
    "use. Including non-PyTorch memory, this process has 18.04 GiB memory in use."
)
OWN = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 0 has a total "
    "capacity of 79.19 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this "
    "process has 78.14 GiB memory in use. Of the allocated memory 77.40 GiB is allocated by "
    "PyTorch, and 221.11 MiB is reserved by PyTorch but unallocated."
)


def _loading_oom(oom: str) -> list[str]:
    err = "ERROR 06-01 10:00:30 [core.py:588] "
    return [
        "INFO 06-01 10:00:00 [gpu_model_runner.py:1595] Starting to load model "
        "meta-llama/Llama-3.3-70B-Instruct...",
        f"{err}EngineCore failed to start.",
        f"{err}Traceback (most recent call last):",
        f'{err}  File "/usr/lib/python3/dist-packages/vllm/model_executor/model_loader/'
        'default_loader.py", line 269, in load_weights',
        f"{err}    loaded_weights = model.load_weights(",
        f"{err}{oom}",
    ]


def test_whose_memory_decides_between_held_and_too_big() -> None:
    """Another process holding the memory is `gpu_memory_held`; the failing process's own
    use (the model does not fit) is `weights_load_oom`."""
    assert _judge(_loading_oom(FOREIGN))[0].label == "gpu_memory_held"
    assert _judge(_loading_oom(OWN))[0].label == "weights_load_oom"


def _startup(engine_line: str, error: str) -> list[str]:
    err = "ERROR 06-01 10:00:30 [core.py:588] "
    return [
        "INFO 06-01 10:00:00 [api_server.py:1043] vLLM API server version 0.9.1",
        engine_line,
        f"{err}EngineCore failed to start.",
        f"{err}Traceback (most recent call last):",
        f'{err}  File "/usr/lib/python3/dist-packages/vllm/v1/engine/core.py", line 77, in '
        "__init__",
        f"{err}    self._initialize_kv_caches(vllm_config)",
        f"{err}{error}",
    ]


LOADING = (
    "INFO 06-01 10:00:12 [gpu_model_runner.py:1595] Starting to load model "
    "meta-llama/Llama-3.3-70B-Instruct..."
)
LOADED = "INFO 06-01 10:00:40 [gpu_model_runner.py:1624] Model loading took 15.27 GiB and 27.1 s"


@pytest.mark.parametrize(
    ("engine_line", "error", "label"),
    [
        (
            LOADING,
            "RuntimeError: GPU 0 ran out of GPU memory while allocating 2.00 GiB",
            "weights_load_oom",
        ),
        (
            LOADING,
            "RuntimeError: device memory exhausted (636.16 MiB available)",
            "weights_load_oom",
        ),
        (
            LOADED,
            "ValueError: max_model_len (131072) exceeds the KV cache capacity (98304 tokens).",
            "kv_cache_oom",
        ),
        (
            LOADED,
            "RuntimeError: the KV cache pool is too small: not enough memory left",
            "kv_cache_oom",
        ),
        (
            LOADED,
            "RuntimeError: not enough GPU memory for the KV cache after the weights",
            "kv_cache_oom",
        ),
        (
            LOADING,
            "RuntimeError: GPU 0 already has 24.53 GiB in use by other processes",
            "gpu_memory_held",
        ),
        (
            LOADING,
            "RuntimeError: 30.9 GiB of device memory is held by another process",
            "gpu_memory_held",
        ),
        (
            LOADING,
            "ValueError: only 21.16 GiB of 47.53 GiB free (need 43.73 GiB)",
            "gpu_memory_held",
        ),
    ],
    ids=[
        "ran-out-loading",
        "exhausted-loading",
        "kv-capacity",
        "kv-pool-small",
        "kv-not-enough",
        "held-in-use-by-others",
        "held-by-another",
        "held-only-free",
    ],
)
def test_a_failure_in_words_no_rule_was_written_for(
    engine_line: str, error: str, label: str
) -> None:
    """Principles over patterns: memory that ran out, a KV cache that cannot hold a request,
    memory other processes hold — in wordings no catalogued message has — still get their
    label, from a rule (not from the model alone) and with the error as evidence."""
    verdict, evidence = _judge(_startup(engine_line, error))
    assert verdict.label == label, verdict.candidates
    assert verdict.corroborated
    assert any(error in t for t in evidence), evidence


def test_an_oom_a_server_logs_and_recovers_from_is_no_failure() -> None:
    """vllm.rs logs that it could not capture CUDA graphs for lack of memory and serves
    without them: not a failure, whatever the word "memory" near it."""
    lines = [
        "2025-06-01T10:00:00.000000Z  INFO vllm_rs::core::engine: Loading model Qwen/Qwen3-8B",
        "2025-06-01T10:00:20.000000Z  INFO vllm_rs::core::engine: Unable to capture cuda graph "
        'Cuda(Cuda(DriverError(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")))!',
        "2025-06-01T10:00:21.000000Z  INFO vllm_rs::server: Server started at http://0.0.0.0:8000",
    ]
    verdict, _ = _judge(lines)
    assert verdict.label not in OUT_OF_MEMORY_LABELS, verdict.candidates


CHAINED = [
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 2040, '
    "in capture_model",
    "    self._dummy_run(num_tokens)",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB.",
    "",
    "The above exception was the direct cause of the following exception:",
    "",
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3/dist-packages/vllm/v1/engine/core.py", line 144, in '
    "_initialize_kv_caches",
    "    self.model_executor.initialize_from_config(kv_cache_configs)",
    "RuntimeError: Engine core initialization failed.",
]


def test_the_phase_of_a_chained_traceback_is_its_root_causes() -> None:
    """Python prints the cause first: the phase comes from the frames around the error that
    started it (here a CUDA graph capture), not from the wrapper raised while handling it."""
    [tb] = stitch(CHAINED, [None] * len(CHAINED))
    assert tb.chain == [0, 1]
    assert tb.phase() == "cuda_graph_capture"
    verdict, _ = _judge(CHAINED)
    assert verdict.label == "cuda_graph_oom", verdict.candidates
