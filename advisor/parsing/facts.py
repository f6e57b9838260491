"""Typed facts from one line: config, memory numbers, phase reached, lifecycle step.

`read_facts(body, engine)` looks at a line without its wrappers (see `lines.split_line`)
and says what the line states, exactly as stated: sizes are converted to GiB exactly
(``782.00 MiB`` is 782/1024 GiB), thousands separators removed, nothing estimated.
Cheap substring checks come before any regular expression, because most lines of a
serving log (requests, throughput) state nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from advisor.parsing.values import (
    CONFIG_FACTS,
    DROPPED,
    FACT_KEYS,
    FACT_TYPES,
    NUMBER_DOMAINS,
    convert,
    gib,
    in_domain,
    read_value,
)

# The names of the facts and their values' reading live in `values`; importers of this
# module find them here too.
__all__ = [
    "CONFIG_FACTS",
    "FACT_KEYS",
    "FACT_TYPES",
    "NUMBER_DOMAINS",
    "PHASES",
    "PHASE_ORDER",
    "READY_CUES",
    "LineFacts",
    "convert",
    "engine_hint",
    "gib",
    "in_domain",
    "merge_config",
    "read_facts",
]

PHASES: Final = (
    "starting",
    "weights_loading",
    "memory_profiling",
    "kv_cache_allocation",
    "cuda_graph_capture",
    "sampler_warmup",
    "ready",
    "shutdown",
)
PHASE_ORDER: Final = {name: i for i, name in enumerate(PHASES)}


@dataclass(slots=True)
class LineFacts:
    """What one line states. `event` is a lifecycle step, `phase` a startup phase reached."""

    facts: dict[str, Any] = field(default_factory=dict)
    phase: str | None = None
    event: str | None = None
    # The engine's own config line states the resolved values (dtype, quantization after
    # auto-detection); they replace what the arguments said.
    resolved: bool = False
    # A per-request or throughput line: what it says (a prompt!) is not evidence.
    noise: bool = False
    # Numbers the line stated outside their domain (see NUMBER_DOMAINS): dropped, counted.
    dropped: int = 0


_SIZE = r"[\d.,]+ (?:bytes|KiB|MiB|GiB|TiB)"

# ------------------------------------------------------------------ configuration
# (fact, aliases) as they appear in argument reprs, config lines and server args.
_CONFIG_KEYS: Final = (
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
_ALIAS: Final = {alias: key for key, aliases in _CONFIG_KEYS for alias in aliases}
_KEYVAL = re.compile(
    r"""(?<![\w-])['"]?("""
    + "|".join(sorted(_ALIAS, key=len, reverse=True))
    + r""")['"]?\s*[:=]\s*(?:Some\()?('[^']*'|"[^"]*"|[\w.\-/:+]+)"""
)
_FLAG_ALIAS: Final = {
    "--max-num-seqs": "max_num_seqs",
    "--max-model-len": "max_model_len",
    "--gpu-memory-utilization": "gpu_memory_utilization",
    "--tensor-parallel-size": "tensor_parallel_size",
    "-tp": "tensor_parallel_size",
    "--max-num-batched-tokens": "max_num_batched_tokens",
    "--dtype": "dtype",
    "--quantization": "quantization",
    "-q": "quantization",
    "--model": "model",
    "--mem-fraction-static": "mem_fraction_static",
    "--tp-size": "tensor_parallel_size",
    "--tp": "tensor_parallel_size",
    "--context-length": "max_model_len",
    "--model-path": "model",
    "--model-id": "model",
    "--num-shard": "tensor_parallel_size",
    "--max-batch-prefill-tokens": "max_batch_prefill_tokens",
    "--max-total-tokens": "max_model_len",
    "--quantize": "quantization",
}
_FLAG = re.compile(
    r"(?<!\S)("
    + "|".join(re.escape(f) for f in sorted(_FLAG_ALIAS, key=len, reverse=True))
    + r")(?:=|\s+)([^\s'\"]+)"
)
_SERVE = re.compile(r"\bvllm(?:\.entrypoints\.\S+)? serve\s+([^\s-][^\s]*)")
_CONFIG_CUES: Final = (
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


def _state(result: LineFacts, key: str, raw: str) -> None:
    """Keep what `raw` states as fact `key` unless the line stated it already; count a
    number outside its domain."""
    if key in result.facts:
        return
    value = read_value(key, raw)
    if value is DROPPED:
        result.dropped += 1
    elif value is not None:
        result.facts[key] = value


def _config(body: str, result: LineFacts) -> None:
    out = result.facts
    if any(cue in body for cue in _CONFIG_CUES):
        for alias, raw in _KEYVAL.findall(body):
            _state(result, _ALIAS[alias], raw)
    if " --" in body or " -tp" in body or " -q " in body:
        for flag, raw in _FLAG.findall(body):
            _state(result, _FLAG_ALIAS[flag], raw)
        m = _SERVE.search(body)
        if m and "model" not in out:
            out["model"] = m.group(1)


# ------------------------------------------------------------------ numbers in messages
@dataclass(frozen=True, slots=True)
class _Pattern:
    cue: str  # a substring that must be in the line first
    regex: re.Pattern[str]  # named groups are fact keys


def _p(cue: str, regex: str) -> _Pattern:
    return _Pattern(cue, re.compile(regex))


_NUMBERS: Final = (
    _p("Tried to allocate", r"Tried to allocate (?P<tried_to_allocate_gib>" + _SIZE + r")"),
    _p(
        "total capac",
        r"GPU (?P<gpu_index>\d+) has a total capac(?:i)?ty of "
        r"(?P<total_capacity_gib>" + _SIZE + r") of which (?P<free_gib>" + _SIZE + r") is free",
    ),
    _p(
        "total capacity;",
        r"\(GPU (?P<gpu_index>\d+); (?P<total_capacity_gib>"
        + _SIZE
        + r") total capacity;.*?; (?P<free_gib>"
        + _SIZE
        + r") free",
    ),
    _p(
        "this process has", r"this process has (?P<process_in_use_gib>" + _SIZE + r") memory in use"
    ),
    _p("dummy requests", r"with (?P<dummy_requests>\d+) dummy requests"),
    _p("KV cache size", r"KV cache size: (?P<kv_cache_tokens>[\d,]+) tokens"),
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
        r"Available KV cache memory: (?P<available_kv_cache_gib>"
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


def _numbers(body: str, result: LineFacts) -> None:
    for pattern in _NUMBERS:
        if pattern.cue in body:
            m = pattern.regex.search(body)
            if m:
                for key, raw in m.groupdict().items():
                    if raw is not None:
                        _state(result, key, raw)


# ------------------------------------------------------------------ systemd lifecycle
_EXIT = re.compile(r"(?:Main|Control) process exited, code=(\w+), status=(\d+)/([\w/-]+)")
_RESULT = re.compile(r"Failed with result '([\w-]+)'")
_RESTART = re.compile(r"restart counter is at (\d+)")
_SIGNALS: Final = {
    "1": "HUP",
    "2": "INT",
    "6": "ABRT",
    "7": "BUS",
    "9": "KILL",
    "11": "SEGV",
    "15": "TERM",
}


def _systemd(body: str, result: LineFacts) -> str | None:
    """The lifecycle step a PID-1 message announces (and its numbers)."""
    out = result.facts
    if body.startswith(("Starting ", "Started ")) and not body.startswith("Started server"):
        return "start" if body.startswith("Starting") else "started"
    if body.startswith("Stopping "):
        return "stop_requested"
    if body.startswith("Stopped ") or body.startswith("Timed out stopping"):
        if body.startswith("Timed out"):
            out["stop_timed_out"] = True
        return "stopped"
    if "Failed to start" in body:
        return "start_failed"
    if (
        "timed out. Killing" in body
        or "timed out. Skipping SIGKILL" in body
        or "timed out. Aborting" in body
    ):
        if "stop-sigterm" in body or "final-sigterm" in body or "stop-post" in body:
            out["stop_timed_out"] = True
            return "stop_timeout"
        return "start_timeout"
    if "with signal SIGKILL" in body:
        return "sigkill"
    if "Processes still around after" in body:
        return "still_around"
    m = _EXIT.search(body)
    if m:
        code, status, name = m.groups()
        if "Control process" in body:
            return "control_exit"
        if code == "exited":
            _state(result, "exit_code", status)
        else:
            out["exit_signal"] = name if not name.isdigit() else _SIGNALS.get(status, status)
        return "exit"
    m = _RESULT.search(body)
    if m:
        out["unit_result"] = m.group(1)
        return "failed"
    if body.endswith(": Deactivated successfully.") or body.endswith(": Succeeded."):
        return "deactivated"
    m = _RESTART.search(body)
    if m:
        _state(result, "restart_count", m.group(1))
        return "restart_scheduled"
    if "Start request repeated too quickly" in body:
        return "start_limit"
    if "Found left-over process" in body:
        return "leftover"
    if "killed by the OOM killer" in body or "systemd-oomd killed" in body:
        return "oom_kill"
    return None


# ------------------------------------------------------------------ phases and readiness
# (phase, cues): the first cue found in a line says the run has reached that phase.
# What a server prints once it is ready to serve (vLLM and SGLang through uvicorn, SGLang's own
# line, TGI's router): readiness of a run here, and of a restart in the executor.
READY_CUES: Final = (
    "Application startup complete",
    "The server is fired up and ready to roll",
    "Uvicorn running on",
    "text_generation_router: Connected",
)
_PHASE_CUES: Final = (
    (
        "weights_loading",
        (
            "Starting to load model",
            "Loading safetensors checkpoint shards",
            "Loading pt checkpoint shards",
            "checkpoint shards",
            "Load weight begin",
            "Loading weights",
            "Loading model weights",
            "Init torch distributed",
            "Starting shard",
            "Downloading model",
        ),
    ),
    (
        "memory_profiling",
        (
            "Model loading took",
            "Loading model weights took",
            "Load weight end",
            "Memory profiling",
            "Loading weights took",
        ),
    ),
    (
        "kv_cache_allocation",
        (
            "Available KV cache memory",
            "KV cache size:",
            "# GPU blocks",
            "# cuda blocks",
            "Memory pool end",
            "max_total_num_tokens=",
            "KV cache is needed",
            "Maximum concurrency for",
        ),
    ),
    (
        "cuda_graph_capture",
        (
            "Capturing CUDA graph",
            "Capturing cudagraphs",
            "Capture cuda graph",
            "Capturing the model for CUDA graphs",
            "Capture CUDA graph",
        ),
    ),
    (
        "sampler_warmup",
        (
            "Graph capturing finished",
            "Capture cuda graph end",
            "warming up sampler",
            "Cudagraph is disabled",
        ),
    ),
    (
        "ready",
        (
            *READY_CUES,
            # Only a serving engine dies this way (a starting one "failed to start").
            "EngineCore encountered a fatal error",
            "died unexpectedly",
        ),
    ),
    (
        "shutdown",
        (
            "Shutting down FastAPI HTTP server",
            "[shutdown] API server",
            "Application shutdown complete",
            "Waiting for application shutdown",
            "Engine is gracefully shutting down",
            "Gracefully stopping",
            "Finished server process",
            "Received sigterm",
            "Shutting down shards",
            "Terminating shard",
            "Received SIGTERM",
        ),
    ),
)
_READY_ENGINE_LINE: Final = ("Connected",)  # TGI router's readiness line, whole body


def _phase(body: str, engine: str | None) -> str | None:
    for phase, cues in _PHASE_CUES:
        for cue in cues:
            if cue in body:
                return phase
    if engine == "tgi" and body in _READY_ENGINE_LINE:
        return "ready"
    return None


_ENGINE_CUES: Final = (
    ("vllm", ("vLLM", "vllm")),
    ("sglang", ("sglang", "SGLang")),
    ("tgi", ("text_generation", "text-generation")),
)


def engine_hint(body: str) -> str | None:
    for engine, cues in _ENGINE_CUES:
        if any(cue in body for cue in cues):
            return engine
    return None


Reader = Callable[[str, LineFacts], None]


_ACTIVE = re.compile(r"^Active: (\w+) \(([\w-]+)\)(?: \(Result: ([\w-]+)\))?")
_MAIN_PID = re.compile(r"^Main PID: \d+ \(code=(\w+), status=(\d+)/([\w/-]+)\)")


def _status_header(body: str, line: LineFacts) -> str | None:
    """`systemctl status` header lines: the unit's state and its main process's end."""
    out = line.facts
    m = _ACTIVE.match(body)
    if m:
        state, sub, result = m.groups()
        if result:
            out["unit_result"] = result
        if state == "deactivating" and sub in ("stop-sigterm", "stop", "final-sigterm"):
            return "stop_pending"
        if state == "deactivating" and sub in ("stop-sigkill", "final-sigkill"):
            out["stop_timed_out"] = True
            return "stop_timeout"
        if state == "failed" or (state == "activating" and sub == "auto-restart"):
            return "failed"
        return None
    m = _MAIN_PID.match(body)
    if m:
        code, status, name = m.groups()
        if code == "exited":
            _state(line, "exit_code", status)
        else:
            out["exit_signal"] = _SIGNALS.get(status, name)
        return "exit"
    return None


# The bulk of a serving log: per-request lines and throughput stats, which state nothing.
_REQUEST_PREFIXES: Final = (
    "Received request ",
    "Added request ",
    "Finished request ",
    "Aborted request ",
    "Engine 000: Avg prompt throughput",
    "Avg prompt throughput",
    "Prefill batch.",
    "Decode batch.",
    "Receive: obj=",
)  # SGLang's, with the request's prompt
_ACCESS_LOG = re.compile(r'^[\d.:\[\]a-f]+:\d+ - "[A-Z]+ ')


def read_facts(body: str, engine: str | None) -> LineFacts:
    """Everything one line (without its wrappers) states."""
    if (
        body.startswith(_REQUEST_PREFIXES)
        or _ACCESS_LOG.match(body)
        or "{parameters=GenerateParameters" in body
    ):  # TGI's per-request span
        return LineFacts(noise=True)
    result = LineFacts()
    if engine is None and body.lstrip().startswith(("Active: ", "Main PID: ")):
        result.event = _status_header(body.lstrip(), result)
        return result
    if engine == "systemd":
        result.event = _systemd(body, result)
        if result.event is None:
            _config(body, result)  # `systemctl status` shows the command line
        return result
    if engine == "kernel":
        _numbers(body, result)
        return result
    _numbers(body, result)
    _config(body, result)
    result.phase = _phase(body, engine)
    result.resolved = "with config:" in body
    return result


def merge_config(config: dict[str, Any], line: LineFacts) -> None:
    """Add a line's config facts to a run's: first stated wins, resolved values replace."""
    for key, value in line.facts.items():
        if key in CONFIG_FACTS:
            if line.resolved:
                config[key] = value
            else:
                config.setdefault(key, value)
