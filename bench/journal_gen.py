"""Deterministic generator of a realistic ``journalctl -o json`` journal, for benchmarks.

Each simulated host runs three vLLM services with different log formats:

* ``vllm-llama8b.service``: vLLM 0.8.5 V1, TP 2; API/EngineCore lines plain, worker lines carry an
  ANSI-coloured ``(VllmWorker rank=N pid=P)`` prefix; request logging on.
* ``vllm-qwen32b.service``: vLLM 0.11.0 V1, TP 2; every line prefixed and coloured, so every
  MESSAGE is a JSON byte array; request logging off.
* ``vllm-qwen7b.service``: vLLM 0.6.6 V0, TP 1; old ``file.py:N]`` format, tqdm lines start with
  ``\\r``; request logging on.

Besides request traffic the services go through startups, runtime CUDA OOM crashes, a crash
that exits 0 (and is not restarted), startup OOMs, host OOM kills, planned restarts and a stop that
times out, with PID 1's lifecycle messages (systemd 252 wording and MESSAGE_IDs);
the kernel adds firewall noise, an occasional Xid and the OOM-killer lines.

Output is streamed: memory use does not grow with ``lines``. Same ``seed`` and ``hosts`` give
byte-identical output, and a shorter run is a prefix of a longer one.
"""

from __future__ import annotations

import argparse
import calendar
import heapq
import pathlib
import random
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import orjson

from advisor.sim.journald_format import (
    PID1_FIELDS,
    STDOUT_KEY_ORDER,
    SYSTEMD_MESSAGES,
    cursor,
    exit_fields,
    json_field_value,
)
from advisor.sim.texts import (
    ENGINE_CORE_FAILED,
    HTTP_SHUTDOWN,
    UVICORN_READY,
    UVICORN_SHUTDOWN_COMPLETE,
    UVICORN_SHUTTING_DOWN,
    UVICORN_WAITING,
    UVICORN_WAITING_SHUTDOWN,
    engine_init_failed,
    sampler_warmup_oom,
    torch_oom_tail,
    uvicorn_finished,
    uvicorn_started,
)

START_US = calendar.timegm((2026, 2, 20, 21, 0, 0)) * 1_000_000
BOOT_AGE_US = 3 * 86_400 * 1_000_000 + 4_321_987_654  # hosts booted ~3 days before START_US
CHUNK_LINES = 8192
SEC = 1_000_000

CYAN = "\x1b[1;36m"
RESET = "\x1b[0;0m"

KEY_ORDER_PID1 = (
    "PRIORITY",
    "SYSLOG_FACILITY",
    "TID",
    "CODE_FILE",
    "CODE_LINE",
    "CODE_FUNC",
    "SYSLOG_IDENTIFIER",
    "UNIT",
    "INVOCATION_ID",
    "MESSAGE_ID",
    "MESSAGE",
    "_PID",
    "_UID",
    "_GID",
    "_COMM",
    "_EXE",
    "_CMDLINE",
    "_CAP_EFFECTIVE",
    "_SELINUX_CONTEXT",
    "_SYSTEMD_CGROUP",
    "_SYSTEMD_UNIT",
    "_SYSTEMD_SLICE",
    "_TRANSPORT",
    "_BOOT_ID",
    "_MACHINE_ID",
    "_HOSTNAME",
)
KEY_ORDER_KERNEL = (
    "_SOURCE_MONOTONIC_TIMESTAMP",
    "_TRANSPORT",
    "SYSLOG_FACILITY",
    "SYSLOG_IDENTIFIER",
    "PRIORITY",
    "MESSAGE",
    "_BOOT_ID",
    "_MACHINE_ID",
    "_HOSTNAME",
)
ADDRESS_KEYS = ("__CURSOR", "__REALTIME_TIMESTAMP", "__MONOTONIC_TIMESTAMP")

QUESTIONS = (
    "Summarize the following support ticket in two sentences: {t}",
    "Write a SQL query that returns {t}",
    "Explain to a new engineer why {t}",
    "Translate into German: {t}",
    "List three risks of {t}",
    "Draft a polite reply to a customer asking about {t}",
    "What is the time complexity of {t}? Answer briefly.",
    "Classify the sentiment of this review: '{t}'",
    "Give me a bash one-liner for {t}",
    "Rewrite this paragraph in plain English: {t}",
)
TOPICS = (
    "the nightly backup job failed twice with a timeout",
    "all orders from last week grouped by region",
    "our retry policy uses exponential backoff with jitter",
    "the invoice was charged twice after the plan upgrade",
    "moving the database to another availability zone",
    "a refund for a damaged package",
    "merging two sorted linked lists",
    "the battery lasts two days but the screen scratches easily",
    "finding the ten largest files under /var",
    "the quarterly report shows revenue growth slowing in the third month",
    "rotating TLS certificates before they expire",
    "the delivery arrived late and the box was open",
)
CLIENTS = ("10.20.0.11", "10.20.0.12", "10.20.0.13", "10.20.1.40", "127.0.0.1")
ROUTES_V1 = (
    ("/openapi.json", "GET, HEAD"),
    ("/docs", "GET, HEAD"),
    ("/health", "GET"),
    ("/load", "GET"),
    ("/ping", "POST, GET"),
    ("/tokenize", "POST"),
    ("/detokenize", "POST"),
    ("/v1/models", "GET"),
    ("/version", "GET"),
    ("/v1/chat/completions", "POST"),
    ("/v1/completions", "POST"),
    ("/v1/embeddings", "POST"),
    ("/metrics", "GET"),
)

# (realtime µs, stream, MESSAGE, extra fields; a None value removes that key)
Item = tuple[int, "Stream", str | None, dict[str, str | None] | None]


def _hex(rng: random.Random, bits: int = 128) -> str:
    return f"{rng.getrandbits(bits):0{bits // 4}x}"


class Stamper:
    """vLLM's ``%m-%d %H:%M:%S`` (host clock in UTC), cached per second."""

    def __init__(self) -> None:
        self._cache: dict[int, str] = {}

    def __call__(self, t_us: int) -> str:
        sec = t_us // SEC
        text = self._cache.get(sec)
        if text is None:
            if len(self._cache) > 4096:
                self._cache.clear()
            text = time.strftime("%m-%d %H:%M:%S", time.gmtime(sec))
            self._cache[sec] = text
        return text


STAMP = Stamper()


@dataclass
class Host:
    name: str
    boot_id: str
    machine_id: str
    seqnum_id: str
    boot_us: int
    seq: int
    next_pid: int

    def pid(self, step: int = 1) -> int:
        self.next_pid += step
        return self.next_pid


class Stream:
    """Constant fields of one kind of entry, kept in a few key orders."""

    def __init__(
        self, host: Host, fields: dict[str, str], order: tuple[str, ...], rng: random.Random
    ) -> None:
        self.host = host
        self.variants = _key_orders(fields, order, rng)
        self.rng = rng


def _key_orders(
    fields: dict[str, str], order: tuple[str, ...], rng: random.Random
) -> list[dict[str, object]]:
    """Canonical order (address fields first) plus five slightly shuffled ones."""
    data_keys = [k for k in order if k in fields or k == "MESSAGE"]
    orders = [list(ADDRESS_KEYS) + data_keys]
    for i in range(5):
        keys = list(data_keys)
        for _ in range(2 + i):
            j = rng.randrange(len(keys) - 1)
            keys[j], keys[j + 1] = keys[j + 1], keys[j]
        cut = 5 if i == 4 else 0  # the last variant puts the address fields in the middle
        orders.append(keys[:cut] + list(ADDRESS_KEYS) + keys[cut:])
    return [{k: fields.get(k) for k in keys} for keys in orders]


def render(t: int, stream: Stream, msg: str | None, extra: dict[str, str | None] | None) -> bytes:
    host = stream.host
    host.seq += 1
    seq = host.seq
    mono = t - host.boot_us
    r = stream.rng.random()
    d = stream.variants[0 if r < 0.7 else 1 + int((r - 0.7) * 16.66)].copy()
    d["__CURSOR"] = cursor(host.seqnum_id, seq, host.boot_id, mono, t)
    d["__REALTIME_TIMESTAMP"] = str(t)
    d["__MONOTONIC_TIMESTAMP"] = str(mono)
    d["MESSAGE"] = None if msg is None else json_field_value("MESSAGE", msg)
    if extra:
        d.update(extra)
        if "MESSAGE_ID" in d and d["MESSAGE_ID"] is None:
            del d["MESSAGE_ID"]
    return orjson.dumps(d)


# --------------------------------------------------------------------------- service profiles


@dataclass(frozen=True)
class Profile:
    unit: str
    description: str
    version: str
    style: str  # "v0" (0.6 format), "v1_08" (0.8 V1), "v1_11" (0.11 V1, all prefixed)
    model: str
    tp: int
    port: int
    shards: int
    weights_gib: float
    kv_gib: float
    kv_tokens: int
    max_len: int
    mean_gap_us: int
    log_requests: bool
    user_uid: str = "998"

    @property
    def status(self) -> str:
        return f"{self.unit} - {self.description}"

    @property
    def cmdline(self) -> str:
        return (
            f"/opt/vllm/bin/python3 /opt/vllm/bin/vllm serve {self.model} --port {self.port} "
            f"--tensor-parallel-size {self.tp} --max-model-len {self.max_len}"
        )


PROFILES = (
    Profile(
        "vllm-llama8b.service",
        "vLLM Llama-3.1-8B-Instruct (TP2)",
        "0.8.5.post1",
        "v1_08",
        "meta-llama/Llama-3.1-8B-Instruct",
        2,
        8000,
        4,
        7.5123,
        62.31,
        1_020_880,
        32768,
        260_000,
        True,
    ),
    Profile(
        "vllm-qwen32b.service",
        "vLLM Qwen2.5-32B-Instruct (TP2)",
        "0.11.0",
        "v1_11",
        "Qwen/Qwen2.5-32B-Instruct",
        2,
        8001,
        17,
        30.7186,
        38.42,
        314_720,
        32768,
        290_000,
        False,
    ),
    Profile(
        "vllm-qwen7b.service",
        "vLLM Qwen2.5-7B-Instruct",
        "0.6.6.post1",
        "v0",
        "Qwen/Qwen2.5-7B-Instruct",
        1,
        8002,
        4,
        14.2487,
        55.19,
        1_033_408,
        32768,
        1_000_000,
        True,
    ),
)

# Version-specific "file.py:line" of the lines the generator writes.
SRC: dict[str, dict[str, str]] = {
    "v0": {
        "received": "logger.py:37",
        "added": "engine.py:267",
        "metrics": "metrics.py:467",
        "version": "api_server.py:712",
        "args": "api_server.py:713",
        "tasks": "config.py:510",
        "init": "llm_engine.py:234",
        "backend": "selector.py:120",
        "load": "model_runner.py:1094",
        "format": "weight_utils.py:251",
        "loaded": "model_runner.py:1099",
        "profile": "worker.py:241",
        "blocks": "gpu_executor.py:76",
        "conc": "gpu_executor.py:80",
        "capture": "model_runner.py:1415",
        "captured": "model_runner.py:1535",
        "engine_init": "llm_engine.py:431",
        "routes": "launcher.py:19",
        "route": "launcher.py:27",
        "shutdown": "launcher.py:57",
        "engine_err": "engine.py:135",
        "client_err": "client.py:250",
    },
    "v1_08": {
        "received": "logger.py:39",
        "added": "async_llm.py:252",
        "metrics": "loggers.py:111",
        "platform": "__init__.py:239",
        "version": "api_server.py:1043",
        "args": "api_server.py:1044",
        "tasks": "config.py:717",
        "mp": "config.py:1770",
        "chunked": "config.py:2003",
        "init": "core.py:58",
        "rank": "parallel_state.py:1004",
        "backend": "cuda.py:221",
        "load": "gpu_model_runner.py:1329",
        "format": "weight_utils.py:265",
        "weights": "loader.py:458",
        "loaded": "gpu_model_runner.py:1347",
        "compile": "backends.py:420",
        "dynamo": "backends.py:430",
        "compiled": "monitor.py:33",
        "kv_mem": "gpu_worker.py:227",
        "kv_size": "kv_cache_utils.py:634",
        "conc": "kv_cache_utils.py:637",
        "captured": "gpu_model_runner.py:1686",
        "engine_init": "core.py:159",
        "serve": "api_server.py:1081",
        "routes": "launcher.py:28",
        "route": "launcher.py:36",
        "shutdown": "launcher.py:79",
        "worker_exc": "multiproc_executor.py:470",
        "core_fatal": "core.py:400",
        "output_handler": "async_llm.py:399",
        "sampler": "core.py:396",
    },
    "v1_11": {
        "metrics": "loggers.py:123",
        "platform": "__init__.py:216",
        "version": "api_server.py:1839",
        "args": "utils.py:233",
        "arch": "model.py:547",
        "maxlen": "model.py:1510",
        "chunked": "scheduler.py:205",
        "init": "core.py:77",
        "rank": "parallel_state.py:1208",
        "backend": "cuda.py:366",
        "load": "gpu_model_runner.py:2602",
        "weights": "default_loader.py:267",
        "loaded": "gpu_model_runner.py:2653",
        "compile": "backends.py:548",
        "dynamo": "backends.py:559",
        "compiled": "monitor.py:34",
        "kv_mem": "gpu_worker.py:298",
        "kv_size": "kv_cache_utils.py:1087",
        "conc": "kv_cache_utils.py:1091",
        "captured": "gpu_model_runner.py:3480",
        "engine_init": "core.py:210",
        "cache_info": "loggers.py:147",
        "tasks": "api_server.py:1634",
        "serve": "api_server.py:1912",
        "routes": "launcher.py:34",
        "route": "launcher.py:42",
        "shutdown": "launcher.py:99",
        "worker_exc": "multiproc_executor.py:671",
        "core_fatal": "core.py:710",
        "output_handler": "async_llm.py:480",
        "sampler": "core.py:708",
    },
}

OOM_TAIL = torch_oom_tail()


def torch_oom(rng: random.Random, gpu: int, pid: int, total: float = 79.19) -> str:
    """``CUDA out of memory`` text in the torch 2.4 - 2.9 layout."""
    ask = rng.choice((1.25, 2.45, 3.91, 784.0 / 1024, 512.0 / 1024))
    free = rng.uniform(0.2, 1.1)
    used = total - free
    private = rng.uniform(0.5, 1.6)
    unalloc = rng.uniform(0.1, 2.5)
    alloc = used - unalloc - 0.9
    return (
        f"CUDA out of memory. Tried to allocate {_size(ask)}. GPU {gpu} has a total capacity "
        f"of {total:.2f} GiB of which {_size(free)} is free. Including non-PyTorch memory, "
        f"this process has {used:.2f} GiB memory in use. Of the allocated memory "
        f"{alloc:.2f} GiB is allocated by PyTorch, with {private:.2f} GiB allocated in "
        f"private pools (e.g., CUDA Graphs), and {_size(unalloc)} is reserved by PyTorch but "
        f"unallocated. {OOM_TAIL}"
    )


def _size(gib: float) -> str:
    return f"{gib:.2f} GiB" if gib >= 1 else f"{gib * 1024:.2f} MiB"


def _timespan(total: float) -> str:
    """systemd's timespan text with ms accuracy: ``1h 2min 3.456s``."""
    h, rem = divmod(total, 3600)
    m, s = divmod(rem, 60)
    if h >= 1:
        return f"{int(h)}h {int(m)}min {s:.3f}s"
    return f"{int(m)}min {s:.3f}s"


# --------------------------------------------------------------------------- content pools


class Pools:
    """Precomputed prompt and sampling-parameter texts, so per-request work is one join."""

    def __init__(self, rng: random.Random) -> None:
        questions = [q.format(t=rng.choice(TOPICS)) for q in QUESTIONS for _ in range(6)]
        rng.shuffle(questions)
        self.llama = [repr(_llama_prompt(q)) for q in questions]
        self.qwen = [repr(_qwen_prompt(q)) for q in questions]
        self.params_v1 = [
            _params(t, p, -1, 1.0, m, True)
            for t in (0.0, 0.2, 0.7, 1.0)
            for p in (0.9, 1.0)
            for m in (256, 1024)
        ]
        self.params_v0 = [
            _params(t, p, 20, 1.05, m, False)
            for t in (0.7, 0.8)
            for p in (0.8, 0.95)
            for m in (512, 2048)
        ]
        doc = " ".join(TOPICS) + ". "
        self.long_prompt = repr(_llama_prompt("Answer from the context.\n\n" + doc * 24))


def _llama_prompt(question: str) -> str:
    return (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge "
        "Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user"
        f"<|end_header_id|>\n\n{question}<|eot_id|><|start_header_id|>assistant"
        "<|end_header_id|>\n\n"
    )


def _qwen_prompt(question: str) -> str:
    return (
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
        f"assistant.<|im_end|>\n<|im_start|>user\n{question}<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def _params(temp: float, top_p: float, top_k: int, rep: float, max_tokens: int, v1: bool) -> str:
    tail = ", extra_args=None)" if v1 else ")"
    return (
        f"SamplingParams(n=1, presence_penalty=0.0, frequency_penalty=0.0, "
        f"repetition_penalty={rep}, temperature={temp}, top_p={top_p}, top_k={top_k}, "
        f"min_p=0.0, seed=None, stop=[], stop_token_ids=[], bad_words=[], "
        f"include_stop_str_in_output=False, ignore_eos=False, max_tokens={max_tokens}, "
        f"min_tokens=0, logprobs=None, prompt_logprobs=None, skip_special_tokens=True, "
        f"spaces_between_special_tokens=True, truncate_prompt_tokens=None, "
        f"guided_decoding=None{tail}"
    )


# --------------------------------------------------------------------------- host and streams


def make_host(rng: random.Random, index: int) -> Host:
    return Host(
        name=f"gpu-node-{index + 1:02d}",
        boot_id=_hex(rng),
        machine_id=_hex(rng),
        seqnum_id=_hex(rng),
        boot_us=START_US - BOOT_AGE_US - index * 7_777_777,
        seq=0x3A0000 + rng.randrange(0x10000),
        next_pid=40_000 + rng.randrange(9000),
    )


def host_fields(host: Host) -> dict[str, str]:
    return {"_BOOT_ID": host.boot_id, "_MACHINE_ID": host.machine_id, "_HOSTNAME": host.name}


def pid1_stream(host: Host, rng: random.Random, unit: str, invocation: str) -> Stream:
    fields = host_fields(host) | {
        **PID1_FIELDS,
        "UNIT": unit,
        "INVOCATION_ID": invocation,
        "PRIORITY": "6",
        "CODE_FILE": "",
        "CODE_LINE": "",
        "CODE_FUNC": "",
        "MESSAGE_ID": "",
    }
    return Stream(host, fields, KEY_ORDER_PID1, rng)


def kernel_stream(host: Host, rng: random.Random) -> Stream:
    fields = host_fields(host) | {
        "_SOURCE_MONOTONIC_TIMESTAMP": "",
        "_TRANSPORT": "kernel",
        "SYSLOG_FACILITY": "0",
        "SYSLOG_IDENTIFIER": "kernel",
        "PRIORITY": "4",
    }
    return Stream(host, fields, KEY_ORDER_KERNEL, rng)


def service_stream(
    host: Host, rng: random.Random, prof: Profile, pid: int, invocation: str
) -> Stream:
    fields = host_fields(host) | {
        "_TRANSPORT": "stdout",
        "PRIORITY": "6",
        "SYSLOG_FACILITY": "3",
        "SYSLOG_IDENTIFIER": "vllm",
        "_STREAM_ID": _hex(rng),
        "_PID": str(pid),
        "_UID": prof.user_uid,
        "_GID": prof.user_uid,
        "_COMM": "vllm",
        "_EXE": "/usr/bin/python3.12",
        "_CMDLINE": prof.cmdline,
        "_CAP_EFFECTIVE": "0",
        "_SELINUX_CONTEXT": "unconfined",
        "_SYSTEMD_CGROUP": f"/system.slice/{prof.unit}",
        "_SYSTEMD_UNIT": prof.unit,
        "_SYSTEMD_SLICE": "system.slice",
        "_SYSTEMD_INVOCATION_ID": invocation,
    }
    return Stream(host, fields, STDOUT_KEY_ORDER, rng)


# --------------------------------------------------------------------------- one vLLM service


class Service:
    """One vLLM unit: yields its journal entries (time, stream, message, extra) in time order."""

    def __init__(
        self, host: Host, prof: Profile, rng: random.Random, pools: Pools, kernel: Stream, t0: int
    ) -> None:
        self.host = host
        self.prof = prof
        self.rng = rng
        self.pools = pools
        self.kernel = kernel
        self.t = t0
        self.src = SRC[prof.style]
        self.n_restarts = 0
        self.load_s = 0.0
        self.started_at = t0 - rng.randrange(2, 30) * 3600 * SEC
        self._new_invocation()

    # ---- identity of one run
    def _new_invocation(self) -> None:
        rng, host = self.rng, self.host
        self.invocation = _hex(rng)
        self.main_pid = host.pid(rng.randrange(3, 40))
        self.core_pid = host.pid(rng.randrange(60, 120))
        self.worker_pids = [host.pid(rng.randrange(20, 60))]
        self.worker_pids += [host.pid() for _ in range(self.prof.tp - 1)]
        self.out = service_stream(host, rng, self.prof, self.main_pid, self.invocation)
        self.err = service_stream(host, rng, self.prof, self.main_pid, self.invocation)
        self.pid1 = pid1_stream(host, rng, self.prof.unit, self.invocation)
        self.prefix = self._prefixes()

    def _prefixes(self) -> dict[str, str]:
        style, pids = self.prof.style, self.worker_pids
        if style == "v0":
            return {"api": "", "core": "", "w0": ""}
        if style == "v1_08":
            workers = {
                f"w{r}": f"{CYAN}(VllmWorker rank={r} pid={p}){RESET} " for r, p in enumerate(pids)
            }
            return {"api": "", "core": ""} | workers
        workers = {f"w{r}": f"{CYAN}(Worker_TP{r} pid={p}){RESET} " for r, p in enumerate(pids)}
        return {
            "api": f"{CYAN}(APIServer pid={self.main_pid}){RESET} ",
            "core": f"{CYAN}(EngineCore_DP0 pid={self.core_pid}){RESET} ",
        } | workers

    # ---- entry builders (each advances the service clock by dt seconds)
    def log(self, dt: float, proc: str, level: str, key: str, text: str) -> Item:
        self.t += int(dt * SEC) + 1
        src = self.src[key]
        stamp = STAMP(self.t)
        if self.prof.style == "v0":
            msg = f"{level} {stamp} {src}] {text}"
        else:
            msg = f"{self.prefix[proc]}{level} {stamp} [{src}] {text}"
        return (self.t, self.out, msg, None)

    def log_lines(
        self, dt: float, proc: str, level: str, key: str, lines: list[str]
    ) -> Iterator[Item]:
        """Records logged together (a traceback): the first dt seconds on, the rest at once."""
        for i, text in enumerate(lines):
            yield self.log(dt if i == 0 else 0, proc, level, key, text)

    def raw(self, dt: float, proc: str, text: str) -> Item:
        """A line the process wrote to stderr itself (uvicorn, tracebacks, tqdm)."""
        self.t += int(dt * SEC) + 1
        return (self.t, self.err, self.prefix[proc] + text, None)

    def systemd(
        self, dt: float, kind: str, extra: dict[str, str] | None = None, **fmt: str
    ) -> Item:
        self.t += int(dt * SEC) + 1
        message = SYSTEMD_MESSAGES[kind]
        # MESSAGE_ID stays None (render() drops the key) for a message that has none
        fields: dict[str, str | None] = {
            "MESSAGE_ID": None,
            **message.fields(),
            "_SOURCE_REALTIME_TIMESTAMP": str(self.t - 37),
        }
        if extra:
            fields |= extra
        msg = message.fmt.format(status=self.prof.status, unit=self.prof.unit, **fmt)
        return (self.t, self.pid1, msg, fields)

    def kmsg(self, dt: float, prio: str, text: str) -> Item:
        self.t += int(dt * SEC) + 1
        mono = self.t - self.host.boot_us - 211
        return (
            self.t,
            self.kernel,
            text,
            {"PRIORITY": prio, "_SOURCE_MONOTONIC_TIMESTAMP": str(mono)},
        )

    # ---- life cycle
    def life(self) -> Iterator[Item]:
        while True:
            yield from self.serve(self.rng.randrange(60_000, 160_000) // 3)
            incident = self.rng.choices(
                (
                    self.crash_runtime_oom,
                    self.host_oom_kill,
                    self.planned_restart,
                    self.wedged_stop,
                ),
                weights=(4, 1, 4, 1),
            )[0]
            yield from incident()

    def boot(self, manual: bool) -> Iterator[Item]:
        """New invocation: PID 1's start messages, then vLLM's startup; retries startup OOMs."""
        if manual:
            self.n_restarts = 0
        while True:
            self._new_invocation()
            job = {"JOB_ID": str(self.rng.randrange(2000, 90000)), "JOB_TYPE": "start"}
            if manual or self.rng.random() < 0.5:
                yield self.systemd(0.05, "starting", extra=job)
            yield self.systemd(0.01, "started", extra=job | {"JOB_RESULT": "done"})
            self.started_at = self.t
            if self.rng.random() < 0.15 and self.prof.style != "v0":
                yield from self.startup(fail=True)
                yield from self.fail_sequence("exited", "1/FAILURE", "exit-code", 0.4)
                continue
            yield from self.startup(fail=False)
            return

    def serve(self, n_requests: int) -> Iterator[Item]:
        rng, prof = self.rng, self.prof
        gap = prof.mean_gap_us
        inflight: deque[tuple[str, str]] = deque()
        next_metrics = self.t + 10 * SEC
        next_scrape = self.t + rng.randrange(15 * SEC)
        next_health = self.t + rng.randrange(10 * SEC)
        v1 = prof.style != "v0"
        prompts = self.pools.llama if prof.style == "v1_08" else self.pools.qwen
        params = self.pools.params_v1 if v1 else self.pools.params_v0
        for _ in range(n_requests):
            self.t += int(rng.expovariate(1.0) * gap) + 1
            rid = f"{rng.getrandbits(128):032x}"
            chat = rng.random() < 0.85
            if prof.log_requests:
                prompt = self.pools.long_prompt if rng.random() < 0.0004 else rng.choice(prompts)
                kind = "chatcmpl" if chat else "cmpl"
                text = (
                    f"Received request {kind}-{rid}: prompt: {prompt}, params: "
                    f"{rng.choice(params)}, prompt_token_ids: None, lora_request: None, "
                    f"prompt_adapter_request: None."
                )
                yield self.log(0, "api", "INFO", "received", text)
                yield self.log(0.0004, "api", "INFO", "added", f"Added request {kind}-{rid}.")
            inflight.append(
                (rng.choice(CLIENTS), "/v1/chat/completions" if chat else "/v1/completions")
            )
            if len(inflight) > 3 or rng.random() < 0.3:
                client, path = inflight.popleft()
                yield self.access(0.002, client, "POST", path, "200 OK")
            if self.t >= next_metrics:
                next_metrics = self.t + 10 * SEC
                yield self.log(0.001, "api", "INFO", "metrics", self.metrics_text())
            if self.t >= next_scrape:
                next_scrape = self.t + 15 * SEC
                yield self.access(0.001, "10.20.9.5", "GET", "/metrics", "200 OK")
            if self.t >= next_health:
                next_health = self.t + 10 * SEC
                yield self.access(0.001, "10.20.9.6", "GET", "/health", "200 OK")

    def access(self, dt: float, client: str, method: str, path: str, status: str) -> Item:
        port = 30000 + self.rng.randrange(30000)
        return self.raw(
            dt, "api", f'INFO:     {client}:{port} - "{method} {path} HTTP/1.1" {status}'
        )

    def metrics_text(self) -> str:
        rng = self.rng
        running = rng.randrange(1, 48)
        prompt_tp = rng.uniform(200, 9000)
        gen_tp = rng.uniform(100, 2500)
        kv = rng.uniform(0.5, 60)
        if self.prof.style == "v0":
            return (
                f"Avg prompt throughput: {prompt_tp:.1f} tokens/s, Avg generation "
                f"throughput: {gen_tp:.1f} tokens/s, Running: {running} reqs, Swapped: 0 "
                f"reqs, Pending: 0 reqs, GPU KV cache usage: {kv:.1f}%, CPU KV cache usage: "
                "0.0%."
            )
        return (
            f"Engine 000: Avg prompt throughput: {prompt_tp:.1f} tokens/s, Avg generation "
            f"throughput: {gen_tp:.1f} tokens/s, Running: {running} reqs, Waiting: 0 reqs, "
            f"GPU KV cache usage: {kv:.1f}%, Prefix cache hit rate: {rng.uniform(5, 70):.1f}%"
        )

    # ---- startup sequences
    def startup(self, fail: bool) -> Iterator[Item]:
        style = self.prof.style
        if style == "v0":
            yield from self.startup_v0()
        else:
            yield from self.startup_v1(fail)

    def startup_v1(self, fail: bool) -> Iterator[Item]:
        prof, rng = self.prof, self.rng
        old = prof.style == "v1_08"
        yield self.log(6.5, "api", "INFO", "platform", "Automatically detected platform cuda.")
        yield self.log(1.2, "api", "INFO", "version", f"vLLM API server version {prof.version}")
        yield self.log(0.01, "api", "INFO", "args", self.args_text(old))
        if not old:
            yield self.log(0.2, "api", "INFO", "arch", "Resolved architecture: Qwen2ForCausalLM")
            yield self.log(0.01, "api", "INFO", "maxlen", f"Using max model len {prof.max_len}")
        else:
            yield self.log(
                0.3,
                "api",
                "INFO",
                "tasks",
                "This model supports multiple tasks: "
                "{'generate', 'classify', 'reward', 'score', 'embed'}. Defaulting "
                "to 'generate'.",
            )
            yield self.log(
                0.01, "api", "INFO", "mp", "Defaulting to use mp for distributed inference"
            )
        yield self.log(
            0.01,
            "api",
            "INFO",
            "chunked",
            "Chunked prefill is enabled with max_num_batched_tokens=8192.",
        )
        yield self.log(5.8, "core", "INFO", "platform", "Automatically detected platform cuda.")
        yield self.log(0.1, "core", "INFO", "init", self.engine_config_text())
        for r in range(prof.tp):
            ep = "" if old else f", EP rank {r}"
            yield self.log(
                4.1,
                f"w{r}",
                "INFO",
                "rank",
                f"rank {r} in world size {prof.tp} is assigned as DP rank 0, PP rank "
                f"0, TP rank {r}{ep}",
            )
        for r in range(prof.tp):
            yield self.log(0.2, f"w{r}", "INFO", "load", f"Starting to load model {prof.model}...")
        for r in range(prof.tp):
            yield self.log(
                0.3,
                f"w{r}",
                "INFO",
                "backend",
                "Using Flash Attention backend on V1 engine."
                if old
                else "Using Flash Attention backend.",
            )
        yield from self.tqdm_shards("w0")
        for r in range(prof.tp):
            took = self.load_s + rng.uniform(0.1, 1.5)
            yield self.log(
                0.4, f"w{r}", "INFO", "weights", f"Loading weights took {took:.2f} seconds"
            )
            yield self.log(
                0.2,
                f"w{r}",
                "INFO",
                "loaded",
                f"Model loading took {prof.weights_gib:.4f} GiB and {took + 0.8:.6f} seconds",
            )
        yield from self.compile_lines()
        for r in range(prof.tp):
            yield self.log(
                3.0, f"w{r}", "INFO", "kv_mem", f"Available KV cache memory: {prof.kv_gib:.2f} GiB"
            )
        yield self.log(
            0.2, "core", "INFO", "kv_size", f"GPU KV cache size: {prof.kv_tokens:,} tokens"
        )
        yield self.log(
            0.01,
            "core",
            "INFO",
            "conc",
            f"Maximum concurrency for "
            f"{prof.max_len:,} tokens per request: "
            f"{prof.kv_tokens / prof.max_len:.2f}x",
        )
        if not old:
            yield self.raw(4.4, "w0", self.cuda_graph_tqdm())
        if fail:
            yield from self.sampler_oom()
            return
        for r in range(prof.tp):
            yield self.log(
                0.6,
                f"w{r}",
                "INFO",
                "captured",
                f"Graph capturing finished in "
                f"{rng.randrange(5, 20)} secs, took {rng.uniform(0.3, 1.2):.2f} GiB",
            )
        yield self.log(
            0.3,
            "core",
            "INFO",
            "engine_init",
            "init engine (profile, create kv "
            f"cache, warmup model) took {rng.uniform(30, 90):.2f} seconds",
        )
        if not old:
            yield self.log(
                0.4,
                "api",
                "INFO",
                "cache_info",
                "Engine 000: vllm cache_config_info "
                f"with initialization after num_gpu_blocks is: "
                f"{prof.kv_tokens // 16}",
            )
            yield self.log(0.1, "api", "INFO", "tasks", "Supported_tasks: ['generate']")
            serve = f"Starting vLLM API server 0 on http://0.0.0.0:{prof.port}"
        else:
            serve = f"Starting vLLM API server on http://0.0.0.0:{prof.port}"
        yield self.log(0.2, "api", "INFO", "serve", serve)
        yield from self.routes_and_uvicorn()

    def startup_v0(self) -> Iterator[Item]:
        prof, rng = self.prof, self.rng
        yield self.log(7.9, "api", "INFO", "version", f"vLLM API server version {prof.version}")
        yield self.log(0.01, "api", "INFO", "args", self.args_text(True))
        yield self.log(
            0.4,
            "api",
            "INFO",
            "tasks",
            "This model supports multiple tasks: "
            "{'generate', 'embed', 'reward', 'classify', 'score'}. Defaulting to "
            "'generate'.",
        )
        yield self.log(
            0.3,
            "api",
            "INFO",
            "init",
            f"Initializing an LLM engine "
            f"(v{prof.version}) with config: {self.engine_config_text(body=True)}, "
            "use_cached_outputs=True, ",
        )
        yield self.log(2.2, "api", "INFO", "backend", "Using Flash Attention backend.")
        yield self.log(0.6, "api", "INFO", "load", f"Starting to load model {prof.model}...")
        yield self.log(0.5, "api", "INFO", "format", "Using model weights format ['*.safetensors']")
        yield from self.tqdm_shards("api")
        yield self.log(
            0.2, "api", "INFO", "loaded", f"Loading model weights took {prof.weights_gib:.4f} GB"
        )
        total = 79.19
        budget = total * 0.9
        for text in (
            f"Memory profiling takes {rng.uniform(1.5, 3.5):.2f} seconds",
            f"the current vLLM instance can use total_gpu_memory ({total:.2f}GiB) x "
            f"gpu_memory_utilization (0.90) = {budget:.2f}GiB",
            f"model weights take {prof.weights_gib:.2f}GiB; non_torch_memory takes 0.42GiB; "
            f"PyTorch activation peak memory takes 1.41GiB; the rest of the memory reserved for "
            f"KV Cache is {prof.kv_gib:.2f}GiB.",
        ):
            yield self.log(2.4 if text.startswith("Memory") else 0, "api", "INFO", "profile", text)
        blocks = prof.kv_tokens // 16
        yield self.log(0.1, "api", "INFO", "blocks", f"# GPU blocks: {blocks}, # CPU blocks: 4681")
        yield self.log(
            0.01,
            "api",
            "INFO",
            "conc",
            f"Maximum concurrency for {prof.max_len} "
            f"tokens per request: {prof.kv_tokens / prof.max_len:.2f}x",
        )
        yield self.log(
            1.3,
            "api",
            "INFO",
            "capture",
            "Capturing cudagraphs for decoding. This "
            "may lead to unexpected consequences if the model is not static. To run "
            "the model in eager mode, set 'enforce_eager=True' or use "
            "'--enforce-eager' in the CLI. If out-of-memory error occurs during "
            "cudagraph capture, consider decreasing `gpu_memory_utilization` or "
            "switching to eager mode. You can also reduce the `max_num_seqs` as "
            "needed to decrease memory usage.",
        )
        yield self.log(
            12.0,
            "api",
            "INFO",
            "captured",
            f"Graph capturing finished in {rng.randrange(8, 16)} secs, took 0.31 GiB",
        )
        yield self.log(
            0.01,
            "api",
            "INFO",
            "engine_init",
            "init engine (profile, create kv "
            f"cache, warmup model) took {rng.uniform(15, 25):.2f} seconds",
        )
        yield from self.routes_and_uvicorn()

    def args_text(self, namespace: bool) -> str:
        prof = self.prof
        if namespace:
            return (
                f"args: Namespace(subparser='serve', model_tag='{prof.model}', config='', "
                f"host='0.0.0.0', port={prof.port}, uvicorn_log_level='info', "
                "allow_credentials=False, allowed_origins=['*'], api_key=None, "
                "lora_modules=None, chat_template=None, response_role='assistant', "
                "ssl_keyfile=None, ssl_certfile=None, root_path=None, middleware=[], "
                f"model='{prof.model}', task='auto', tokenizer=None, skip_tokenizer_init="
                "False, revision=None, trust_remote_code=False, dtype='auto', "
                f"max_model_len={prof.max_len}, tensor_parallel_size={prof.tp}, "
                "block_size=None, enable_prefix_caching=None, swap_space=4, "
                "gpu_memory_utilization=0.9, max_num_batched_tokens=None, "
                "max_num_seqs=None, disable_log_stats=False, quantization=None, "
                "enforce_eager=False, disable_log_requests=False, max_log_len=None, "
                "disable_fastapi_docs=False, enable_prompt_tokens_details=False, "
                "dispatch_function=<function ServeSubcommand.cmd at 0x7f3c2b1d9e40>)"
            )
        return (
            f"non-default args: {{'model_tag': '{prof.model}', 'port': {prof.port}, "
            f"'model': '{prof.model}', 'max_model_len': {prof.max_len}, "
            f"'tensor_parallel_size': {prof.tp}}}"
        )

    def engine_config_text(self, body: bool = False) -> str:
        prof = self.prof
        cfg = (
            f"model='{prof.model}', speculative_config=None, tokenizer='{prof.model}', "
            "skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, "
            "trust_remote_code=False, dtype=torch.bfloat16, "
            f"max_seq_len={prof.max_len}, download_dir=None, load_format=auto, "
            f"tensor_parallel_size={prof.tp}, pipeline_parallel_size=1, "
            "disable_custom_all_reduce=False, quantization=None, enforce_eager=False, "
            "kv_cache_dtype=auto, device_config=cuda, seed=0, "
            f"served_model_name={prof.model}, enable_prefix_caching=True, "
            "chunked_prefill_enabled=True"
        )
        if body:
            return cfg
        return f"Initializing a V1 LLM engine (v{prof.version}) with config: {cfg}"

    def tqdm_shards(self, proc: str) -> Iterator[Item]:
        n = self.prof.shards
        desc = "Loading safetensors checkpoint shards"
        yield self.raw(0.3, proc, f"\r{desc}:   0% Completed | 0/{n} [00:00<?, ?it/s]")
        elapsed = 0.0
        for i in range(1, n + 1):
            step = self.rng.uniform(0.8, 3.2)
            elapsed += step
            rate = elapsed / i
            left = rate * (n - i)
            yield self.raw(
                step,
                proc,
                f"\r{desc}: {100 * i // n:3d}% Completed | {i}/{n} "
                f"[{_mmss(elapsed)}<{_mmss(left)}, {rate:5.2f}s/it]",
            )
        self.load_s = elapsed

    def cuda_graph_tqdm(self) -> str:
        desc = "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)"
        total, parts = 67, []
        for done in (0, 9, 19, 29, 39, 49, 59, 67):
            filled = done * 10 // total
            bar = "\u2588" * filled + " " * (10 - filled)
            if done == 0:
                timing = "00:00<?, ?it/s"
            else:
                timing = f"00:0{done * 4 // total}<00:0{(total - done) * 4 // total}, 15.3it/s"
            parts.append(f"\r{desc}: {100 * done // total:3d}%|{bar}| {done}/{total} [{timing}]")
        return "".join(parts)

    def compile_lines(self) -> Iterator[Item]:
        rng = self.rng
        for r in range(self.prof.tp):
            yield self.log(
                1.5,
                f"w{r}",
                "INFO",
                "compile",
                "Using cache directory: "
                f"/home/vllm/.cache/vllm/torch_compile_cache/{_hex(rng, 40)}/"
                f"rank_{r}_0/backbone for vLLM's torch.compile",
            )
            yield self.log(
                0.01,
                f"w{r}",
                "INFO",
                "dynamo",
                f"Dynamo bytecode transform time: {rng.uniform(4, 9):.2f} s",
            )
        for r in range(self.prof.tp):
            yield self.log(
                9.0,
                f"w{r}",
                "INFO",
                "compiled",
                f"torch.compile takes {rng.uniform(12, 30):.2f} s in total",
            )

    def routes_and_uvicorn(self) -> Iterator[Item]:
        yield self.log(0.01, "api", "INFO", "routes", "Available routes are:")
        for path, methods in ROUTES_V1:
            yield self.log(0, "api", "INFO", "route", f"Route: {path}, Methods: {methods}")
        yield self.raw(0.05, "api", uvicorn_started(self.main_pid))
        yield self.raw(0, "api", UVICORN_WAITING)
        yield self.raw(0.01, "api", UVICORN_READY)

    # ---- failures
    def sampler_oom(self) -> Iterator[Item]:
        """Startup dies warming up the sampler, V1 only."""
        rng = self.rng
        pre = "/opt/vllm/lib/python3.12/site-packages/vllm"
        lines = [
            "WorkerProc hit an exception.",
            "Traceback (most recent call last):",
            f'  File "{pre}/v1/worker/gpu_model_runner.py", line 2204, in _dummy_sampler_run',
            "    sampler_output = self.sampler(logits=logits,",
            f'  File "{pre}/v1/sample/sampler.py", line 98, in forward',
            "    logits = self.apply_temperature(logits, sampling_metadata.temperature)",
            "torch.OutOfMemoryError: " + torch_oom(rng, 0, self.worker_pids[0]),
            "",
            "The above exception was the direct cause of the following exception:",
            "",
            "Traceback (most recent call last):",
            f'  File "{pre}/v1/worker/gpu_worker.py", line 412, in compile_or_warm_up_model',
            "    self.model_runner._dummy_sampler_run(hidden_states=last_hidden_states)",
            sampler_warmup_oom(1024),
        ]
        yield from self.log_lines(0.9, "w0", "ERROR", "worker_exc", lines)
        yield self.log(0.05, "core", "ERROR", "sampler", ENGINE_CORE_FAILED)
        yield self.raw(0.3, "api", engine_init_failed("{}"))

    def crash_runtime_oom(self) -> Iterator[Item]:
        """CUDA OOM while serving; engine dies; the API server exits 1 (or 0)."""
        if self.prof.style == "v0":
            yield from self.v0_runtime_oom()
        else:
            yield from self.v1_runtime_oom()
        for _ in range(self.rng.randrange(2, 6)):
            yield self.access(
                0.01,
                self.rng.choice(CLIENTS),
                "POST",
                "/v1/chat/completions",
                "500 Internal Server Error",
            )
        yield from self.uvicorn_shutdown(0.2)
        if self.rng.random() < 0.3:
            yield self.systemd(0.6, "deactivated")
            yield self.consumed(0)
            self.t += self.rng.randrange(300, 1800) * SEC  # someone notices, starts it by hand
            yield from self.boot(manual=True)
            return
        yield from self.fail_sequence("exited", "1/FAILURE", "exit-code", 0.6)
        yield from self.boot(manual=False)

    def v1_runtime_oom(self) -> Iterator[Item]:
        rng, src_pre = self.rng, "/opt/vllm/lib/python3.12/site-packages/vllm"
        rank = self.prof.tp - 1
        oom = torch_oom(rng, rank, self.worker_pids[rank])
        worker = [
            "WorkerProc hit an exception.",
            "Traceback (most recent call last):",
            f'  File "{src_pre}/v1/executor/multiproc_executor.py", line 465, in worker_busy_loop',
            "    output = func(*args, **kwargs)",
            f'  File "{src_pre}/v1/worker/gpu_model_runner.py", line 1204, in execute_model',
            "    hidden_states = self.model(",
            f'  File "{src_pre}/model_executor/layers/logits_processor.py", line 72, in forward',
            "    logits = self._get_logits(hidden_states, lm_head, embedding_bias)",
            "torch.OutOfMemoryError: " + oom,
        ]
        yield from self.log_lines(0.4, f"w{rank}", "ERROR", "worker_exc", worker)
        core = [
            "EngineCore encountered a fatal error.",
            "Traceback (most recent call last):",
            f'  File "{src_pre}/v1/engine/core.py", line 391, in run_engine_core',
            "    engine_core.run_busy_loop()",
            f'  File "{src_pre}/v1/executor/multiproc_executor.py", line 185, in collective_rpc',
            "    raise RuntimeError(",
            f"RuntimeError: Worker failed with error '{oom}', please check the stack trace "
            "above for the root cause",
        ]
        yield from self.log_lines(0.05, "core", "ERROR", "core_fatal", core)
        api = [
            "AsyncLLM output_handler failed.",
            "Traceback (most recent call last):",
            f'  File "{src_pre}/v1/engine/async_llm.py", line 357, in output_handler',
            "    outputs = await engine_core.get_output_async()",
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See "
            "stack trace (above) for the root cause.",
        ]
        yield from self.log_lines(0.1, "api", "ERROR", "output_handler", api)

    def v0_runtime_oom(self) -> Iterator[Item]:
        rng = self.rng
        oom = torch_oom(rng, 0, self.main_pid)
        yield self.log(0.3, "api", "ERROR", "engine_err", oom)
        pre = "/opt/vllm/lib/python3.12/site-packages"
        for text in (
            "Process SpawnProcess-1:",
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3.12/multiprocessing/process.py", line 314, in _bootstrap',
            "    self.run()",
            f'  File "{pre}/vllm/engine/multiprocessing/engine.py", line 389, in run_mp_engine',
            "    raise e",
            f'  File "{pre}/torch/nn/modules/module.py", line 1747, in _call_impl',
            "    return forward_call(*args, **kwargs)",
            "torch.OutOfMemoryError: " + oom,
        ):
            yield self.raw(0.01, "api", text)
        yield self.log(
            0.4,
            "api",
            "ERROR",
            "client_err",
            "MQEngineDeadError: Engine loop is "
            "not running. Inspect the stacktrace to find the original error: "
            f"OutOfMemoryError('{oom[:60]}...').",
        )

    def uvicorn_shutdown(self, dt: float) -> Iterator[Item]:
        yield self.raw(dt, "api", UVICORN_SHUTTING_DOWN)
        yield self.raw(0.02, "api", UVICORN_WAITING_SHUTDOWN)
        yield self.raw(0.01, "api", UVICORN_SHUTDOWN_COMPLETE)
        yield self.raw(0.01, "api", uvicorn_finished(self.main_pid))

    def host_oom_kill(self) -> Iterator[Item]:
        """Kernel OOM killer picks the API server (host RAM)."""
        rng, unit, pid = self.rng, self.prof.unit, self.main_pid
        rss = rng.randrange(40_000_000, 90_000_000)
        yield self.kmsg(
            0.5,
            "4",
            "VLLM::EngineCor invoked oom-killer: gfp_mask=0x140cca"
            "(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0",
        )
        yield self.kmsg(
            0,
            "4",
            f"CPU: 17 PID: {self.core_pid} Comm: VLLM::EngineCor Not "
            "tainted 6.1.0-31-amd64 #1  Debian 6.1.128-1",
        )
        yield self.kmsg(
            0, "4", "Hardware name: Supermicro SYS-821GE-TNHR/X13DEG-OAD, BIOS 2.1 04/12/2024"
        )
        yield self.kmsg(
            0,
            "6",
            f"oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),"
            f"cpuset={unit},mems_allowed=0-1,oom_memcg=/system.slice/{unit},"
            f"task_memcg=/system.slice/{unit},task=vllm,pid={pid},uid=998",
        )
        yield self.kmsg(
            0,
            "3",
            f"Memory cgroup out of memory: Killed process {pid} (vllm) "
            f"total-vm:{rss + 31_337_000}kB, anon-rss:{rss}kB, file-rss:"
            f"{rng.randrange(90_000, 400_000)}kB, shmem-rss:"
            f"{rng.randrange(1_000, 9_000_000)}kB, UID:998 pgtables:"
            f"{rss // 500}kB oom_score_adj:0",
        )
        yield self.systemd(0.05, "oom")
        yield from self.fail_sequence("killed", "9/KILL", "oom-kill", 0.4)
        yield from self.boot(manual=False)

    def main_process_died(self, dt: float, code: str, status: str, result: str) -> Iterator[Item]:
        """PID 1's ``Main process exited, …`` and ``Failed with result '…'.``"""
        yield self.systemd(dt, "exited", code=code, exit=status, extra=exit_fields(code, status))
        yield self.systemd(0, "failed", result=result, extra={"UNIT_RESULT": result})

    def fail_sequence(self, code: str, status: str, result: str, dt: float) -> Iterator[Item]:
        """Main process died, Restart=on-failure schedules a restart (systemd 252 wording)."""
        yield from self.main_process_died(dt, code, status, result)
        yield self.consumed(0.01)
        self.n_restarts += 1
        yield self.systemd(
            30, "restart", n=str(self.n_restarts), extra={"N_RESTARTS": str(self.n_restarts)}
        )
        yield self.systemd(
            0,
            "stopped",
            extra={
                "JOB_TYPE": "restart",
                "JOB_RESULT": "done",
                "JOB_ID": str(self.rng.randrange(2000, 90000)),
            },
        )

    def planned_restart(self) -> Iterator[Item]:
        """``systemctl restart``: graceful stop, then a new run."""
        job = {"JOB_ID": str(self.rng.randrange(2000, 90000)), "JOB_TYPE": "restart"}
        yield self.systemd(0.5, "stopping", extra=job)
        yield self.log(0.01, "api", "INFO", "shutdown", HTTP_SHUTDOWN)
        yield from self.uvicorn_shutdown(0.05)
        yield self.systemd(2.5, "deactivated")
        yield self.systemd(0, "stopped", extra=job | {"JOB_RESULT": "done"})
        yield self.consumed(0)
        yield from self.boot(manual=True)

    def wedged_stop(self) -> Iterator[Item]:
        """``systemctl restart`` where the engine ignores SIGTERM."""
        job = {"JOB_ID": str(self.rng.randrange(2000, 90000)), "JOB_TYPE": "restart"}
        yield self.systemd(0.5, "stopping", extra=job)
        yield self.log(0.01, "api", "INFO", "shutdown", HTTP_SHUTDOWN)
        yield self.systemd(90, "stop_timeout")
        procs = [(self.main_pid, "vllm")]
        if self.prof.style != "v0":
            procs.append((self.core_pid, "VLLM::EngineCor"))
            procs += [(p, "VLLM::Worker_TP") for p in self.worker_pids]
        for pid, comm in procs:
            yield self.systemd(0, "killing", pid=str(pid), comm=comm)
        yield from self.exit_killed_stop(job)

    def exit_killed_stop(self, job: dict[str, str]) -> Iterator[Item]:
        yield from self.main_process_died(0.1, "killed", "9/KILL", "timeout")
        yield self.systemd(0, "stopped", extra=job | {"JOB_RESULT": "done"})
        yield self.consumed(0)
        yield from self.boot(manual=True)

    def consumed(self, dt: float) -> Item:
        """``Consumed … CPU time.`` for the run that just ended (about 1.7 cores busy)."""
        hours = max((self.t - self.started_at) / 3600 / SEC, 0.01)
        secs = self.rng.uniform(0.6, 1.4) * hours * 3600 * 1.7 + self.rng.uniform(30, 90)
        return self.systemd(
            dt, "consumed", cpu=_timespan(secs), extra={"CPU_USAGE_NSEC": str(int(secs * 1e9))}
        )


def _mmss(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m:02d}:{s:02d}"


# --------------------------------------------------------------------------- kernel noise


def kernel_noise(host: Host, stream: Stream, rng: random.Random, t0: int) -> Iterator[Item]:
    """Firewall drops, perf throttling and a rare Xid (no crash attached)."""
    t = t0
    while True:
        t += int(rng.expovariate(1.0) * 45 * SEC) + 1
        r = rng.random()
        if r < 0.9:
            text = (
                f"[UFW BLOCK] IN=eno1 OUT= MAC=3c:ec:ef:{rng.randrange(256):02x}:1a:2b:"
                f"00:1c:73:aa:bb:cc:08:00 SRC=203.0.113.{rng.randrange(1, 255)} "
                f"DST=10.20.0.{rng.randrange(2, 60)} LEN={rng.choice((40, 44, 52, 60))} "
                f"TOS=0x00 PREC=0x00 TTL={rng.randrange(40, 250)} ID={rng.randrange(65536)} "
                f"PROTO=TCP SPT={rng.randrange(1024, 65535)} "
                f"DPT={rng.choice((22, 23, 3389, 5900, 6379, 9200))} WINDOW=1024 RES=0x00 "
                "SYN URGP=0"
            )
            prio = "4"
        elif r < 0.99:
            text = (
                "perf: interrupt took too long (3135 > 3126), lowering "
                "kernel.perf_event_max_sample_rate to 63750"
            )
            prio = "6"
        else:
            text = (
                f"NVRM: Xid (PCI:0000:{rng.choice(('18', '2a', '3a', '5d'))}:00): 13, "
                "Graphics Exception: ESR 0x514730=0x20000000 0x514734=0x0 0x514728=0x4c1eb72 "
                "0x51472c=0x0"
            )
            prio = "3"
        mono = t - host.boot_us - 187
        yield (t, stream, text, {"PRIORITY": prio, "_SOURCE_MONOTONIC_TIMESTAMP": str(mono)})


# --------------------------------------------------------------------------- driver


def _sources(seed: int, hosts: int) -> list[Iterator[Item]]:
    rng = random.Random(seed)
    pools = Pools(rng)
    sources: list[Iterator[Item]] = []
    for h in range(hosts):
        host = make_host(rng, h)
        kstream = kernel_stream(host, rng)
        sources.append(kernel_noise(host, kstream, rng, START_US + rng.randrange(SEC)))
        for prof in PROFILES:
            svc = Service(host, prof, rng, pools, kstream, START_US + rng.randrange(SEC))
            sources.append(svc.life())
    return sources


def iter_lines(lines: int, seed: int = 7, hosts: int = 1) -> Iterator[bytes]:
    """The journal as JSON lines (without newline), realtime strictly increasing."""
    sources = _sources(seed, hosts)
    heap: list[tuple[int, int, Item]] = []
    for i, src in enumerate(sources):
        item = next(src)
        heap.append((item[0], i, item))
    heapq.heapify(heap)
    last = 0
    pop, push = heapq.heappop, heapq.heappush
    for _ in range(lines):
        t, i, (_, stream, msg, extra) = pop(heap)
        t = last = t if t > last else last + 1
        yield render(t, stream, msg, extra)
        item = next(sources[i])
        push(heap, (item[0], i, item))


def write_journal(path: pathlib.Path, lines: int, seed: int = 7, hosts: int = 1) -> None:
    """Write ``lines`` journal entries to ``path`` as ``journalctl -o json`` would."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    with tmp.open("wb", buffering=1 << 20) as f:
        buf: list[bytes] = []
        for line in iter_lines(lines, seed, hosts):
            buf.append(line)
            if len(buf) >= CHUNK_LINES:
                _flush(f.write, buf)
        _flush(f.write, buf)
    tmp.replace(path)


def _flush(write: Callable[[bytes], object], buf: list[bytes]) -> None:
    if buf:
        write(b"\n".join(buf) + b"\n")
        buf.clear()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--hosts", type=int, default=1)
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("bench/out/journal.jsonl"))
    args = parser.parse_args()
    start = time.perf_counter()
    write_journal(args.out, args.lines, args.seed, args.hosts)
    took = time.perf_counter() - start
    size = args.out.stat().st_size
    print(
        f"wrote {args.lines:,} lines, {size:,} bytes ({size / max(args.lines, 1):.0f} B/line) "
        f"to {args.out} in {took:.1f} s ({args.lines / took:,.0f} lines/s)"
    )


if __name__ == "__main__":
    main()
