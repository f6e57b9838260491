"""Write ``data/sample-vllm.journal.jsonl``, the journal the README's first command ingests.

What ``journalctl -u vllm-llama70b.service -o json`` would print on host ``gpu-node-03``
(Debian 12, systemd 252): Llama-3.1-70B-Instruct on vLLM 0.11.0 (V1 engine), tensor parallel 2
on two 80 GB H100s, ``--gpu-memory-utilization 0.97``.

* Run 1 leaves ``max_model_len`` at the model's 131072. After loading 65.7 GiB of weights per GPU
  only 9.53 GiB per GPU are left for the KV cache, one full-length request needs 20.00 GiB, and
  the EngineCore refuses to start. The API server exits 1, systemd
  records the failure and schedules a restart 30 s later (``RestartSec=30``).
* During those 30 s the operator adds ``--max-model-len 32768`` to the unit's environment file,
  so run 2 (new INVOCATION_ID) comes up, serves a few requests and is stopped with
  ``systemctl stop``.

vLLM 0.11 prefixes every line with a coloured ``(APIServer pid=…)``, ``(EngineCore_DP0 pid=…)`` or
``(Worker_TP<n> pid=…)`` tag, so nearly every MESSAGE is a byte array. The unit runs vLLM with
``--no-use-tqdm-on-load`` (no 30-line shard progress bar); the CUDA-graph progress bars remain.
The per-route ``Route: …`` lines vLLM prints at startup are left out to keep the sample short.

Deterministic: running the script again writes the same bytes.
"""

from __future__ import annotations

import calendar
import pathlib
import random
import time
from dataclasses import dataclass, field

import orjson

from advisor.sim.journald_format import (
    PID1_FIELDS,
    STDOUT_KEY_ORDER,
    SYSTEMD_MESSAGES,
    cursor,
    exit_fields,
    json_value,
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
    uvicorn_finished,
    uvicorn_started,
)

OUT = pathlib.Path(__file__).with_name("sample-vllm.journal.jsonl")
SEED = 20260304
HOST = "gpu-node-03"
UNIT = "vllm-llama70b.service"
STATUS = f"{UNIT} - vLLM Llama-3.1-70B-Instruct (TP2)"
MODEL = "meta-llama/Llama-3.1-70B-Instruct"
START_US = calendar.timegm((2026, 3, 4, 13, 20, 5)) * 1_000_000
BOOT_US = START_US - 2 * 86_400_000_000 - 3_712_554_019
SITE = "/opt/vllm/lib/python3.12/site-packages/vllm"
CYAN, RESET = "\x1b[1;36m", "\x1b[0;0m"
BASE_CMD = (
    f"/opt/vllm/bin/python3 /opt/vllm/bin/vllm serve {MODEL} --tensor-parallel-size 2 "
    "--gpu-memory-utilization 0.97 --no-use-tqdm-on-load"
)
GIB = 1024**3
KV_AVAILABLE_GIB = 9.53
KV_BYTES_PER_TOKEN = 80 * 4 * 128 * 2 * 2  # layers x KV heads per GPU x head dim x (K,V) x bf16

PID1_ORDER = (
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
    "JOB_ID",
    "JOB_TYPE",
    "JOB_RESULT",
    "EXIT_CODE",
    "EXIT_STATUS",
    "COMMAND",
    "UNIT_RESULT",
    "N_RESTARTS",
    "CPU_USAGE_NSEC",
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
    "_SOURCE_REALTIME_TIMESTAMP",
    "_BOOT_ID",
    "_MACHINE_ID",
    "_HOSTNAME",
)


def _hex(rng: random.Random) -> str:
    return f"{rng.getrandbits(128):032x}"


@dataclass
class Run:
    """One invocation of the unit: its ids, PIDs and the two stdio streams."""

    invocation: str
    cmdline: str
    api: int
    core: int
    workers: tuple[int, int]
    stdout_id: str
    stderr_id: str

    def prefix(self, proc: str) -> str:
        name, pid = {
            "api": ("APIServer", self.api),
            "core": ("EngineCore_DP0", self.core),
            "w0": ("Worker_TP0", self.workers[0]),
            "w1": ("Worker_TP1", self.workers[1]),
        }[proc]
        return f"{CYAN}({name} pid={pid}){RESET} "


@dataclass
class Journal:
    rng: random.Random
    boot_id: str
    machine_id: str
    seqnum_id: str
    t: int = START_US
    seq: int = 0x1C4F20
    lines: list[bytes] = field(default_factory=list)

    def advance(self, dt: float) -> int:
        """Move the clock dt seconds (plus a little jitter) ahead; the new realtime."""
        self.t += int(dt * 1_000_000) + self.rng.randrange(1, 900)
        return self.t

    def add(self, dt: float, fields: dict[str, str], order: tuple[str, ...], message: str) -> None:
        self.emit(self.advance(dt), fields, order, message)

    def emit(self, t: int, fields: dict[str, str], order: tuple[str, ...], message: str) -> None:
        assert t == self.t
        self.seq += 1 + (self.rng.randrange(1, 40) if self.rng.random() < 0.3 else 0)
        mono = self.t - BOOT_US
        entry: dict[str, object] = {
            "__CURSOR": cursor(self.seqnum_id, self.seq, self.boot_id, mono, self.t),
            "__REALTIME_TIMESTAMP": str(self.t),
            "__MONOTONIC_TIMESTAMP": str(mono),
        }
        values = fields | {
            "MESSAGE": message,
            "_BOOT_ID": self.boot_id,
            "_MACHINE_ID": self.machine_id,
            "_HOSTNAME": HOST,
        }
        if "_SOURCE_REALTIME_TIMESTAMP" in values:
            values["_SOURCE_REALTIME_TIMESTAMP"] = str(self.t - self.rng.randrange(20, 90))
        for key in self._order(order):
            if key in values:
                entry[key] = json_value(values[key]) if key == "MESSAGE" else values[key]
        self.lines.append(orjson.dumps(entry))

    def _order(self, order: tuple[str, ...]) -> list[str]:
        """Key order of journalctl output varies a little between entries."""
        keys = list(order)
        if self.rng.random() < 0.2:
            i = self.rng.randrange(len(keys) - 1)
            keys[i], keys[i + 1] = keys[i + 1], keys[i]
        return keys


# --------------------------------------------------------------------------- entry helpers


def systemd(
    j: Journal, dt: float, kind: str, run: Run, extra: dict[str, str] | None = None, **fmt: str
) -> None:
    message = SYSTEMD_MESSAGES[kind]
    fields = {
        **PID1_FIELDS,
        **message.fields(),
        "UNIT": UNIT,
        "INVOCATION_ID": run.invocation,
        "_SOURCE_REALTIME_TIMESTAMP": "",
    } | (extra or {})
    j.add(dt, fields, PID1_ORDER, message.fmt.format(status=STATUS, unit=UNIT, **fmt))


def consumed(j: Journal, run: Run, nsec: str, cpu: str) -> None:
    """``Consumed … CPU time.`` at PRIORITY 6, as the sample has always had it (the catalogue
    says 5, systemd's level once a run has used more than 1 s of CPU time)."""
    systemd(j, 0.0, "consumed", run, {"PRIORITY": "6", "CPU_USAGE_NSEC": nsec}, cpu=cpu)


def _stream(run: Run, stream_id: str) -> dict[str, str]:
    return {
        "_TRANSPORT": "stdout",
        "PRIORITY": "6",
        "SYSLOG_FACILITY": "3",
        "SYSLOG_IDENTIFIER": "vllm",
        "_STREAM_ID": stream_id,
        "_PID": str(run.api),
        "_UID": "998",
        "_GID": "998",
        "_COMM": "vllm",
        "_EXE": "/usr/bin/python3.12",
        "_CMDLINE": run.cmdline,
        "_CAP_EFFECTIVE": "0",
        "_SELINUX_CONTEXT": "unconfined",
        "_SYSTEMD_CGROUP": f"/system.slice/{UNIT}",
        "_SYSTEMD_UNIT": UNIT,
        "_SYSTEMD_SLICE": "system.slice",
        "_SYSTEMD_INVOCATION_ID": run.invocation,
    }


def log(j: Journal, dt: float, run: Run, proc: str, level: str, src: str, text: str) -> None:
    """A vLLM logger record (stdout): prefix, level, local time, [file:line], message."""
    t = j.advance(dt)
    j.emit(
        t,
        _stream(run, run.stdout_id),
        STDOUT_KEY_ORDER,
        f"{run.prefix(proc)}{level} {_stamp(t)} [{src}] {text}",
    )


def raw(j: Journal, dt: float, run: Run, proc: str, text: str) -> None:
    """A line the process wrote to stderr itself (tracebacks, uvicorn, tqdm)."""
    j.add(dt, _stream(run, run.stderr_id), STDOUT_KEY_ORDER, run.prefix(proc) + text)


def _stamp(t_us: int) -> str:
    return time.strftime("%m-%d %H:%M:%S", time.gmtime(t_us // 1_000_000))


def new_run(j: Journal, cmdline: str, api_pid: int) -> Run:
    rng = j.rng
    core = api_pid + rng.randrange(90, 140)
    w0 = core + rng.randrange(40, 70)
    return Run(_hex(rng), cmdline, api_pid, core, (w0, w0 + 1), _hex(rng), _hex(rng))


# --------------------------------------------------------------------------- shared startup


def engine_config(max_len: int) -> str:
    return (
        f"Initializing a V1 LLM engine (v0.11.0) with config: model='{MODEL}', "
        f"speculative_config=None, tokenizer='{MODEL}', skip_tokenizer_init=False, "
        "tokenizer_mode=auto, revision=None, trust_remote_code=False, dtype=torch.bfloat16, "
        f"max_seq_len={max_len}, download_dir=None, load_format=auto, "
        "tensor_parallel_size=2, pipeline_parallel_size=1, data_parallel_size=1, "
        "disable_custom_all_reduce=False, quantization=None, enforce_eager=False, "
        "kv_cache_dtype=auto, device_config=cuda, seed=0, "
        f"served_model_name={MODEL}, enable_prefix_caching=True, "
        "chunked_prefill_enabled=True, pooler_config=None, "
        "compilation_config={'level': 3, 'cudagraph_mode': "
        "<CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>, 'max_capture_size': 512}"
    )


def startup_until_kv(j: Journal, run: Run, max_len: int | None, warm: bool) -> None:
    """From the API server's first line to the workers' KV-cache budget (identical in both runs)."""
    args = (
        f"{{'model_tag': '{MODEL}', 'model': '{MODEL}', 'use_tqdm_on_load': False, "
        "'tensor_parallel_size': 2, 'gpu_memory_utilization': 0.97}"
    )
    if max_len:
        args = args.replace("'use_tqdm_on_load'", f"'max_model_len': {max_len}, 'use_tqdm_on_load'")
    model_len = max_len or 131072
    log(j, 6.4, run, "api", "INFO", "__init__.py:216", "Automatically detected platform cuda.")
    log(j, 1.3, run, "api", "INFO", "api_server.py:1839", "vLLM API server version 0.11.0")
    log(j, 0.0, run, "api", "INFO", "utils.py:233", f"non-default args: {args}")
    log(j, 0.4, run, "api", "INFO", "model.py:547", "Resolved architecture: LlamaForCausalLM")
    log(j, 0.0, run, "api", "INFO", "model.py:1510", f"Using max model len {model_len}")
    log(
        j,
        0.1,
        run,
        "api",
        "INFO",
        "scheduler.py:205",
        "Chunked prefill is enabled with max_num_batched_tokens=8192.",
    )
    log(j, 6.1, run, "core", "INFO", "__init__.py:216", "Automatically detected platform cuda.")
    log(j, 0.2, run, "core", "INFO", "core.py:77", engine_config(model_len))
    for r in (0, 1):
        log(
            j,
            4.8 - 4.6 * r,
            run,
            f"w{r}",
            "INFO",
            "parallel_state.py:1208",
            f"rank {r} in world size 2 is assigned as DP rank 0, PP rank 0, TP rank {r}, "
            f"EP rank {r}",
        )
    for r in (0, 1):
        log(
            j,
            0.3,
            run,
            f"w{r}",
            "INFO",
            "gpu_model_runner.py:2602",
            f"Starting to load model {MODEL}...",
        )
    for r in (0, 1):
        log(j, 0.4, run, f"w{r}", "INFO", "cuda.py:366", "Using Flash Attention backend.")
    load = (14.87, 15.02) if warm else (38.41, 38.96)
    for r in (0, 1):
        log(
            j,
            load[r] if r == 0 else 0.6,
            run,
            f"w{r}",
            "INFO",
            "default_loader.py:267",
            f"Loading weights took {load[r]:.2f} seconds",
        )
        log(
            j,
            0.3,
            run,
            f"w{r}",
            "INFO",
            "gpu_model_runner.py:2653",
            f"Model loading took 65.7236 GiB and {load[r] + 0.813702:.6f} seconds",
        )
    compile_lines(j, run, warm)
    for r in (0, 1):
        log(
            j,
            3.9 if r == 0 else 0.2,
            run,
            f"w{r}",
            "INFO",
            "gpu_worker.py:298",
            f"Available KV cache memory: {KV_AVAILABLE_GIB:.2f} GiB",
        )


def compile_lines(j: Journal, run: Run, warm: bool) -> None:
    cache = "/home/vllm/.cache/vllm/torch_compile_cache/5f0c3b9e2a"
    for r in (0, 1):
        log(
            j,
            1.6,
            run,
            f"w{r}",
            "INFO",
            "backends.py:548",
            f"Using cache directory: {cache}/rank_{r}_0/backbone for vLLM's torch.compile",
        )
    for r, took in enumerate((36.87, 37.40) if not warm else (7.12, 7.31)):
        text = (
            f"Directly load the compiled graph(s) for dynamic shape from the cache, took "
            f"{took - 1.5:.3f} s"
            if warm
            else f"Compiling a graph for dynamic shape takes {took - 8.9:.2f} s"
        )
        log(j, took - 2.0 if r == 0 else 0.5, run, f"w{r}", "INFO", "backends.py:194", text)
        log(
            j,
            0.3,
            run,
            f"w{r}",
            "INFO",
            "monitor.py:34",
            f"torch.compile takes {took:.2f} s in total",
        )


# --------------------------------------------------------------------------- run 1: KV OOM


def kv_error_text() -> str:
    needed = 131072 * KV_BYTES_PER_TOKEN / GIB
    max_len = int(KV_AVAILABLE_GIB * GIB // (KV_BYTES_PER_TOKEN * 16)) * 16
    return (
        "ValueError: To serve at least one request with the models's max seq len (131072), "
        f"({needed:.2f} GiB KV cache is needed, which is larger than the available KV cache "
        f"memory ({KV_AVAILABLE_GIB:.2f} GiB). Based on the available memory, the estimated "
        f"maximum model length is {max_len}. Try increasing `gpu_memory_utilization` or "
        "decreasing `max_model_len` when initializing the engine."
    )


def engine_core_failure(j: Journal, run: Run) -> None:
    tb = [
        ENGINE_CORE_FAILED,
        "Traceback (most recent call last):",
        f'  File "{SITE}/v1/engine/core.py", line 699, in run_engine_core',
        "    engine_core = EngineCoreProc(*args, **kwargs)",
        "                  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        f'  File "{SITE}/v1/engine/core.py", line 92, in __init__',
        "    self._initialize_kv_caches(vllm_config)",
        f'  File "{SITE}/v1/engine/core.py", line 199, in _initialize_kv_caches',
        "    kv_cache_configs = get_kv_cache_configs(vllm_config, kv_cache_specs,",
        f'  File "{SITE}/v1/core/kv_cache_utils.py", line 716, in check_enough_kv_cache_memory',
        "    raise ValueError(",
        kv_error_text(),
    ]
    for i, text in enumerate(tb):
        log(j, 0.4 if i == 0 else 0.0, run, "core", "ERROR", "core.py:708", text)
    for text in (
        "Process EngineCore_DP0:",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.12/multiprocessing/process.py", line 314, in _bootstrap',
        "    self.run()",
        f'  File "{SITE}/v1/engine/core.py", line 712, in run_engine_core',
        "    raise e",
        kv_error_text(),
    ):
        raw(j, 0.02, run, "core", text)
    for text in (
        "Traceback (most recent call last):",
        '  File "/opt/vllm/bin/vllm", line 10, in <module>',
        "    sys.exit(main())",
        f'  File "{SITE}/entrypoints/cli/main.py", line 54, in main',
        "    args.dispatch_function(args)",
        f'  File "{SITE}/v1/engine/utils.py", line 880, in wait_for_engine_startup',
        '    raise RuntimeError("Engine core initialization failed. "',
        engine_init_failed("{'EngineCore_DP0': 1}"),
    ):
        raw(j, 0.9 if text.startswith("Traceback") else 0.0, run, "api", text)


def run_one(j: Journal, run: Run) -> None:
    job = {"JOB_ID": "3112", "JOB_TYPE": "start"}
    systemd(j, 0.0, "starting", run, job)
    systemd(j, 0.01, "started", run, job | {"JOB_RESULT": "done"})
    startup_until_kv(j, run, None, warm=False)
    engine_core_failure(j, run)
    systemd(
        j, 2.1, "exited", run, exit_fields("exited", "1/FAILURE"), code="exited", exit="1/FAILURE"
    )
    systemd(j, 0.0, "failed", run, {"UNIT_RESULT": "exit-code"}, result="exit-code")
    consumed(j, run, "192844131000", "3min 12.844s")
    systemd(j, 30.0, "restart", run, {"N_RESTARTS": "1"}, n="1")
    systemd(j, 0.0, "stopped", run, {"JOB_ID": "3187", "JOB_TYPE": "restart", "JOB_RESULT": "done"})


# --------------------------------------------------------------------------- run 2: healthy


def tqdm_refreshes(desc: str, total: int, seconds: float, points: tuple[int, ...]) -> str:
    """One journal entry holding several ``\\r``-separated tqdm refreshes (default bar)."""
    parts = []
    for n in points:
        elapsed = seconds * n / total
        frac = n / total
        full, part = divmod(int(frac * 80), 8)
        bar = "█" * full + (" ▏▎▍▌▋▊▉"[part] if full < 10 else "")
        bar = bar.ljust(10)
        if n == 0:
            right = f"0/{total} [00:00<?, ?it/s]"
        else:
            rate = n / elapsed
            left = (total - n) / rate
            right = f"{n}/{total} [00:{int(elapsed):02d}<00:{int(left):02d}, {rate:.2f}it/s]"
        parts.append(f"\r{desc}: {frac * 100:3.0f}%|{bar}| {right}")
    return "".join(parts)


def healthy_startup_tail(j: Journal, run: Run) -> None:
    tokens = int(KV_AVAILABLE_GIB * GIB // (KV_BYTES_PER_TOKEN * 16)) * 16
    log(
        j,
        0.3,
        run,
        "core",
        "INFO",
        "kv_cache_utils.py:1087",
        f"GPU KV cache size: {tokens:,} tokens",
    )
    log(
        j,
        0.0,
        run,
        "core",
        "INFO",
        "kv_cache_utils.py:1091",
        f"Maximum concurrency for 32,768 tokens per request: {tokens / 32768:.2f}x",
    )
    points = (0, 6, 13, 20, 27, 34, 41, 48, 55, 62, 67)
    raw(
        j,
        4.6,
        run,
        "w0",
        tqdm_refreshes("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)", 67, 4.41, points),
    )
    raw(j, 2.7, run, "w0", tqdm_refreshes("Capturing CUDA graphs (decode, FULL)", 67, 2.63, points))
    for r in (0, 1):
        log(
            j,
            0.4,
            run,
            f"w{r}",
            "INFO",
            "gpu_model_runner.py:3480",
            "Graph capturing finished in 8 secs, took 1.12 GiB",
        )
    log(
        j,
        0.2,
        run,
        "core",
        "INFO",
        "core.py:210",
        "init engine (profile, create kv cache, warmup model) took 41.87 seconds",
    )
    log(
        j,
        0.6,
        run,
        "api",
        "INFO",
        "loggers.py:147",
        "Engine 000: vllm cache_config_info "
        f"with initialization after num_gpu_blocks is: {tokens // 16}",
    )
    log(j, 0.1, run, "api", "INFO", "api_server.py:1634", "Supported_tasks: ['generate']")
    log(
        j,
        0.2,
        run,
        "api",
        "INFO",
        "api_server.py:1912",
        "Starting vLLM API server 0 on http://0.0.0.0:8000",
    )
    raw(j, 0.1, run, "api", uvicorn_started(run.api))
    raw(j, 0.0, run, "api", UVICORN_WAITING)
    raw(j, 0.02, run, "api", UVICORN_READY)


def serve_and_stop(j: Journal, run: Run) -> None:
    for dt, client, line in (
        (14.2, "10.20.0.31:40112", '"GET /health HTTP/1.1" 200 OK'),
        (95.5, "10.20.0.44:52806", '"POST /v1/chat/completions HTTP/1.1" 200 OK'),
        (3.1, "10.20.0.44:52818", '"POST /v1/chat/completions HTTP/1.1" 200 OK'),
    ):
        raw(j, dt, run, "api", f"INFO:     {client} - {line}")
    log(
        j,
        7.0,
        run,
        "api",
        "INFO",
        "loggers.py:123",
        "Engine 000: Avg prompt throughput: "
        "418.3 tokens/s, Avg generation throughput: 86.9 tokens/s, Running: 1 reqs, Waiting: 0 "
        "reqs, GPU KV cache usage: 3.4%, Prefix cache hit rate: 41.7%",
    )
    raw(
        j,
        2.4,
        run,
        "api",
        'INFO:     10.20.0.51:33470 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    )
    log(
        j,
        7.6,
        run,
        "api",
        "INFO",
        "loggers.py:123",
        "Engine 000: Avg prompt throughput: "
        "0.0 tokens/s, Avg generation throughput: 31.2 tokens/s, Running: 0 reqs, Waiting: 0 "
        "reqs, GPU KV cache usage: 0.0%, Prefix cache hit rate: 44.9%",
    )
    job = {"JOB_ID": "3402", "JOB_TYPE": "stop"}
    systemd(j, 1021.3, "stopping", run, job)
    log(j, 0.01, run, "api", "INFO", "launcher.py:99", HTTP_SHUTDOWN)
    raw(j, 0.02, run, "api", UVICORN_SHUTTING_DOWN)
    raw(j, 0.1, run, "api", UVICORN_WAITING_SHUTDOWN)
    raw(j, 0.01, run, "api", UVICORN_SHUTDOWN_COMPLETE)
    raw(j, 0.01, run, "api", uvicorn_finished(run.api))
    systemd(j, 3.4, "deactivated", run)
    systemd(j, 0.0, "stopped", run, job | {"JOB_RESULT": "done"})
    consumed(j, run, "351077402000", "5min 51.077s")


def run_two(j: Journal, run: Run) -> None:
    systemd(j, 0.0, "started", run, {"JOB_ID": "3187", "JOB_TYPE": "start", "JOB_RESULT": "done"})
    startup_until_kv(j, run, 32768, warm=True)
    healthy_startup_tail(j, run)
    serve_and_stop(j, run)


def build() -> list[bytes]:
    rng = random.Random(SEED)
    j = Journal(rng, boot_id=_hex(rng), machine_id=_hex(rng), seqnum_id=_hex(rng))
    first = new_run(j, BASE_CMD, 31507)
    second = new_run(j, BASE_CMD + " --max-model-len 32768", 33864)
    run_one(j, first)
    run_two(j, second)
    return j.lines


def main() -> None:
    lines = build()
    OUT.write_bytes(b"\n".join(lines) + b"\n")
    print(f"wrote {len(lines)} entries to {OUT}")


if __name__ == "__main__":
    main()
