"""The stand-in server behind a command shaped like vLLM's own: ``vllm serve MODEL [flags]``, so
that a unit file for it reads like a real vLLM unit.

    ExecStart=/opt/sim/vllm serve ${MODEL} --served-model-name "minimax m25" -tp 4 ...

The model is the positional argument after ``serve`` (``--model`` is still accepted). Every vLLM
flag is accepted; the ones the simulation models (``advisor.sim.server.MODELLED``) shape the run,
the others are only printed, all of them in vLLM's ``non-default args: {...}`` line as vLLM
prints them: argparse dests (underscores) and the parsed values — lists for ``nargs="+"``
options (``--served-model-name``, ``--api-key``), dicts for JSON options
(``--speculative-config``), nothing redacted. A flag the table below does not know is taken as a
switch when no value follows it, else its value as an int, a float or a string.

The simulation's own settings come from the environment, so that the command line stays vLLM's:

    ADVISOR_SIM_CLAIMS         folder of GPU memory claims (the simulated driver's)
    ADVISOR_SIM_GPUS           GPU indices the server may use, "0,1,2,3" (default 0..TP-1)
    ADVISOR_SIM_GPU_GIB        memory of each GPU (default 96)
    ADVISOR_SIM_SPEED          divide start-up durations by this (default 1)
    ADVISOR_SIM_WEDGE_ON_STOP  1: after SIGTERM, hang until SIGKILL
    ADVISOR_SIM_VOCAB_SIZE     override the model card's vocabulary
    ADVISOR_SIM_WEIGHTS_GIB    override the model card's weights (all ranks)
    ADVISOR_SIM_ARGV_LOG       append {"pid", "argv", "env"} as a JSON line at every start
    ADVISOR_SIM_ARGV_ENV       names of the variables that line records, comma-separated

``write_vllm_script`` writes the ``vllm`` executable itself. Exit statuses are the server's: 0
after SIGTERM, 1 when start-up fails, 2 for bad flags or settings.

Stdlib only (it is the server process).
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final, Literal

from advisor.sim.server import serve
from advisor.sim.server_config import SimSettings, make_config
from advisor.sim.vllm_text import VERSION

Kind = Literal["str", "int", "float", "bool", "json", "list"]
USAGE: Final = "usage: vllm serve [model_tag] [options]"
TRUE: Final = frozenset({"1", "true", "yes", "on"})

# vLLM 0.15's serve options whose type the simulation knows, in the order ``non-default args``
# prints them (the parser's: frontend, then engine options by config group; the options the
# simulation models keep the order of the seed deployment's journal).
OPTIONS: Final[dict[str, Kind]] = {
    # frontend
    "host": "str",
    "uds": "str",
    "port": "int",
    "uvicorn_log_level": "str",
    "disable_uvicorn_access_log": "bool",
    "allow_credentials": "bool",
    "allowed_origins": "json",
    "allowed_methods": "json",
    "allowed_headers": "json",
    "api_key": "list",
    "lora_modules": "list",
    "chat_template": "str",
    "chat_template_content_format": "str",
    "trust_request_chat_template": "bool",
    "response_role": "str",
    "ssl_keyfile": "str",
    "ssl_certfile": "str",
    "ssl_ca_certs": "str",
    "enable_ssl_refresh": "bool",
    "ssl_cert_reqs": "int",
    "root_path": "str",
    "middleware": "list",
    "return_tokens_as_token_ids": "bool",
    "disable_frontend_multiprocessing": "bool",
    "enable_request_id_headers": "bool",
    "enable_auto_tool_choice": "bool",
    "exclude_tools_when_tool_choice_none": "bool",
    "tool_call_parser": "str",
    "tool_parser_plugin": "str",
    "tool_server": "str",
    "log_config_file": "str",
    "max_log_len": "int",
    "disable_fastapi_docs": "bool",
    "enable_prompt_tokens_details": "bool",
    "enable_server_load_tracking": "bool",
    "enable_force_include_usage": "bool",
    "enable_tokenizer_info_endpoint": "bool",
    "enable_log_outputs": "bool",
    "log_error_stack": "bool",
    # model
    "model": "str",
    "runner": "str",
    "convert": "str",
    "tokenizer": "str",
    "tokenizer_mode": "str",
    "trust_remote_code": "bool",
    "dtype": "str",
    "seed": "int",
    "hf_config_path": "str",
    "allowed_local_media_path": "str",
    "revision": "str",
    "code_revision": "str",
    "tokenizer_revision": "str",
    "max_model_len": "int",
    "quantization": "str",
    "max_logprobs": "int",
    "logprobs_mode": "str",
    "disable_sliding_window": "bool",
    "disable_cascade_attn": "bool",
    "skip_tokenizer_init": "bool",
    "enable_prompt_embeds": "bool",
    "served_model_name": "list",
    "config_format": "str",
    "hf_token": "str",
    "hf_overrides": "json",
    "pooler_config": "json",
    "generation_config": "str",
    "override_generation_config": "json",
    "enable_sleep_mode": "bool",
    "model_impl": "str",
    "logits_processors": "list",
    # load, attention, structured outputs
    "load_format": "str",
    "download_dir": "str",
    "safetensors_load_strategy": "str",
    "model_loader_extra_config": "json",
    "ignore_patterns": "list",
    "use_tqdm_on_load": "bool",
    "attention_backend": "str",
    "reasoning_parser": "str",
    # parallel
    "distributed_executor_backend": "str",
    "pipeline_parallel_size": "int",
    "master_addr": "str",
    "master_port": "int",
    "nnodes": "int",
    "node_rank": "int",
    "tensor_parallel_size": "int",
    "decode_context_parallel_size": "int",
    "data_parallel_size": "int",
    "data_parallel_rank": "int",
    "data_parallel_size_local": "int",
    "data_parallel_address": "str",
    "data_parallel_rpc_port": "int",
    "data_parallel_backend": "str",
    "all2all_backend": "str",
    "enable_dbo": "bool",
    "enable_eplb": "bool",
    "eplb_config": "json",
    "max_parallel_loading_workers": "int",
    "disable_custom_all_reduce": "bool",
    "worker_cls": "str",
    "worker_extension_cls": "str",
    # cache
    "block_size": "int",
    "gpu_memory_utilization": "float",
    "kv_cache_memory_bytes": "int",
    "swap_space": "float",
    "kv_cache_dtype": "str",
    "num_gpu_blocks_override": "int",
    "enable_prefix_caching": "bool",
    "prefix_caching_hash_algo": "str",
    "cpu_offload_gb": "float",
    "calculate_kv_scales": "bool",
    "mamba_cache_dtype": "str",
    # multimodal, LoRA, observability
    "limit_mm_per_prompt": "json",
    "media_io_kwargs": "json",
    "mm_processor_kwargs": "json",
    "mm_processor_cache_gb": "float",
    "enable_lora": "bool",
    "max_loras": "int",
    "max_lora_rank": "int",
    "max_cpu_loras": "int",
    "otlp_traces_endpoint": "str",
    "collect_detailed_traces": "list",
    # scheduler
    "max_num_seqs": "int",
    "max_num_batched_tokens": "int",
    "max_num_partial_prefills": "int",
    "long_prefill_token_threshold": "int",
    "scheduling_policy": "str",
    "enable_chunked_prefill": "bool",
    "async_scheduling": "bool",
    "enable_expert_parallel": "bool",
    "enforce_eager": "bool",
    # whole-engine configs
    "speculative_config": "json",
    "kv_transfer_config": "json",
    "kv_events_config": "json",
    "compilation_config": "json",
    "additional_config": "json",
    "structured_outputs_config": "json",
    "disable_log_stats": "bool",
    "enable_log_requests": "bool",
}
ALIASES: Final = {
    "-tp": "tensor_parallel_size",
    "-pp": "pipeline_parallel_size",
    "-dp": "data_parallel_size",
    "-q": "quantization",
}
_NUMBER = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_INT = re.compile(r"-?\d+")


def _is_option(token: str) -> bool:
    return token.startswith("-") and len(token) > 1 and not _NUMBER.fullmatch(token)


def _convert(flag: str, kind: Kind, raw: str) -> object:
    try:
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
        if kind == "json":
            return json.loads(raw)
    except ValueError:
        raise ValueError(f"argument {flag}: invalid {kind} value: {raw!r}") from None
    return raw


def _guess(raw: str) -> object:
    if _INT.fullmatch(raw):
        return int(raw)
    if _NUMBER.fullmatch(raw):
        return float(raw)
    return raw


def parse_serve(argv: Sequence[str]) -> dict[str, object]:
    """The arguments after ``serve`` → vLLM's non-default args (dest → value, in the order
    vLLM prints them). ValueError, worded as argparse words it, for what vLLM would refuse."""
    tokens = list(argv)
    known: dict[str, object] = {}
    unknown: dict[str, object] = {}
    positional: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if not _is_option(token):
            positional.append(token)
            continue
        if token == "--":
            positional.extend(tokens[i:])
            break
        flag, eq, inline = token.partition("=")
        dest = ALIASES.get(flag) or flag.lstrip("-").replace("-", "_")
        if not flag.startswith("--") and flag not in ALIASES:
            raise ValueError(f"unrecognized arguments: {token}")
        kind = OPTIONS.get(dest)
        negated = dest.startswith("no_") and OPTIONS.get(dest[3:]) == "bool"
        if kind == "bool" or negated:
            if eq:
                raise ValueError(f"argument {flag}: ignored explicit argument {inline!r}")
            known[dest[3:] if negated else dest] = not negated
            continue
        values: list[str] = [inline] if eq else []
        if not eq:
            while i < len(tokens) and not _is_option(tokens[i]) and (not values or kind == "list"):
                values.append(tokens[i])
                i += 1
        if kind is None:
            unknown.pop(dest, None)  # a repeated flag: the last one wins, in its place
            unknown[dest] = _guess(values[0]) if values else True
        elif not values:
            raise ValueError(
                f"argument {flag}: expected {'at least ' if kind == 'list' else ''}one argument"
            )
        else:
            known[dest] = list(values) if kind == "list" else _convert(flag, kind, values[0])
    if len(positional) > 1:
        raise ValueError(f"unrecognized arguments: {' '.join(positional[1:])}")
    given: dict[str, object] = {}
    if positional:
        given["model_tag"] = positional[0]
        known["model"] = positional[0]  # vLLM: the positional model overrides --model
    if "model" not in known:
        raise ValueError("the following arguments are required: model_tag")
    given.update((dest, known[dest]) for dest in OPTIONS if dest in known)
    given.update(unknown)
    return given


def _env(env: Mapping[str, str], name: str, kind: type[int] | type[float]) -> int | float | None:
    raw = env.get(name, "").strip()
    if not raw:
        return None
    try:
        return kind(raw)
    except ValueError:
        raise ValueError(f"{name}: invalid {kind.__name__} value: {raw!r}") from None


def sim_settings(env: Mapping[str, str]) -> SimSettings:
    """The simulation's settings from the ``ADVISOR_SIM_*`` variables (ValueError if bad)."""
    vocab = _env(env, "ADVISOR_SIM_VOCAB_SIZE", int)
    weights = _env(env, "ADVISOR_SIM_WEIGHTS_GIB", float)
    gpu_gib = _env(env, "ADVISOR_SIM_GPU_GIB", float)
    speed = _env(env, "ADVISOR_SIM_SPEED", float)
    claims = env.get("ADVISOR_SIM_CLAIMS", "").strip()
    return SimSettings(
        vocab_size=None if vocab is None else int(vocab),
        weights_gib=weights,
        gpu_gib=96.0 if gpu_gib is None else gpu_gib,
        claims=Path(claims) if claims else None,
        gpus=env.get("ADVISOR_SIM_GPUS", "").strip() or None,
        speed=1.0 if speed is None else speed,
        wedge_on_stop=env.get("ADVISOR_SIM_WEDGE_ON_STOP", "").strip().lower() in TRUE,
    )


def log_argv(env: Mapping[str, str]) -> None:
    """With ``ADVISOR_SIM_ARGV_LOG``: append this process's PID, argv and the variables named
    in ``ADVISOR_SIM_ARGV_ENV`` (null when unset) as one JSON line."""
    path = env.get("ADVISOR_SIM_ARGV_LOG", "").strip()
    if not path:
        return
    names = [n.strip() for n in env.get("ADVISOR_SIM_ARGV_ENV", "").split(",") if n.strip()]
    line = json.dumps(
        {"pid": os.getpid(), "argv": sys.argv, "env": {name: env.get(name) for name in names}}
    )
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    """``vllm serve MODEL [flags]`` (``vllm --version`` too); the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    env = os.environ
    log_argv(env)
    for stream in (sys.stdout, sys.stderr):  # every line reaches the journal at once
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(line_buffering=True)
    if args[:1] in (["--version"], ["-v"]):
        print(VERSION)
        return 0
    try:
        if args[:1] != ["serve"]:
            raise ValueError("only the serve subcommand is simulated")
        cfg = make_config(parse_serve(args[1:]), sim_settings(env))
    except ValueError as e:
        print(f"{USAGE}\nvllm serve: error: {e}", file=sys.stderr)
        return 2
    return serve(cfg)


def repository_root() -> Path:
    """The checkout this module belongs to (the folder holding the ``advisor`` package)."""
    return Path(__file__).resolve().parents[2]


def write_vllm_script(folder: Path) -> Path:
    """Write ``folder/vllm``, executable, that runs ``main()`` with this interpreter and this
    checkout (fixed now, when written); its path. As for a pip-installed vLLM, the process's
    command line then starts with the interpreter: ``python FOLDER/vllm serve ...``."""
    interpreter = sys.executable
    if not interpreter or any(c.isspace() for c in interpreter) or len(interpreter) > 250:
        raise ValueError(f"{interpreter!r} cannot be a script's #! line")
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "vllm"
    script.write_text(
        f"#!{interpreter}\n"
        '"""vLLM\'s `vllm` command, simulated (advisor.sim.vllm_cli)."""\n'
        "import sys\n\n"
        f"sys.path.insert(0, {str(repository_root())!r})\n\n"
        "from advisor.sim.vllm_cli import main\n\n"
        "sys.exit(main())\n",
        encoding="utf-8",
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return script


if __name__ == "__main__":
    sys.exit(main())
