"""Model cards and vLLM's per-GPU memory arithmetic, as the simulated server applies them.

The point is not to predict vLLM to the MiB but to fail where vLLM fails, for the same reasons,
so that the advisor's arithmetic (``advisor.planning.recommend``) can be checked against
a process that behaves like the real one:

* ``gpu_memory_utilization`` × total is the budget vLLM sizes itself to: weights, the profiled
  activation peak, and the KV cache fills the rest of it.
* Some memory lies *outside* that budget: the CUDA context, NCCL / expert-parallel buffers and
  CUDA-graph pools. The sampler warm-up then has to fit in what is left of the GPU
  (``total × (1 − utilization)`` minus that). Large MoE models with expert parallelism keep
  several GiB there — which is why the seed deployment dies in the warm-up.

Stdlib only: the server process imports this module and must start fast.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Final

GIB: Final = 1024**3
MIB: Final = 1024**2
BLOCK_TOKENS: Final = 16  # vLLM's default KV block size
CONTEXT_GIB: Final = 0.5  # CUDA context + cuBLAS workspace, per GPU
SAMPLER_CHUNKS: Final = 5  # N × V × 4 B each: logits fp32, scaled copy, sorted values,
SAMPLER_BYTES_PER_ELEMENT: Final = 4 * SAMPLER_CHUNKS  # int64 indices (two chunks) = 20 B
# The seed service's serving flags (MiniMax-M2.5 on 4 GPUs), shared by the demos and tests:
# its 1024 sequences do not fit the sampler's warm-up, so it fails the way the seed journal
# records.
MINIMAX_M25_FLAGS: Final = (
    "--trust-remote-code",
    "--max-model-len",
    "131072",
    "--tensor-parallel-size",
    "4",
    "--gpu-memory-utilization",
    "0.9",
    "--max-num-seqs",
    "1024",
    "--enable-expert-parallel",
)


@dataclass(frozen=True, slots=True)
class ModelCard:
    """What the memory model needs to know about a model."""

    name: str
    architecture: str
    weights_gib: float  # all weights, summed over the tensor-parallel ranks
    vocab_size: int
    kv_bytes_per_token: int  # K and V of every layer for one token, before TP sharding
    activation_gib: float  # profiled activation peak per GPU (inside the budget)
    outside_budget_gib: float  # per GPU, outside the budget: context, comm buffers, graphs
    quantization: str | None = None
    max_model_len: int = 131_072  # the model's own context length (vLLM's default)
    dtype: str = "torch.bfloat16"


# A few models people run; anything else gets a card estimated from its name.
CARDS: Final[dict[str, ModelCard]] = {
    c.name: c
    for c in (
        # The seed deployment: 230B FP8 MoE, TP 4 with expert parallelism. Its all-to-all buffers
        # and CUDA-graph pools leave ~1.2 GiB per 96 GiB GPU at utilization 0.9.
        ModelCard(
            "MiniMaxAI/MiniMax-M2.5",
            "MiniMaxM2ForCausalLM",
            215.36,
            200_064,
            98_304,
            3.19,
            8.4,
            "fp8",
        ),
        ModelCard(
            "meta-llama/Llama-3.1-8B-Instruct",
            "LlamaForCausalLM",
            14.99,
            128_256,
            131_072,
            1.0,
            1.5,
        ),
        ModelCard(
            "meta-llama/Llama-3.1-70B-Instruct",
            "LlamaForCausalLM",
            131.43,
            128_256,
            327_680,
            1.2,
            2.0,
        ),
        ModelCard(
            "Qwen/Qwen2.5-7B-Instruct",
            "Qwen2ForCausalLM",
            14.19,
            152_064,
            57_344,
            1.0,
            1.5,
            max_model_len=32_768,
        ),
    )
}

_PARAMS = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)[Bb](?![a-zA-Z])")


def card_for(
    model: str, *, weights_gib: float | None = None, vocab_size: int | None = None
) -> ModelCard:
    """The card of ``model`` (estimated from a ``<N>B`` in its name when unknown), with the
    weights and vocabulary overridden where given."""
    card = CARDS.get(model)
    if card is None:
        card = _estimated(model)
    if weights_gib is not None:
        card = replace(card, weights_gib=weights_gib, kv_bytes_per_token=_kv_per_token(weights_gib))
    if vocab_size is not None:
        card = replace(card, vocab_size=vocab_size)
    return card


def _kv_per_token(weights_gib: float) -> int:
    """KV bytes per token grow with depth, i.e. roughly with the square root of the size:
    128 KiB for an 8B model, ~330 KiB for a 70B one."""
    return int(128 * 1024 * (max(weights_gib, 1.0) / 15.0) ** 0.45) // 64 * 64


def _estimated(model: str) -> ModelCard:
    fp8 = "fp8" in model.lower()
    m = _PARAMS.search(model.rsplit("/", 1)[-1])
    params_b = float(m.group(1)) if m else 8.0
    weights = round(params_b * 1e9 * (1 if fp8 else 2) / GIB, 2)
    return ModelCard(
        model,
        "LlamaForCausalLM",
        weights,
        128_256,
        _kv_per_token(weights),
        1.0,
        1.5,
        "fp8" if fp8 else None,
    )


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    """Bytes per GPU for one configuration (every GPU of a TP group holds the same)."""

    total: int
    budget: int
    context: int
    weights: int
    activations: int
    kv: int  # may be ≤ 0: no room for the cache blocks
    kv_bytes_per_token: int  # per GPU (after TP sharding)
    graphs: int  # the rest of the outside-budget memory, after the KV cache
    sampler_chunk: int  # one N × V float32 tensor
    max_num_seqs: int

    @property
    def kv_tokens(self) -> int:
        """Tokens the KV cache holds (whole blocks), 0 when it has no room."""
        if self.kv <= 0:
            return 0
        return self.kv // (self.kv_bytes_per_token * BLOCK_TOKENS) * BLOCK_TOKENS

    @property
    def sampler_need(self) -> int:
        return self.sampler_chunk * SAMPLER_CHUNKS

    def kv_needed(self, max_model_len: int) -> int:
        """KV bytes one request of ``max_model_len`` tokens needs on each GPU."""
        return max_model_len * self.kv_bytes_per_token


def plan(
    card: ModelCard,
    *,
    tensor_parallel_size: int,
    gpu_memory_utilization: float,
    gpu_gib: float,
    max_num_seqs: int,
) -> MemoryPlan:
    """The per-GPU plan: weights W/T, budget U × G, KV = budget − weights − activations."""
    tp = max(1, tensor_parallel_size)
    total = int(gpu_gib * GIB)
    budget = int(gpu_memory_utilization * total)
    weights = int(card.weights_gib * GIB / tp)
    activations = int(card.activation_gib * GIB)
    context = int(min(CONTEXT_GIB, card.outside_budget_gib) * GIB)
    return MemoryPlan(
        total=total,
        budget=budget,
        context=context,
        weights=weights,
        activations=activations,
        kv=budget - weights - activations,
        kv_bytes_per_token=max(1, math.ceil(card.kv_bytes_per_token / tp)),
        graphs=int(card.outside_budget_gib * GIB) - context,
        sampler_chunk=max_num_seqs * card.vocab_size * 4,
        max_num_seqs=max_num_seqs,
    )


def format_size(n: float) -> str:
    """PyTorch's ``format_size``: bytes up to 1 KiB, then 2 decimals and KiB / MiB / GiB."""
    if n <= 1024:
        return f"{int(n)} bytes"
    if n < MIB:
        return f"{n / 1024:.2f} KiB"
    if n < GIB:
        return f"{n / MIB:.2f} MiB"
    return f"{n / GIB:.2f} GiB"


def gib_str(n: float) -> str:
    """vLLM 0.15's ``%s`` of ``round(x, 2)`` GiB (``12.5``, ``12.55``)."""
    return str(round(n / GIB, 2))
