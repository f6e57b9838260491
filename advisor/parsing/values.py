"""The facts a line can state: their names and types, the domain of every number, and
reading a stated value as its fact's type (`read_value`)."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any, Final

# The facts `classify --json` reports, with their types. Every key is always present.
FACT_TYPES: Final[dict[str, type]] = {
    "model": str,
    "engine": str,
    "engine_version": str,
    "max_model_len": int,
    "max_num_seqs": int,
    "max_num_batched_tokens": int,
    "gpu_memory_utilization": float,
    "tensor_parallel_size": int,
    "dtype": str,
    "quantization": str,
    "vocab_size": int,
    "dummy_requests": int,
    "tried_to_allocate_gib": float,
    "total_capacity_gib": float,
    "free_gib": float,
    "process_in_use_gib": float,
    "gpu_index": int,
    "kv_cache_tokens": int,
    "kv_cache_needed_gib": float,
    "available_kv_cache_gib": float,
    "estimated_max_model_len": int,
    "requested_gib": float,
    "mem_fraction_static": float,
    "max_batch_prefill_tokens": int,
    "phase": str,
    "exit_code": int,
    "exit_signal": str,
    "unit_result": str,
    "restart_count": int,
    "stop_timed_out": bool,
    "xid": int,
    "max_total_tokens": int,
    "profiled_max_total_tokens": int,
    "hung_task_seconds": int,
    "suggested_kv_cache_bytes": int,
    "facts_dropped": int,
}
FACT_KEYS: Final = tuple(FACT_TYPES)
# Facts that describe the configuration (the rest describe what happened).
CONFIG_FACTS: Final = frozenset(
    {
        "model",
        "engine_version",
        "max_model_len",
        "max_num_seqs",
        "max_num_batched_tokens",
        "gpu_memory_utilization",
        "tensor_parallel_size",
        "dtype",
        "quantization",
        "vocab_size",
        "mem_fraction_static",
        "max_batch_prefill_tokens",
    }
)

# The domain of every number a line can state, (lowest, highest), both included: one table,
# checked where the number is read. A value outside (a prompt echoing 10**30, `inf`, a
# negative size, a 300-digit vocab size) is no fact: `read_value` drops it and the line
# counts it (`LineFacts.dropped`), so nothing downstream ever holds it.
_GIB_MAX: Final = float(1 << 33)  # 2**63 bytes
_TOKENS: Final = (1, 1 << 40)
NUMBER_DOMAINS: Final[dict[str, tuple[int, int] | tuple[float, float]]] = {
    "max_model_len": _TOKENS,
    "max_num_seqs": (1, (1 << 31) - 1),
    "max_num_batched_tokens": _TOKENS,
    "gpu_memory_utilization": (0.0, 1.0),
    "tensor_parallel_size": (1, 1 << 16),
    "vocab_size": (1, 1 << 32),
    "dummy_requests": (1, (1 << 31) - 1),
    "tried_to_allocate_gib": (0.0, _GIB_MAX),
    "total_capacity_gib": (0.0, _GIB_MAX),
    "free_gib": (0.0, _GIB_MAX),
    "process_in_use_gib": (0.0, _GIB_MAX),
    "gpu_index": (0, (1 << 16) - 1),
    "kv_cache_tokens": (0, 1 << 48),
    "kv_cache_needed_gib": (0.0, _GIB_MAX),
    # What is left for the KV cache after profiling: negative is a shortfall.
    "available_kv_cache_gib": (-_GIB_MAX, _GIB_MAX),
    "estimated_max_model_len": (0, 1 << 48),
    "requested_gib": (0.0, _GIB_MAX),
    "mem_fraction_static": (0.0, 1.0),
    "max_batch_prefill_tokens": _TOKENS,
    "exit_code": (0, 255),
    "restart_count": (0, (1 << 31) - 1),
    "xid": (0, (1 << 16) - 1),
    "max_total_tokens": (1, 1 << 48),
    # SGLang's profiled token budget: negative when the weights leave no room.
    "profiled_max_total_tokens": (-(1 << 48), 1 << 48),
    "hung_task_seconds": (1, 1 << 31),
    "suggested_kv_cache_bytes": (1, 1 << 50),
    "facts_dropped": (0, (1 << 31) - 1),
}
_MAX_NUMBER_TEXT: Final = 40  # characters: longer is never a number in range (and costly)
# ASCII digits only (`\d` and int() also take '١٢٣'); no `_` separators, no nan/inf.
_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_FLOAT_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?")
_SIZE_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)")
# A size unit as printed → its power of 1024 (the decimal spellings are the binary sizes in
# every log read here: PyTorch, vLLM and NVML print "GB" for GiB).
SIZE_UNITS: Final = {
    "bytes": 0,
    "B": 0,
    "KiB": 1,
    "MiB": 2,
    "GiB": 3,
    "TiB": 4,
    "KB": 1,
    "MB": 2,
    "GB": 3,
    "TB": 4,
}


class _Dropped:
    """A number stated outside its domain (not the same as not stated: it is counted)."""

    def __repr__(self) -> str:
        return "DROPPED"


DROPPED: Final = _Dropped()


def in_domain(key: str, value: Any) -> bool:
    """Is `value` a number the fact `key` can be (its type, finite, inside its domain)?"""
    low, high = NUMBER_DOMAINS[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if FACT_TYPES[key] is int and not isinstance(value, int):
        return False
    return math.isfinite(value) and low <= value <= high


def gib(text: str) -> float | None:
    """``782.00 MiB`` → 0.763671875; a bare number is taken as GiB. None unless it is a
    finite size in ASCII digits (the caller checks the range)."""
    parts = text.strip().split()
    if not parts or len(parts[0]) > _MAX_NUMBER_TEXT:
        return None
    digits = parts[0].replace(",", "")
    if not _SIZE_TEXT.fullmatch(digits):
        return None
    power = SIZE_UNITS.get(parts[1], 3) if len(parts) > 1 else 3
    value = float(Decimal(digits) * Decimal(1024) ** (power - 3))
    return value if math.isfinite(value) else None


def _number(key: str, raw: str) -> Any:
    """The number `raw` states, range-checked: DROPPED when it is not one in the domain."""
    if len(raw) > _MAX_NUMBER_TEXT:
        return DROPPED
    if key.endswith("_gib"):
        value: Any = gib(raw)
    elif FACT_TYPES[key] is int:
        digits = raw.replace(",", "")
        value = int(digits) if _INT_TEXT.fullmatch(digits) else None
    else:
        value = float(raw) if _FLOAT_TEXT.fullmatch(raw) else None
    return value if value is not None and in_domain(key, value) else DROPPED


def read_value(key: str, raw: str) -> Any:
    """A stated value as the fact's type: None when nothing is stated (``None``, ``auto``),
    DROPPED when a number is stated that is not one the fact can be."""
    kind = FACT_TYPES[key]
    raw = raw.strip().strip("'\"")
    if raw in ("", "None", "null"):
        return None
    if key in NUMBER_DOMAINS:
        return _number(key, raw)
    if kind is bool:
        return raw.lower() in ("1", "true", "yes")
    if key in ("dtype", "quantization"):
        raw = raw.removeprefix("torch.")
        return None if raw == "auto" else raw
    return raw


def convert(key: str, raw: str) -> Any:
    """A stated value as the fact's type; None when it does not parse or is out of range."""
    value = read_value(key, raw)
    return None if value is DROPPED else value
