"""The cues and regular expressions `facts` reads lines with: configuration keys and flags as
servers print them, and the numbers their messages state."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from advisor.core.engines import ALL
from advisor.parsing.values import FACT_TYPES

__all__ = [
    "ALIAS",
    "CONFIG_CUES",
    "CONFIG_KEYS",
    "FLAG",
    "FLAG_ALIAS",
    "KEYVAL",
    "NUMBERS",
    "SERVE",
    "SIZE",
    "Pattern",
]

SIZE = r"[\d.,]+ (?:bytes|KiB|MiB|GiB|TiB)"

# (fact, aliases) as they appear in argument reprs, config lines and server args.
CONFIG_KEYS: Final = (
    ("model", ("model", "model_path", "model_id")),
    ("max_model_len", ("max_model_len", "max_seq_len", "context_length", "context_len")),
    ("max_num_seqs", ("max_num_seqs", "max_running_requests")),
    ("max_num_batched_tokens", ("max_num_batched_tokens",)),
    ("gpu_memory_utilization", ("gpu_memory_utilization",)),
    ("tensor_parallel_size", ("tensor_parallel_size", "tp_size", "num_shard")),
    ("dtype", ("dtype",)),
    ("quantization", ("quantization", "quantize")),
    ("vocab_size", ("vocab_size",)),
    ("mem_fraction_static", ("mem_fraction_static",)),
    ("max_batch_prefill_tokens", ("max_batch_prefill_tokens", "max_prefill_tokens")),
)
ALIAS: Final = {alias: key for key, aliases in CONFIG_KEYS for alias in aliases}
KEYVAL = re.compile(
    r"""(?<![\w-])['"]?("""
    + "|".join(sorted(ALIAS, key=len, reverse=True))
    + r""")['"]?\s*[:=]\s*(?:Some\()?('[^']*'|"[^"]*"|[\w.\-/:+]+)"""
)
# Flags as command lines print them → the fact each states: every engine's long spellings of
# the flags the registry gives a fact (`advisor.core.engines`), and the model and precision
# flags, which no remedy sets.
FLAG_ALIAS: Final = {
    **{
        spelling: flag.fact
        for engine in ALL
        for flag in engine.flags
        if flag.fact in FACT_TYPES
        for spelling in flag.spellings
        if spelling.startswith("--") or spelling == "-tp"
    },
    "--dtype": "dtype",
    "--quantization": "quantization",
    "-q": "quantization",
    "--model": "model",
    "--model-path": "model",
    "--model-id": "model",
    "--quantize": "quantization",
}
FLAG = re.compile(
    r"(?<!\S)("
    + "|".join(re.escape(f) for f in sorted(FLAG_ALIAS, key=len, reverse=True))
    + r")(?:=|\s+)([^\s'\"]+)"
)
SERVE = re.compile(r"\bvllm(?:\.entrypoints\.\S+)? serve\s+([^\s-][^\s]*)")
CONFIG_CUES: Final = (
    "args",
    "config",
    "Args",
    "ServerArgs",
    "Namespace",
    "server_args",
    "model_id:",
    "num_shard:",
    "quantize:",
    "max_batch_prefill_tokens:",
    "max_total_tokens:",
    "dtype:",
)


@dataclass(frozen=True, slots=True)
class Pattern:
    """A regular expression tried only on lines that hold its cue."""

    cue: str  # a substring that must be in the line first
    regex: re.Pattern[str]  # named groups are fact keys


def _p(cue: str, regex: str) -> Pattern:
    return Pattern(cue, re.compile(regex))


NUMBERS: Final = (
    _p("Tried to allocate", r"Tried to allocate (?P<tried_to_allocate_gib>" + SIZE + r")"),
    _p(
        "total capac",
        r"GPU (?P<gpu_index>\d+) has a total capac(?:i)?ty of "
        r"(?P<total_capacity_gib>" + SIZE + r") of which (?P<free_gib>" + SIZE + r") is free",
    ),
    _p(
        "total capacity;",
        r"\(GPU (?P<gpu_index>\d+); (?P<total_capacity_gib>"
        + SIZE
        + r") total capacity;.*?; (?P<free_gib>"
        + SIZE
        + r") free",
    ),
    _p("this process has", r"this process has (?P<process_in_use_gib>" + SIZE + r") memory in use"),
    _p("dummy requests", r"with (?P<dummy_requests>\d+) dummy requests"),
    _p("KV cache size", r"KV cache size: (?P<kv_cache_tokens>[\d,]+) tokens"),
    # vLLM's own advice on its KV cache (gpu_worker.py, 0.10.2+): the size that would use all
    # the GPU memory free at start-up.
    _p(
        "to fully utilize gpu memory",
        r"`--kv-cache-memory(?:-bytes)?=(?P<suggested_kv_cache_bytes>\d+)`"
        r"(?: \([\d.]+ GiB\))? to fully utilize gpu memory",
    ),
    # llama.cpp's context as the server was given it (--ctx-size, padded), before its KV cache
    # is allocated: llama_context (newer) or llama_new_context_with_model (older).
    _p(
        ": n_ctx ",
        r"(?:llama_context|llama_new_context_with_model): n_ctx +=\s*(?P<max_model_len>\d+)",
    ),
    _p(
        "stored in KV cache",
        r"max seq len \((?P<max_model_len>\d+)\) is larger than the "
        r"maximum number of tokens that can be stored in KV cache \((?P<kv_cache_tokens>\d+)\)",
    ),
    _p(
        "KV cache is needed",
        r"max seq len \((?P<max_model_len>\d+)\), \((?P<kv_cache_needed_gib>"
        r"[\d.]+) GiB KV cache is needed, which is larger than the available KV cache memory "
        r"\((?P<available_kv_cache_gib>[\d.]+) GiB\)",
    ),
    _p(
        "estimated maximum model length",
        r"estimated maximum model length is "
        r"(?P<estimated_max_model_len>\d+)",
    ),
    _p(
        "Available KV cache memory",
        r"Available KV cache memory: (?P<available_kv_cache_gib>-?"
        r"[\d.]+) GiB",
    ),
    _p(
        "Free memory on device",
        r"Free memory on device(?: \S+)? \((?P<free_gib>[\d.]+)/"
        r"(?P<total_capacity_gib>[\d.]+) GiB\) on startup is less than desired GPU memory "
        r"utilization \((?P<gpu_memory_utilization>[\d.]+), (?P<requested_gib>[\d.]+) GiB\)",
    ),
    _p(
        "gpu_memory_utilization (",
        r"x gpu_memory_utilization \((?P<gpu_memory_utilization>"
        r"[\d.]+)\)",
    ),
    _p("max_total_num_tokens=", r"max_total_num_tokens=(?P<kv_cache_tokens>\d+)"),
    _p("context_len=", r"context_len=(?P<max_model_len>\d+)"),
    _p(
        "KV pool holds",
        r"KV pool holds (?P<kv_cache_tokens>\d+) tokens, fewer than "
        r"--context-length (?P<max_model_len>\d+)",
    ),
    _p("mem_fraction_static=", r"mem_fraction_static=(?P<mem_fraction_static>[\d.]+)"),
    _p(
        "prefill tokens",
        r"Not enough memory to handle (?P<max_batch_prefill_tokens>\d+) "
        r"prefill tokens",
    ),
    _p("max_num_batched_tokens=", r"max_num_batched_tokens=(?P<max_num_batched_tokens>\d+)"),
    _p("Using max model len", r"Using max model len (?P<max_model_len>\d+)"),
    _p("API server version", r"API server version (?P<engine_version>[\w.+-]+)"),
    _p(
        "server version",
        r"vLLM server version (?P<engine_version>[\w.+-]+), serving model "
        r"(?P<model>\S+)",
    ),
    _p("LLM engine (v", r"LLM engine \(v(?P<engine_version>[\w.+-]+)\)"),
    _p("Starting to load model", r"Starting to load model (?P<model>\S+?)(?:\.\.\.)?$"),
    _p("Xid", r"NVRM: Xid \([^)]*\): (?P<xid>\d+)"),
    _p("vocab", r"vocab(?:ulary)?[_ ]size\W{1,3}(?P<vocab_size>\d+)"),
)
