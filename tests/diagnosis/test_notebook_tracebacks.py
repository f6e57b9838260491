"""A traceback pasted from a notebook (IPython's and Jupyter's layout: `File PATH:LINE, in
Class.function(args)`, `Cell In[3], line 5`, numbered code lines with `---->` at the failing
one) is read like one from a log: its frames give the phase, its code lines state no facts.
The traceback is written from IPython's frame format around vLLM's KV-cache allocation."""

from __future__ import annotations

from pathlib import Path

from advisor.parsing.tracebacks import stitch
from tests.classifying import classify_lines

NOTEBOOK = [
    "---------------------------------------------------------------------------",
    "OutOfMemoryError                          Traceback (most recent call last)",
    "Cell In[3], line 5",
    "      3 from vllm import LLM",
    '----> 5 llm = LLM(model="meta-llama/Llama-3.1-70B-Instruct", tensor_parallel_size=1)',
    "",
    "File /opt/conda/lib/python3.11/site-packages/vllm/entrypoints/llm.py:245, in "
    "LLM.__init__(self, model, tokenizer, **kwargs)",
    "    243 engine_args = EngineArgs(model=model, **kwargs)",
    "--> 245 self.llm_engine = LLMEngine.from_engine_args(engine_args)",
    "",
    "File /opt/conda/lib/python3.11/site-packages/vllm/worker/cache_engine.py:80, in "
    "CacheEngine._allocate_kv_cache(self, num_blocks, device)",
    "     78 for _ in range(self.num_attention_layers):",
    "---> 80     kv_cache.append(torch.zeros(kv_cache_shape, dtype=self.dtype, device=device))",
    "",
    "OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total "
    "capacity of 79.15 GiB of which 3.12 GiB is free. Including non-PyTorch memory, this "
    "process has 76.02 GiB memory in use.",
]


def test_a_notebook_traceback_is_one_traceback_with_its_frames() -> None:
    [tb] = stitch(NOTEBOOK, [None] * len(NOTEBOOK))
    assert tb.functions == ["<cell>", "__init__", "_allocate_kv_cache"]
    assert tb.indexes == list(range(1, len(NOTEBOOK)))  # the header through the exception
    assert tb.exceptions == [len(NOTEBOOK) - 1]
    assert tb.phase() == "kv_cache_allocation"


def test_a_notebook_oom_in_the_kv_cache_allocation_is_a_kv_cache_oom(tmp_path: Path) -> None:
    answer = classify_lines(tmp_path, NOTEBOOK, "notebook.txt")
    assert answer["label"] == "kv_cache_oom", answer
    assert answer["facts"]["phase"] == "kv_cache_allocation"
    assert answer["facts"].get("model") in (None, "meta-llama/Llama-3.1-70B-Instruct")
