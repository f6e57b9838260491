"""Line parsing: wrappers peeled off, facts read to the digit, phases, lifecycle, tracebacks."""

from __future__ import annotations

from typing import Any

import pytest

from advisor.parsing.facts import read_facts
from advisor.parsing.lines import clean_text, lines_from_texts, split_line
from advisor.parsing.parsed import parse
from advisor.parsing.sequence import segment
from advisor.parsing.values import convert, gib

ESC = "\x1b"

# (line as it arrives, body, engine, writer pid, process)
SPLIT_CASES = [
    (
        f"{ESC}[1;36m(VllmWorker rank=1 pid=254){ESC}[0;0m INFO 04-16 10:01:02 "
        "[gpu_model_runner.py:1347] Model loading took 46.5000 GiB and 60.123456 seconds",
        "Model loading took 46.5000 GiB and 60.123456 seconds",
        "vllm",
        254,
        "VllmWorker rank=1",
    ),
    (
        "(Worker_TP0 pid=34322) INFO 05-06 20:59:59 [gpu_model_runner.py:4879] Model loading took "
        "12.66 GiB memory and 31.657031 seconds",
        "Model loading took 12.66 GiB memory and 31.657031 seconds",
        "vllm",
        34322,
        "Worker_TP0",
    ),
    (
        "INFO 12-13 02:10:29 distributed_gpu_executor.py:58] # GPU blocks: 189945, "
        "# CPU blocks: 21845",
        "# GPU blocks: 189945, # CPU blocks: 21845",
        "vllm",
        None,
        None,
    ),
    (
        "Mar 16 06:12:38 gpu01 vllm[4242]: INFO 03-16 06:12:38 [api_server.py:1090] vLLM API "
        "server version 0.8.1",
        "vLLM API server version 0.8.1",
        "vllm",
        4242,
        None,
    ),
    (
        "Mar 16 06:12:40 gpu01 systemd[1]: vllm.service: Main process exited, code=exited, "
        "status=1/FAILURE",
        "vllm.service: Main process exited, code=exited, status=1/FAILURE",
        "systemd",
        1,
        None,
    ),
    (
        "2025-03-16T06:12:38.123456789Z (APIServer pid=7) INFO:     Application startup complete.",
        "Application startup complete.",
        "vllm",
        7,
        "APIServer",
    ),
    (
        "[2024-12-26 10:00:00 DP0 TP1] Load weight end. type=LlamaForCausalLM, "
        "dtype=torch.bfloat16, avail mem=60.91 GB",
        "Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=60.91 GB",
        "sglang",
        None,
        "DP0 TP1",
    ),
    (
        "2023-09-26T21:48:00.969072Z ERROR text_generation_launcher: Method Warmup encountered "
        "an error.",
        "Method Warmup encountered an error.",
        "tgi",
        None,
        None,
    ),
    (
        "Mar 16 06:12:41 gpu01 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, "
        "GPU has fallen off the bus.",
        "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus.",
        "kernel",
        None,
        None,
    ),
    (
        "\rLoading safetensors checkpoint shards:  10% Completed | 1/9\rLoading safetensors "
        "checkpoint shards:  56% Completed | 5/9 [00:13<00:11,  2.87s/it]",
        "Loading safetensors checkpoint shards:  56% Completed | 5/9 [00:13<00:11,  2.87s/it]",
        None,
        None,
        None,
    ),
]


@pytest.mark.parametrize(("raw", "body", "engine", "pid", "process"), SPLIT_CASES)
def test_wrappers_are_peeled_and_kept_as_attributes(
    raw: str, body: str, engine: str | None, pid: int | None, process: str | None
) -> None:
    split = split_line(clean_text(raw))
    assert (split.body, split.engine, split.pid, split.process) == (body, engine, pid, process)


# (body, engine, facts stated) — checked to the digit.
FACT_CASES: list[tuple[str, str | None, dict[str, Any]]] = [
    (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 782.00 MiB. GPU 0 has a "
        "total capacity of 94.97 GiB of which 411.62 MiB is free. Including non-PyTorch memory, "
        "this process has 94.55 GiB memory in use. Of the allocated memory 92.10 GiB is allocated "
        "by PyTorch",
        "vllm",
        {
            "tried_to_allocate_gib": 0.763671875,
            "gpu_index": 0,
            "total_capacity_gib": 94.97,
            "free_gib": 0.40197265625,
            "process_in_use_gib": 94.55,
        },
    ),
    (
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 3 has a "
        "total capacty of 23.65 GiB of which 6.06 MiB is free.",
        None,
        {
            "tried_to_allocate_gib": 0.01953125,
            "gpu_index": 3,
            "total_capacity_gib": 23.65,
            "free_gib": 0.005918,
        },
    ),
    (
        "RuntimeError: CUDA out of memory. Tried to allocate 1024 bytes (GPU 1; 15.78 GiB total "
        "capacity; 14.12 GiB already allocated; 2.75 MiB free; 14.50 GiB reserved in total by "
        "PyTorch)",
        None,
        {
            "tried_to_allocate_gib": 1024 / 2**30,
            "gpu_index": 1,
            "total_capacity_gib": 15.78,
            "free_gib": 0.002685546875,
        },
    ),
    (
        "RuntimeError: CUDA out of memory occurred when warming up sampler with 1024 dummy "
        "requests. Please try lowering `max_num_seqs`",
        "vllm",
        {"dummy_requests": 1024},
    ),
    ("GPU KV cache size: 1,242,880 tokens", "vllm", {"kv_cache_tokens": 1242880}),
    (
        "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens "
        "that can be stored in KV cache (21648). Try increasing `gpu_memory_utilization`",
        "vllm",
        {"max_model_len": 32768, "kv_cache_tokens": 21648},
    ),
    (
        "ValueError: To serve at least one request with the models's max seq len (32768), (4.00 "
        "GiB KV cache is needed, which is larger than the available KV cache memory (1.02 GiB). "
        "Based on the available memory, the estimated maximum model length is 8336. Try increasing",
        "vllm",
        {
            "max_model_len": 32768,
            "kv_cache_needed_gib": 4.0,
            "available_kv_cache_gib": 1.02,
            "estimated_max_model_len": 8336,
        },
    ),
    (
        "ValueError: Free memory on device cuda:0 (30.12/79.19 GiB) on startup is less than "
        "desired GPU memory utilization (0.9, 71.28 GiB). Decrease GPU memory utilization",
        "vllm",
        {
            "free_gib": 30.12,
            "total_capacity_gib": 79.19,
            "gpu_memory_utilization": 0.9,
            "requested_gib": 71.28,
        },
    ),
    ("Available KV cache memory: 28.44 GiB", "vllm", {"available_kv_cache_gib": 28.44}),
    (
        "non-default args: {'model_tag': 'MiniMaxAI/MiniMax-M2.5', 'model': "
        "'MiniMaxAI/MiniMax-M2.5', 'max_model_len': 131072, 'tensor_parallel_size': 4, "
        "'gpu_memory_utilization': 0.9, 'max_num_seqs': 1024}",
        "vllm",
        {
            "model": "MiniMaxAI/MiniMax-M2.5",
            "max_model_len": 131072,
            "tensor_parallel_size": 4,
            "gpu_memory_utilization": 0.9,
            "max_num_seqs": 1024,
        },
    ),
    (
        "Initializing a V1 LLM engine (v0.15.1) with config: model='Qwen/Qwen2.5-7B-Instruct', "
        "dtype=torch.bfloat16, max_seq_len=40000, tensor_parallel_size=2, quantization=fp8, seed=0",
        "vllm",
        {
            "engine_version": "0.15.1",
            "model": "Qwen/Qwen2.5-7B-Instruct",
            "dtype": "bfloat16",
            "max_model_len": 40000,
            "tensor_parallel_size": 2,
            "quantization": "fp8",
        },
    ),
    (
        "args: Namespace(model='meta-llama/Llama-3.1-8B', max_model_len=None, max_num_seqs=256, "
        "gpu_memory_utilization=0.85, quantization=None)",
        "vllm",
        {"model": "meta-llama/Llama-3.1-8B", "max_num_seqs": 256, "gpu_memory_utilization": 0.85},
    ),
    (
        "the current vLLM instance can use total_gpu_memory (79.19GiB) x gpu_memory_utilization "
        "(0.80) = 63.35GiB",
        "vllm",
        {"gpu_memory_utilization": 0.8},
    ),
    (
        "Chunked prefill is enabled with max_num_batched_tokens=8192.",
        "vllm",
        {"max_num_batched_tokens": 8192},
    ),
    (
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current "
        "value: mem_fraction_static=0.88",
        "sglang",
        {"mem_fraction_static": 0.88},
    ),
    (
        "max_total_num_tokens=1048576, max_prefill_tokens=16384, max_running_requests=4097, "
        "context_len=131072",
        "sglang",
        {"kv_cache_tokens": 1048576, "max_model_len": 131072},
    ),
    (
        "Server error: Not enough memory to handle 4096 prefill tokens. You need to decrease "
        "`--max-batch-prefill-tokens`",
        "tgi",
        {"max_batch_prefill_tokens": 4096},
    ),
    (
        "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus.",
        "kernel",
        {"xid": 79},
    ),
    (
        "vllm.service: Main process exited, code=killed, status=9/KILL",
        "systemd",
        {"exit_signal": "KILL"},
    ),
    (
        "vllm.service: Main process exited, code=exited, status=203/EXEC",
        "systemd",
        {"exit_code": 203},
    ),
    ("vllm.service: Failed with result 'timeout'.", "systemd", {"unit_result": "timeout"}),
    (
        "vllm.service: Scheduled restart job, restart counter is at 113.",
        "systemd",
        {"restart_count": 113},
    ),
    ("vllm.service: State 'stop-sigterm' timed out. Killing.", "systemd", {"stop_timed_out": True}),
    (
        "ExecStart=/opt/vllm/bin/vllm serve Qwen/Qwen3-32B --max-num-seqs 512 "
        "--gpu-memory-utilization=0.92 -tp 2 --max-model-len 32768",
        None,
        {
            "model": "Qwen/Qwen3-32B",
            "max_num_seqs": 512,
            "gpu_memory_utilization": 0.92,
            "tensor_parallel_size": 2,
            "max_model_len": 32768,
        },
    ),
]


@pytest.mark.parametrize(("body", "engine", "expected"), FACT_CASES)
def test_facts_are_read_to_the_digit(
    body: str, engine: str | None, expected: dict[str, Any]
) -> None:
    facts = read_facts(body, engine).facts
    for key, value in expected.items():
        if isinstance(value, float) and key == "free_gib" and value == 0.005918:
            assert facts[key] == 6.06 / 1024
        else:
            assert facts[key] == value, key
    assert not set(facts) - set(expected) - {"engine_version"}


def test_a_request_log_that_mentions_memory_states_nothing() -> None:
    for body in (
        '127.0.0.1:52344 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
        "Engine 000: Avg prompt throughput: 1204.1 tokens/s, Running: 31 reqs, "
        "GPU KV cache usage: 87.3%, Prefix cache hit rate: 41.0%",
        "Received request chatcmpl-1: prompt: 'how does memory paging work?'",
    ):
        result = read_facts(body, "vllm")
        assert (result.facts, result.event) == ({}, None)


def test_sizes_convert_exactly() -> None:
    assert gib("782.00 MiB") == 782 / 1024
    assert gib("1,024 MiB") == 1.0
    assert gib("512 KiB") == 0.00048828125
    assert convert("max_model_len", "131,072") == 131072
    assert convert("quantization", "None") is None


def test_interleaved_worker_tracebacks_are_stitched_per_writer() -> None:
    texts = [
        "(Worker_TP0 pid=10) ERROR 02-21 00:33:16 [multiproc_executor.py:671] WorkerProc hit an "
        "exception.",
        "(Worker_TP0 pid=10) ERROR 02-21 00:33:16 [multiproc_executor.py:671] Traceback (most "
        "recent call last):",
        "(Worker_TP1 pid=11) ERROR 02-21 00:33:16 [multiproc_executor.py:671] Traceback (most "
        "recent call last):",
        '(Worker_TP0 pid=10) ERROR 02-21 00:33:16 [multiproc_executor.py:671]   File "/x/vllm/v1/'
        'worker/gpu_model_runner.py", line 3208, in _dummy_sampler_run',
        '(Worker_TP1 pid=11) ERROR 02-21 00:33:16 [multiproc_executor.py:671]   File "/x/vllm/'
        'model_executor/model_loader/default_loader.py", line 12, in load_weights',
        "(Worker_TP0 pid=10) ERROR 02-21 00:33:16 [multiproc_executor.py:671]     sampler_output "
        "= self.sampler(logits=logits,",
        "(Worker_TP1 pid=11) ERROR 02-21 00:33:16 [multiproc_executor.py:671] torch.Out"
        "OfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total "
        "capacity of 79.19 GiB of which 1.50 GiB is free.",
        "(Worker_TP0 pid=10) ERROR 02-21 00:33:16 [multiproc_executor.py:671] torch.Out"
        "OfMemoryError: CUDA out of memory. Tried to allocate 782.00 MiB. GPU 0 has a total "
        "capacity of 94.97 GiB of which 411.62 MiB is free.",
        "(Worker_TP0 pid=10) ERROR 02-21 00:33:16 [multiproc_executor.py:671]",
        "(Worker_TP0 pid=10) ERROR 02-21 00:33:16 [multiproc_executor.py:671] The above exception "
        "was the direct cause of the following exception:",
        "(Worker_TP0 pid=10) ERROR 02-21 00:33:16 [multiproc_executor.py:671] Traceback (most "
        "recent call last):",
        "(Worker_TP0 pid=10) ERROR 02-21 00:33:16 [multiproc_executor.py:671] RuntimeError: CUDA "
        "out of memory occurred when warming up sampler with 1024 dummy requests.",
        "(EngineCore_DP0 pid=9) ERROR 02-21 00:33:16 [core.py:708] EngineCore failed to start.",
    ]
    parsed = parse(lines_from_texts(texts))
    (run,) = segment(parsed)
    by_writer = {tb.writer: tb for tb in run.tracebacks}
    assert set(by_writer) == {10, 11}
    tp0, tp1 = by_writer[10], by_writer[11]
    assert tp0.functions == ["_dummy_sampler_run"] and tp0.phase() == "sampler_warmup"
    assert tp1.functions == ["load_weights"] and tp1.phase() == "weights_loading"
    assert [parsed[i].line.number for i in tp0.exceptions] == [8, 12]
    assert [parsed[i].line.number for i in tp1.exceptions] == [7]
    assert 13 not in [parsed[i].line.number for i in tp0.indexes]


def test_runs_are_cut_at_systemd_starts_and_at_a_new_banner() -> None:
    texts = [
        "Mar 16 06:12:38 gpu01 systemd[1]: Started vllm.service - vLLM.",
        "Mar 16 06:12:39 gpu01 vllm[42]: INFO 03-16 06:12:39 [api_server.py:1] vLLM API server "
        "version 0.8.5",
        "Mar 16 06:12:50 gpu01 systemd[1]: vllm.service: Main process exited, code=exited, "
        "status=1/FAILURE",
        "Mar 16 06:12:50 gpu01 systemd[1]: vllm.service: Failed with result 'exit-code'.",
        "Mar 16 06:12:51 gpu01 systemd[1]: vllm.service: Scheduled restart job, restart counter "
        "is at 1.",
        "Mar 16 06:12:51 gpu01 systemd[1]: Stopped vllm.service - vLLM.",
        "Mar 16 06:12:51 gpu01 systemd[1]: Started vllm.service - vLLM.",
        "Mar 16 06:12:52 gpu01 vllm[43]: INFO 03-16 06:12:52 [api_server.py:1] vLLM API server "
        "version 0.8.5",
    ]
    runs = segment(parse(lines_from_texts(texts)))
    assert [len(r.indexes) for r in runs] == [6, 2]
    assert runs[0].event_facts == {"exit_code": 1, "unit_result": "exit-code", "restart_count": 1}
    assert runs[0].died and not runs[1].died
    docker = [
        "INFO 03-16 06:12:39 [api_server.py:1] vLLM API server version 0.8.5",
        "INFO 03-16 06:12:45 [loader.py:458] Loading weights took 38.52 seconds",
        "ERROR 03-16 06:12:46 [core.py:396] EngineCore failed to start.",
        "INFO 03-16 06:13:39 [api_server.py:1] vLLM API server version 0.8.5",
    ]
    assert [len(r.indexes) for r in segment(parse(lines_from_texts(docker)))] == [3, 1]


def test_a_kernel_line_joins_the_run_of_the_process_it_names() -> None:
    from advisor.parsing.lines import LogLine

    def app(n: int, unit: str, text: str) -> LogLine:
        return LogLine(number=n, text=text, unit=unit, pid=100 if unit == "a.service" else 200)

    lines = [
        app(
            1,
            "a.service",
            "(EngineCore_DP0 pid=111) INFO 01-01 00:00:01 [core.py:1] "
            "Initializing a V1 LLM engine (v0.11.0) with config: model='m'",
        ),
        app(
            2,
            "b.service",
            "(EngineCore_DP0 pid=222) INFO 01-01 00:00:01 [core.py:1] "
            "Initializing a V1 LLM engine (v0.11.0) with config: model='n'",
        ),
        LogLine(
            number=3,
            text="NVRM: Xid (PCI:0000:3b:00): 79, pid=222, name=VLLM::EngineCor, "
            "GPU has fallen off the bus.",
            transport="kernel",
        ),
        LogLine(
            number=4,
            text="NVRM: Xid (PCI:0000:18:00): 13, Graphics Exception: ESR",
            transport="kernel",
        ),
    ]
    parsed = parse(lines)
    runs = {r.unit: [parsed[i].line.number for i in r.indexes] for r in segment(parsed)}
    assert runs == {"a.service": [1, 4], "b.service": [2, 3, 4]}
