"""The stand-in text-generation-inference (TGI v3.3.7): ``text-generation-launcher [flags]``,
launcher, shards and router in one process, printing what the launcher prints (command written
by ``advisor.sim.standin.write_standins``; ``ADVISOR_SIM_*`` as there).

Flags: the launcher's clap ``Args`` (launcher/src/main.rs; ARGS below), each also read from its
variable (``MODEL_ID``, ``MAX_BATCH_PREFILL_TOKENS`` …) when the command line does not set it;
unknown flags are ignored (clap would refuse them).

Lines, v3.3.7, in tracing-subscriber 0.3.19's formats and colours (off with NO_COLOR for the
launcher, LOG_COLORIZE=1 for the router). The launcher's ``compact`` format: ``<UTC time>  INFO
text_generation_launcher: Args {`` and the ``{:#?}`` pretty ``Args`` (main.rs:2079), then its
start-up lines (main.rs) and the shards' loguru records it relays (text_generation_server/
models/globals.py:16, 21, server.py:309, models/flash_causal_lm.py:1565, 1652). The router's
``full`` format with file and line (router/src/logging.rs; ROUTER below), readiness
``text_generation_router::server: router/src/server.rs:2302: Connected``. Warm-up failure: the
shard's ``Method Warmup encountered an error.`` (interceptor.py:24) with the traceback ending
``RuntimeError: Not enough memory to handle N prefill tokens. You need to decrease
`--max-batch-prefill-tokens``` (flash_causal_lm.py:1550, from torch's OutOfMemoryError), the
router's ``ERROR warmup{…}:warmup: text_generation_router_v3::client:
backends/v3/src/client/mod.rs:45: Server error: …``, its exit ``Error:
Backend(Warmup(Generation("…")))``, the launcher's ``Webserver Crashed``, the shards'
termination and ``Error: WebserverFailed`` (exit 1). SIGTERM: the webserver's termination
(server.rs:2399 ``signal received, starting graceful shutdown``), then the shards'; exit 0.

Memory, per shard (num_shard = --num-shard, else CUDA_VISIBLE_DEVICES' count, else 1): the
budget is cuda_memory_fraction × ADVISOR_SIM_GPU_GIB (torch's per-process cap; never more than
is free: others' claims count), less the CUDA context (0.5 GiB) and weights / shards (the card of
advisor.sim.models, or ADVISOR_SIM_WEIGHTS_GIB). The warm-up batch of max_batch_prefill_tokens P
needs P × (KV bytes per token + 256 KiB of activations) / shards and fails beyond the budget: 8B
with ADVISOR_SIM_WEIGHTS_GIB 90 (293 KiB KV per token) on 96 GiB has 5.5 GiB left, so 16384
fails and 8192 fits. The KV cache then takes 90 % (TGI_WIGGLE_ROOM) of what is left. Stdlib only.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Final

from advisor.sim import standin as si
from advisor.sim.models import GIB, MIB, card_for
from advisor.sim.vllm_text import OomFigures, torch_oom

__all__ = ["ARGS", "Tgi", "args_debug", "invalid", "main", "parse_args"]

# The launcher's Args in order: NAME:KIND[=DEFAULT]. KIND: S String, U integer, F f32, B bool,
# E enum, VS Vec<String>; O… an Option of it (OV: Option<Vec<usize>>). ``env`` has no variable.
ARGS: Final = """
model_id:S=bigscience/bloom-560m revision:OS validation_workers:U=2 sharded:OB num_shard:OU
quantize:OE speculate:OU dtype:OE kv_cache_dtype:OE trust_remote_code:B
max_concurrent_requests:U=128 max_best_of:U=2 max_stop_sequences:U=4 max_top_n_tokens:U=5
max_input_tokens:OU max_input_length:OU max_total_tokens:OU waiting_served_ratio:F=0.3
max_batch_prefill_tokens:OU max_batch_total_tokens:OU max_waiting_tokens:U=20 max_batch_size:OU
cuda_graphs:OV hostname:S=0.0.0.0 port:U=3000 prometheus_port:U=9000
shard_uds_path:S=/tmp/text-generation-server master_addr:S=localhost master_port:U=29500
huggingface_hub_cache:OS weights_cache_override:OS disable_custom_kernels:B
cuda_memory_fraction:F=1.0 rope_scaling:OE rope_factor:OF json_output:B otlp_endpoint:OS
otlp_service_name:S=text-generation-inference.router cors_allow_origin:VS api_key:OS
watermark_gamma:OF watermark_delta:OF ngrok:B ngrok_authtoken:OS ngrok_edge:OS
tokenizer_config_path:OS disable_grammar_support:B env:B max_client_batch_size:U=4 lora_adapters:OS
usage_stats:E=on payload_limit:U=2000000 enable_prefill_logprobs:B
graceful_termination_timeout:U=90
"""
KINDS: Final = dict(
    (name, kind.partition("=")[0]) for name, _, kind in (t.partition(":") for t in ARGS.split())
)
SHORTS: Final = {"-p": "port", "-e": "env", "-g": "graceful_termination_timeout"}
ENUMS: Final = {"bfloat16": "BFloat16", "fp8_e4m3fn": "Fp8e4m3fn", "fp8_e5m2": "Fp8e5m2"}
ACT_BYTES: Final = 256 * 1024  # activations of one prefill token (whole model)
WIGGLE: Final = 0.90  # TGI_WIGGLE_ROOM
SITE: Final = "/usr/src/.venv/lib/python3.11/site-packages/text_generation_server"
ROUTER: Final = {  # event → (target, file, line), backends/v3 and router/ of v3.3.7
    "warming": ("text_generation_router_v3", "backends/v3/src/lib.rs", 125),
    "total": ("text_generation_router_v3", "backends/v3/src/lib.rs", 137),
    "backend": ("text_generation_router_v3", "backends/v3/src/lib.rs", 166),
    "max_input": ("text_generation_router", "backends/v3/src/main.rs", 168),
    "max_total": ("text_generation_router", "backends/v3/src/main.rs", 174),
    "client": ("text_generation_router_v3::client", "backends/v3/src/client/mod.rs", 45),
    "connected": ("text_generation_router::server", "router/src/server.rs", 2302),
    "signal": ("text_generation_router::server", "router/src/server.rs", 2399),
}
FRAMES: Final = si.frames(
    SITE,
    """
interceptor.py:24:intercept:return await response
server.py:142:Warmup:self.model.warmup(batch, max_input_tokens, max_total_tokens)
models/flash_causal_lm.py:1550:warmup:raise RuntimeError(
models/flash_causal_lm.py:1548:warmup:_, _batch, _ = self.generate_token(batch)
""",
)


CONVERT: Final[dict[str, Callable[[str], object]]] = {
    "U": int,
    "F": float,
    "B": lambda raw: raw.strip().lower() in si.TRUE,
    "V": lambda raw: [int(v) for v in raw.split(",")],
    "VS": lambda raw: [raw],
}


def _value(name: str, flag: str, raw: str) -> object:
    try:
        return CONVERT.get(KINDS[name].lstrip("O"), str)(raw)
    except ValueError:
        raise ValueError(f"invalid value '{raw}' for '{flag}'") from None


DEFAULTS: Final = {
    name: _value(name, name, raw) if raw else {"B": False, "VS": []}.get(KINDS[name])
    for name, raw in ((t.partition(":")[0], t.partition("=")[2]) for t in ARGS.split())
}


def parse_args(argv: Sequence[str], env: Mapping[str, str]) -> dict[str, object]:
    """Command line, then the variables for what it does not set (clap's order: a flag wins
    over its variable), then the defaults. ValueError, worded as clap words it."""
    switches = {f"--{n.replace('_', '-')}" for n, k in KINDS.items() if k == "B"} | {"-e"}
    pairs, positional = si.flag_pairs(argv, switches)
    if positional:
        raise ValueError(f"unexpected argument '{positional[0]}' found")
    given: dict[str, object] = {}
    for flag, values in pairs:
        name = SHORTS.get(flag) or flag[2:].replace("-", "_")
        if name not in KINDS or not flag.startswith(("--", *SHORTS)):
            continue
        if KINDS[name] != "B" and not values:
            raise ValueError(f"a value is required for '{flag}' but none was supplied")
        value = True if KINDS[name] == "B" else _value(name, flag, values[0])
        if isinstance(before := given.get(name), list) and isinstance(value, list):
            value = [*before, *value]  # Vec<String>: one value per occurrence
        given[name] = value
    for name in KINDS:
        if name not in given and name != "env" and env.get(name.upper()):
            given[name] = _value(name, name.upper(), env[name.upper()])
    return {**DEFAULTS, **given}


def _debug(kind: str, value: object, pad: str) -> str:
    """Rust's ``{:#?}`` of one field value, continuation lines indented by ``pad``."""
    inner = pad + "    "
    if kind.startswith("O"):
        if value is None:
            return "None"
        return f"Some(\n{inner}{_debug(kind[1:], value, inner)},\n{pad})"
    if kind in ("V", "VS") and isinstance(value, list):
        if not value:
            return "[]"
        items = "".join(f"{inner}{_debug(kind[1:] or 'U', v, inner)},\n" for v in value)
        return f"[\n{items}{pad}]"
    if kind == "S":
        escaped = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'
    if kind == "E":
        text = str(value)
        return ENUMS.get(text) or "".join(p.capitalize() for p in text.split("-"))
    if kind == "B":
        return "true" if value else "false"
    return repr(value) if kind == "F" else str(value)


def _ansi(on: bool, code: str, text: str) -> str:
    """``text`` painted in an SGR style (nu_ansi_term), when colours are on."""
    return f"\x1b[{code}m{text}\x1b[0m" if on else text


def _head(on: bool, level: str) -> str:
    """Time and level, as tracing-subscriber starts every line."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    code = {"INFO": "32", "WARN": "33", "ERROR": "31"}[level]
    return f"{_ansi(on, '2', stamp)} {_ansi(on, code, level.rjust(5))} "


def _field(on: bool, field: str) -> str:
    """``name=value`` as tracing's default field formatter writes it."""
    name, _, value = field.partition("=")
    return f"{_ansi(on, '3', name)}{_ansi(on, '2', '=')}{value}"


def _some(value: object) -> str:
    return "None" if value is None else f"Some({value})"


def args_debug(args: Mapping[str, object]) -> str:
    """``{:#?}`` of the launcher's Args."""
    fields = "".join(f"    {n}: {_debug(KINDS[n], args[n], '    ')},\n" for n in KINDS)
    return f"Args {{\n{fields}}}"


class Tgi(si.Run):
    """One launcher run: download, shards, the router's warm-up, then serving until SIGTERM."""

    def __init__(self, args: dict[str, object], sim: si.Settings, env: Mapping[str, str]) -> None:
        visible = [d for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
        sharded, shards = args["sharded"], args["num_shard"]
        count = shards if isinstance(shards, int) else 1 if sharded is False else len(visible) or 1
        super().__init__(sim, sim.devices(count))
        self.args, self.shards = args, count
        self.color = not env.get("NO_COLOR")  # tracing-subscriber's default
        self.router_color = env.get("LOG_COLORIZE") != "1"  # router/src/logging.rs
        self.card = card_for(str(args["model_id"]), weights_gib=sim.weights_gib)
        self.weights = int(self.card.weights_gib * GIB / count)
        self.cell = max(1, math.ceil(self.card.kv_bytes_per_token / count))
        # shards started, router serving; ctrlc's handler is set before anything starts
        self.started, self.serving, self.graceful = 0, False, True

    # ------------------------------------------------------------------ tracing formats
    def log(self, text: str, level: str = "INFO", span: str = "", rank: int | None = None) -> None:
        """A launcher event (tracing's compact format), in ``span`` (``shard-manager`` carries
        ``rank``, shown after the message)."""
        on = self.color
        spans = f"{_ansi(on, '1', span)}: " if span else ""
        target = "".join(_ansi(on, "2", t) for t in ("text_generation_launcher", ":"))
        tail = f" {_ansi(on, '2', _field(on, f'rank={rank}'))}" if rank is not None else ""
        self.emit(f"{_head(on, level)}{spans}{target} {text}{tail}")

    def shard_log(self, text: str) -> None:
        """The same event of every shard's manager."""
        for rank in range(self.shards):
            self.log(text, span="shard-manager", rank=rank)

    def router(self, event: str, text: str, level: str = "INFO", span: str = "") -> None:
        """A router line (tracing's full format with file and line), as the launcher relays it."""
        on, (target, path, line) = self.router_color, ROUTER[event]
        where = "".join(_ansi(on, "2", t) for t in (target, ":")) + " "
        where += "".join(_ansi(on, "2", t) for t in (path, ":", f"{line}:")) + " "
        self.emit(f"{_head(on, level)}{span}{where}{text}")

    # ------------------------------------------------------------------ the run
    def run(self) -> int:
        a = self.args
        self.watch_signals()
        self.pause(0.3)
        self.log(args_debug(a))
        self.log("Using attention flashinfer - Prefix caching true")
        if self.shards > 1:
            self.log(f"Sharding model on {self.shards} processes")
        if a["max_batch_prefill_tokens"] is None:
            a["max_batch_prefill_tokens"] = 4096
            self.log("Default `max_batch_prefill_tokens` to 4096")
        if a["cuda_graphs"] is None:
            self.log("Using default cuda graphs [1, 2, 4, 8, 16, 32]")
        self.log(f"Starting check and download process for {a['model_id']}", span="download")
        self.pause(1.5)
        self.log("Files are already present on the host. Skipping download.")
        self.log(f"Successfully downloaded weights for {a['model_id']}", span="download")
        self.start_shards()
        return self.warm_up()

    def start_shards(self) -> None:
        self.shard_log("Starting shard")
        self.started = self.shards
        self.claim_all(si.CONTEXT_BYTES)
        self.pause(2.0)
        self.log("Using prefix caching = True")
        self.log("Using Attention = flashinfer")
        load_s = 6.0 + self.weights / GIB / 4
        for _ in range(10, int(load_s), 10):
            self.pause(10.0)
            self.shard_log("Waiting for shard to be ready...")
        self.pause(load_s % 10)
        self.claim_all(self.weights)
        for rank in range(self.shards):
            self.log(f"Server started at unix://{self.args['shard_uds_path']}-{rank}")
        took = f"{load_s + 2.0:.9f}".rstrip("0").rstrip(".")
        self.shard_log(f"Shard ready in {took}s")
        self.log("Starting Webserver")

    def warm_up(self) -> int:
        a, prefill = self.args, int(str(self.args["max_batch_prefill_tokens"]))
        self.pause(1.0)
        self.router("warming", "Warming up model")
        budget = int(float(str(a["cuda_memory_fraction"])) * self.total)
        room = min([min(self.free(g), budget - self.own[g]) for g in self.gpus])
        need = prefill * (self.cell + math.ceil(ACT_BYTES / self.shards))
        self.pause(2.0)
        if need > room:
            return self.fail_warm_up(prefill, need, room)
        blocks = int(room * WIGGLE) // self.cell
        self.claim_all(blocks * self.cell)
        self.log(f"KV-cache blocks: {blocks}, size: 1")
        graphs = a["cuda_graphs"] if isinstance(a["cuda_graphs"], list) else [1, 2, 4, 8, 16, 32]
        if graphs:
            self.log(f"Cuda Graphs are enabled for sizes {graphs}")
            self.pause(2.0)
        self.router("total", f"Setting max batch total tokens to {blocks}")
        self.router("backend", "Using backend V3")
        total = a["max_total_tokens"] or min(blocks, self.card.max_model_len)
        given_input = a["max_input_tokens"] or a["max_input_length"]
        if given_input is None:
            self.router("max_input", f"Maximum input tokens defaulted to {int(str(total)) - 1}")
        if a["max_total_tokens"] is None:
            self.router("max_total", f"Maximum total tokens defaulted to {total}")
        self.router("connected", "Connected")
        self.serving = True
        while True:
            self.pause(3600)

    def fail_warm_up(self, prefill: int, need: int, room: int) -> int:
        """The shards' OOM, the router's error and exit, the launcher's shutdown; 1."""
        message = (
            f"Not enough memory to handle {prefill} prefill tokens. "
            "You need to decrease `--max-batch-prefill-tokens`"
        )
        gpu = self.gpus[0]
        oom = torch_oom(
            OomFigures(0, max(MIB, need - room), self.total, max(0, room), self.own[gpu], (), 0)
        )
        trace = (
            f"Traceback (most recent call last):\n{FRAMES[3]}{oom}\n\n"
            "The above exception was the direct cause of the following exception:\n\n"
            f"Traceback (most recent call last):\n{''.join(FRAMES[:3])}RuntimeError: {message}"
        )
        for _ in range(self.shards):
            self.log(f"Method Warmup encountered an error.\n{trace}", level="ERROR")
        limit = self.args["max_input_tokens"] or self.args["max_input_length"]
        fields = f"max_input_length={_some(limit)} max_prefill_tokens={prefill} "
        fields += f"max_total_tokens={_some(self.args['max_total_tokens'])} max_batch_size=None"
        for _ in range(self.shards):
            self.router("client", f"Server error: {message}", "ERROR", self._warmup_span(fields))
        self.emit(f'Error: Backend(Warmup(Generation("{message}")))')
        self.pause(0.2)
        self.log("Webserver Crashed", level="ERROR")
        self.stop_shards()
        self.emit("Error: WebserverFailed", sys.stderr)
        return 1

    def _warmup_span(self, fields: str) -> str:
        """``warmup{fields}:warmup:`` — the two instrumented warm-up calls the error is in."""
        on = self.router_color
        shown = " ".join(_field(on, f) for f in fields.split())
        name, colon = _ansi(on, "1", "warmup"), _ansi(on, "2", ":")
        return f"{name}{_ansi(on, '1', '{')}{shown}{_ansi(on, '1', '}')}{colon}{name}{colon} "

    def stop_shards(self) -> None:
        self.log("Shutting down shards")
        for rank in range(self.started):
            for text in ("Terminating shard", "Waiting for shard to gracefully shutdown"):
                self.log(text, span="shard-manager", rank=rank)
        time.sleep(0.3 / self.sim.speed)
        self.shard_log("shard terminated")

    def shutdown(self) -> int:
        """After SIGTERM (ctrlc's handler): the webserver, then the shards; 0."""
        if self.serving:
            self.log("Terminating webserver")
            self.log("Waiting for webserver to gracefully shutdown")
            if self.sim.wedge_on_stop:
                self.wedge()
            self.router("signal", "signal received, starting graceful shutdown")
            time.sleep(0.2 / self.sim.speed)
            self.log("webserver terminated")
        elif self.sim.wedge_on_stop:
            self.wedge()
        if self.started:
            self.stop_shards()
        return 0


def invalid(a: Mapping[str, object]) -> str | None:
    """The launcher's refusal of the token limits (main.rs), if any."""
    given, length, total = a["max_input_tokens"], a["max_input_length"], a["max_total_tokens"]
    if given is not None and length is not None:
        return f"Both `max_input_tokens` ({given}) and `max_input_length` ({length}) are set. " + (
            "Please define only `max_input_tokens` as `max_input_length is deprecated for naming "
            "consistency."
        )
    tokens = given if given is not None else length
    if isinstance(tokens, int) and isinstance(total, int) and tokens >= total:
        return f"`max_input_tokens`({tokens}) must be < `max_total_tokens`({total})"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """``text-generation-launcher [flags]``; the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    si.log_argv(os.environ, "tgi")
    si.line_buffered()
    try:
        server = Tgi(parse_args(args, os.environ), si.settings(os.environ), os.environ)
    except ValueError as e:
        print(f"error: {e}\n\nFor more information, try '--help'.", file=sys.stderr)
        return 2
    refused = invalid(server.args)
    if refused:
        server.log(args_debug(server.args))
        print(f'Error: ArgumentValidation("{refused}")', file=sys.stderr)
        return 1
    try:
        return server.run()
    except si.Terminated:
        return server.shutdown()


if __name__ == "__main__":
    sys.exit(main())
