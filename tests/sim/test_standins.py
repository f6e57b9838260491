"""The stand-in SGLang, TGI and llama-server processes (advisor.sim.sglang_cli, tgi_cli,
llamacpp_cli), run the way their real engines are launched — through the commands
``write_standins`` writes: the argv they record, the values their configuration echo states, a
configuration that fits serving until SIGTERM and stopping as the engine stops, one that does not
fit failing as the engine fails, flags read from the engines' variables, and what ``advisor
classify`` makes of each failure."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from advisor.sim import llamacpp_cli, sglang_cli, tgi_cli
from advisor.sim.standin import Standins, write_standins
from tests.conftest import ROOT

SPEED = "100"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
GGUF = "/models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
TIMEOUT_S = 30.0
# The variables each engine reads, cleared so that the runner's environment cannot leak in.
ENGINE_VARS = (
    "NO_COLOR",
    "LOG_COLORIZE",
    "CUDA_VISIBLE_DEVICES",
    *(name.upper() for name in tgi_cli.KINDS),
    *(var for _, var, _ in llamacpp_cli.OPTIONS.values()),
)
MEMORY_LABELS = {"kv_cache_oom", "oom", "runtime_oom", "sampler_warmup_oom"}


class Server:
    """A stand-in process, its output (stdout and stderr, in order) read as it comes."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str]) -> None:
        self.proc = subprocess.Popen(
            list(argv),
            env=dict(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            encoding="utf-8",
        )
        self.lines: list[str] = []
        self._seen = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._seen:
                self.lines.append(line.rstrip("\n"))
                self._seen.notify_all()
        with self._seen:
            self._seen.notify_all()

    @property
    def text(self) -> str:
        with self._seen:
            return "\n".join(self.lines)

    @property
    def plain(self) -> str:
        return ANSI.sub("", self.text)

    def wait_for(self, needle: str) -> str:
        """The first line holding ``needle`` (colour codes removed), once it is printed."""
        deadline = time.monotonic() + TIMEOUT_S
        with self._seen:
            while True:
                for line in self.lines:
                    if needle in ANSI.sub("", line):
                        return ANSI.sub("", line)
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    raise AssertionError(f"{needle!r} never came:\n{self.plain[-3000:]}")
                self._seen.wait(min(left, 0.5))

    def finish(self) -> int:
        """The exit status (negative: the signal that ended it), every line read."""
        status = self.proc.wait(timeout=TIMEOUT_S)
        self._reader.join(timeout=TIMEOUT_S)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return status

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.finish()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.finish()


@pytest.fixture(scope="module")
def standins(tmp_path_factory: pytest.TempPathFactory) -> Standins:
    return write_standins(tmp_path_factory.mktemp("standins"))


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("ADVISOR_SIM_") and k not in ENGINE_VARS and k != "PYTHONPATH"
    }
    return base | {
        "ADVISOR_SIM_SPEED": SPEED,
        "ADVISOR_SIM_CLAIMS": str(tmp_path / "claims"),
        "ADVISOR_SIM_ARGV_LOG": str(tmp_path / "argv.jsonl"),
        "ADVISOR_SIM_ARGV_ENV": "MODEL_ID,MAX_BATCH_PREFILL_TOKENS,LLAMA_ARG_CTX_SIZE",
    }


@pytest.fixture
def started() -> Iterator[list[Server]]:
    servers: list[Server] = []
    yield servers
    for server in servers:
        server.kill()


def run(started: list[Server], argv: Sequence[str], env: Mapping[str, str]) -> Server:
    server = Server(argv, env)
    started.append(server)
    return server


def sglang(args: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "sglang.launch_server", *args]


def records(tmp_path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (tmp_path / "argv.jsonl").read_text().splitlines()]


def classify(tmp_path: Path, text: str) -> dict[str, object]:
    log = tmp_path / "captured.log"
    log.write_text(text + "\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "advisor", "classify", "--json", str(log)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, object] = json.loads(done.stdout)
    return result


def facts(result: Mapping[str, object]) -> dict[str, object]:
    stated = result["facts"]
    assert isinstance(stated, dict)
    return {k: v for k, v in stated.items() if v is not None}


# ------------------------------------------------------------------ the launchers
def test_write_standins_makes_the_engines_commands(standins: Standins) -> None:
    for script in (standins.tgi, standins.llama_server):
        assert os.access(script, os.X_OK)
        assert script.read_text().startswith(f"#!{sys.executable}\n")
    assert standins.tgi.name == "text-generation-launcher"
    assert standins.llama_server.name == "llama-server"
    py = standins.pythonpath
    assert standins.sglang == py / "sglang" / "launch_server.py"
    assert standins.vllm_api_server == py / "vllm" / "entrypoints" / "openai" / "api_server.py"
    for package in ("sglang", "vllm", "vllm/entrypoints", "vllm/entrypoints/openai"):
        assert (py / package / "__init__.py").is_file()
    assert str(ROOT) in standins.sglang.read_text()


def test_the_vllm_api_server_module_runs_the_vllm_stand_in_with_model_as_a_flag(
    standins: Standins, env: dict[str, str], started: list[Server], tmp_path: Path
) -> None:
    args = ["--model", MODEL, "--max-model-len", "8192", "--max-num-seqs", "64"]
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", *args]
    server = run(started, argv, env | {"PYTHONPATH": str(standins.pythonpath)})
    echo = server.wait_for("non-default args:")
    assert f"'model': '{MODEL}'" in echo and "'max_model_len': 8192" in echo
    server.wait_for("Application startup complete.")
    assert server.stop() == 0
    assert records(tmp_path)[-1]["argv"] == [str(standins.vllm_api_server), *args]


# ------------------------------------------------------------------ SGLang
def test_sglang_parses_its_flags_and_aliases_as_argparse_does() -> None:
    for flags in (["--model-path", "m"], ["--model", "m"]):
        assert sglang_cli.parse_args(flags)["model_path"] == "m"
    for tp in ("--tp-size", "--tensor-parallel-size", "--tp"):
        assert sglang_cli.parse_args(["--model", "m", tp, "4"])["tp_size"] == 4
    given = sglang_cli.parse_args(
        ["--model", "m", "--mem-fraction", "0.7", "--cuda-graph-bs", "1", "2", "--x", "y"]
    )
    assert given == {"model_path": "m", "mem_fraction_static": 0.7, "cuda_graph_bs": [1, 2]}
    assert sglang_cli.parse_args(["--model=m", "--disable-cuda-graph"])["disable_cuda_graph"]
    with pytest.raises(ValueError, match="required: --model-path"):
        sglang_cli.parse_args(["--tp", "2"])
    with pytest.raises(ValueError, match="invalid value: 'lots'"):
        sglang_cli.parse_args(["--model", "m", "--context-length", "lots"])
    args = sglang_cli.post_init({"model_path": "m"}, 96.0)
    assert (args["mem_fraction_static"], args["chunked_prefill_size"]) == (0.87, 8192)
    assert args["tokenizer_path"] == args["served_model_name"] == "m"


def test_sglang_fits_comes_up_and_dies_of_sigkill_after_sigterm_as_0_5_2_does(
    standins: Standins, env: dict[str, str], started: list[Server], tmp_path: Path
) -> None:
    args = [
        "--model", MODEL, "--tp", "2", "--mem-fraction-static", "0.85",
        "--context-length", "32768", "--max-running-requests", "64", "--cuda-graph-max-bs",
        "32", "--chunked-prefill-size", "4096", "--port", "30001", "--enable-foo", "bar",
    ]  # fmt: skip
    sim = env | {"PYTHONPATH": str(standins.pythonpath), "ADVISOR_SIM_WEIGHTS_GIB": "160"}
    server = run(started, sglang(args), sim)
    ready = server.wait_for("The server is fired up and ready to roll!")
    assert re.fullmatch(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] The server is fired up.*", ready)
    echo = server.wait_for("server_args=ServerArgs(")
    assert echo.split("] ", 1)[1].startswith(f"server_args=ServerArgs(model_path='{MODEL}', ")
    for stated in (
        "mem_fraction_static=0.85", "context_length=32768", "max_running_requests=64",
        "cuda_graph_max_bs=32", "chunked_prefill_size=4096", "tp_size=2", "port=30001",
    ):  # fmt: skip
        assert f", {stated}," in echo
    budget = server.wait_for("max_total_num_tokens=")
    tokens = re.search(r" TP0\] max_total_num_tokens=(\d+), chunked_prefill_size=4096, ", budget)
    assert tokens is not None and int(tokens.group(1)) > 0
    assert re.search(r"max_running_requests=64, context_len=32768, available_gpu_mem=", budget)
    assert " TP1] Load weight end. type=LlamaForCausalLM" in server.plain
    (record,) = records(tmp_path)
    assert record["argv"] == [str(standins.sglang), *args] and record["engine"] == "sglang"
    claim = json.loads((tmp_path / "claims" / f"{record['pid']}.json").read_text())
    assert set(claim["gpus"]) == {"0", "1"} and min(claim["gpus"].values()) > 80 * 2**30
    assert server.stop() == -signal.SIGKILL
    tail = server.plain.splitlines()[-2:]
    assert tail[0].endswith(
        "] SIGTERM received. signum=None frame=None. Draining requests and shutting down..."
    )
    assert tail[1].endswith("] Gracefully exiting... remaining number of requests 0")
    result = classify(tmp_path, server.text)
    assert result["label"] == "healthy"
    assert facts(result) | {
        "engine": "sglang",
        "mem_fraction_static": 0.85,
        "max_model_len": 32768,
        "max_num_seqs": 64,
        "tensor_parallel_size": 2,
        "kv_cache_tokens": int(tokens.group(1)),
    } == facts(result)


@pytest.mark.parametrize(("fraction", "fits"), [("0.84", True), ("0.8", False)])
def test_sglang_fails_when_the_static_fraction_leaves_no_kv_pool(
    standins: Standins,
    env: dict[str, str],
    started: list[Server],
    tmp_path: Path,
    fraction: str,
    fits: bool,
) -> None:
    """G = 96, W = 80: mem_fraction_static × 95.5 − 80 > 0 from 0.838 on."""
    args = ["--model-path", MODEL, "--mem-fraction-static", fraction, "--context-length", "32768"]
    sim = env | {"PYTHONPATH": str(standins.pythonpath), "ADVISOR_SIM_WEIGHTS_GIB": "80"}
    server = run(started, sglang(args), sim)
    if fits:
        server.wait_for("The server is fired up and ready to roll!")
        return
    assert server.finish() == -signal.SIGKILL
    lines = server.plain.splitlines()
    start = next(i for i, line in enumerate(lines) if "] Scheduler hit an exception: " in line)
    assert lines[start].endswith("Scheduler hit an exception: Traceback (most recent call last):")
    assert lines[start + 1].startswith('  File "/usr/local/lib/python3.12/dist-packages/sglang/')
    assert lines[-3:-1] == [
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
        "",
    ]
    assert lines[-1].endswith(
        "] Received sigquit from a child process. It usually means the child failed."
    )
    assert "The server is fired up" not in server.plain
    result = classify(tmp_path, server.text)
    assert (result["label"], result["corroborated"]) == ("kv_cache_oom", True)
    expected = {"engine": "sglang", "mem_fraction_static": 0.8, "max_model_len": 32768}
    assert facts(result) | expected == facts(result)


def test_sglang_dies_of_sigterm_before_its_handler_is_installed(
    standins: Standins, env: dict[str, str], started: list[Server], tmp_path: Path
) -> None:
    sim = env | {"PYTHONPATH": str(standins.pythonpath), "ADVISOR_SIM_SPEED": "1"}
    server = run(started, sglang(["--model", MODEL]), sim)
    deadline = time.monotonic() + TIMEOUT_S
    while not (tmp_path / "argv.jsonl").exists() and time.monotonic() < deadline:
        time.sleep(0.01)  # the argv line is the process's first act
    assert server.stop() == -signal.SIGTERM


def test_sglang_refuses_a_command_line_without_a_model(
    standins: Standins, env: dict[str, str], started: list[Server]
) -> None:
    server = run(started, sglang(["--tp", "2"]), env | {"PYTHONPATH": str(standins.pythonpath)})
    assert server.finish() == 2
    assert "launch_server.py: error: the following arguments are required" in server.text


# ------------------------------------------------------------------ TGI
def test_tgi_reads_flags_then_their_variables_as_clap_does() -> None:
    variables = {"MODEL_ID": "m", "MAX_BATCH_PREFILL_TOKENS": "16384", "NUM_SHARD": "2"}
    args = tgi_cli.parse_args(
        ["--max-batch-prefill-tokens", "8192", "--max-input-length=1000", "-p", "8081"], variables
    )
    assert (args["model_id"], args["max_batch_prefill_tokens"], args["num_shard"]) == ("m", 8192, 2)
    assert (args["max_input_length"], args["max_input_tokens"], args["port"]) == (1000, None, 8081)
    assert (args["cuda_memory_fraction"], args["trust_remote_code"]) == (1.0, False)
    origins = ["--cors-allow-origin", "a", "--cors-allow-origin", "b", "--trust-remote-code"]
    args = tgi_cli.parse_args([*origins, "--cuda-graphs", "1,2"], {"TRUST_REMOTE_CODE": "false"})
    assert (args["cors_allow_origin"], args["cuda_graphs"]) == (["a", "b"], [1, 2])
    assert args["trust_remote_code"] is True
    assert tgi_cli.parse_args([], {"TRUST_REMOTE_CODE": "true"})["trust_remote_code"] is True
    with pytest.raises(ValueError, match="invalid value 'x' for '--num-shard'"):
        tgi_cli.parse_args(["--num-shard", "x"], {})
    both = tgi_cli.parse_args(["--max-input-tokens", "10", "--max-input-length", "10"], {})
    assert tgi_cli.invalid(both) is not None and tgi_cli.invalid(args) is None


def test_tgi_pretty_prints_its_args_as_rust_does() -> None:
    args = tgi_cli.parse_args(["--model-id", 'a"b', "--num-shard", "2", "--cuda-graphs", "1,2"], {})
    text = tgi_cli.args_debug(args)
    assert text.startswith('Args {\n    model_id: "a\\"b",\n    revision: None,\n')
    assert "    num_shard: Some(\n        2,\n    ),\n" in text
    assert (
        "    cuda_graphs: Some(\n        [\n            1,\n            2,\n        ],\n    ),\n"
        in text
    )
    assert "    cors_allow_origin: [],\n" in text and "    usage_stats: On,\n" in text
    assert text.endswith("    graceful_termination_timeout: 90,\n}")


def test_tgi_comes_up_connected_and_stops_on_sigterm(
    standins: Standins, env: dict[str, str], started: list[Server], tmp_path: Path
) -> None:
    args = ["--num-shard", "2", "--max-batch-prefill-tokens", "8192", "--max-input-length", "1000"]
    variables = {
        "MODEL_ID": MODEL,
        "MAX_BATCH_PREFILL_TOKENS": "16384",
        "CUDA_MEMORY_FRACTION": "0.9",
    }
    server = run(started, [str(standins.tgi), *args], env | variables)
    connected = server.wait_for("Connected")
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z  INFO text_generation_router::server: "
        r"router/src/server\.rs:2302: Connected",
        connected,
    )
    assert "\x1b[2mrouter/src/server.rs\x1b[0m" in server.text  # coloured as TGI is by default
    banner = server.wait_for("Args {")
    assert banner.endswith("Z  INFO text_generation_launcher: Args {")
    plain = server.plain
    assert f'    model_id: "{MODEL}",\n' in plain
    assert "    max_batch_prefill_tokens: Some(\n        8192,\n    ),\n" in plain
    assert "    max_input_length: Some(\n        1000,\n    ),\n" in plain
    assert "    cuda_memory_fraction: 0.9,\n" in plain
    assert "INFO shard-manager: text_generation_launcher: Shard ready in " in plain
    assert plain.count("Starting shard rank=") == 2
    (record,) = records(tmp_path)
    assert record["argv"] == [str(standins.tgi), *args] and record["engine"] == "tgi"
    assert record["env"] == {
        "MODEL_ID": MODEL,
        "MAX_BATCH_PREFILL_TOKENS": "16384",
        "LLAMA_ARG_CTX_SIZE": None,
    }
    assert server.stop() == 0
    lines = server.plain.splitlines()
    first = next(i for i, line in enumerate(lines) if "Terminating webserver" in line)
    tail = [line.split("Z ", 1)[1] for line in lines[first:]]
    assert tail[:4] == [
        " INFO text_generation_launcher: Terminating webserver",
        " INFO text_generation_launcher: Waiting for webserver to gracefully shutdown",
        " INFO text_generation_router::server: router/src/server.rs:2399: signal received, "
        "starting graceful shutdown",
        " INFO text_generation_launcher: webserver terminated",
    ]
    assert tail[4] == " INFO text_generation_launcher: Shutting down shards"
    assert tail[-1] == " INFO shard-manager: text_generation_launcher: shard terminated rank=1"
    assert len(tail) == 11
    result = classify(tmp_path, server.text)
    assert result["label"] == "healthy"
    expected = {"engine": "tgi", "model": MODEL, "tensor_parallel_size": 2}
    assert facts(result) | expected == facts(result)


@pytest.mark.parametrize(("prefill", "fits"), [("8192", True), ("16384", False)])
def test_tgi_warm_up_fails_when_the_prefill_batch_does_not_fit(
    standins: Standins,
    env: dict[str, str],
    started: list[Server],
    tmp_path: Path,
    prefill: str,
    fits: bool,
) -> None:
    """An 8B model's KV at 90 GiB of weights: 5.5 GiB left hold 10 000 prefill tokens."""
    plain = {"NO_COLOR": "1", "LOG_COLORIZE": "1", "ADVISOR_SIM_WEIGHTS_GIB": "90"}
    variables = {"MAX_BATCH_PREFILL_TOKENS": prefill}  # from the variable alone
    server = run(started, [str(standins.tgi), "--model-id", MODEL], env | plain | variables)
    if fits:
        server.wait_for("router/src/server.rs:2302: Connected")
        return
    assert server.finish() == 1
    assert "\x1b[" not in server.text
    message = (
        "Not enough memory to handle 16384 prefill tokens. "
        "You need to decrease `--max-batch-prefill-tokens`"
    )
    lines = server.text.splitlines()
    assert lines[-1] == "Error: WebserverFailed"
    assert f"RuntimeError: {message}" in lines
    assert f'Error: Backend(Warmup(Generation("{message}")))' in lines
    error = server.wait_for("Server error: Not enough memory")
    assert error.split("Z ", 1)[1] == (
        "ERROR warmup{max_input_length=None max_prefill_tokens=16384 max_total_tokens=None "
        "max_batch_size=None}:warmup: text_generation_router_v3::client: "
        f"backends/v3/src/client/mod.rs:45: Server error: {message}"
    )
    assert server.wait_for("Webserver Crashed").endswith(
        "ERROR text_generation_launcher: Webserver Crashed"
    )
    result = classify(tmp_path, server.text)
    assert (result["label"], result["corroborated"]) == ("kv_cache_oom", True)
    stated = facts(result)
    assert (stated["engine"], stated["max_batch_prefill_tokens"], stated["model"]) == (
        "tgi",
        16384,
        MODEL,
    )


# ------------------------------------------------------------------ llama-server
def test_llama_server_reads_variables_then_flags_as_common_arg_does() -> None:
    variables = {
        "LLAMA_ARG_CTX_SIZE": "8192",
        "LLAMA_ARG_N_GPU_LAYERS": "99",
        "LLAMA_ARG_BATCH": "512",
    }
    values, warnings = llamacpp_cli.parse_args(
        ["-m", "x.gguf", "-c", "16384", "-np", "4"], variables
    )
    assert (values["n_ctx"], values["n_gpu_layers"], values["n_batch"]) == (16384, 99, 512)
    assert (values["model"], values["n_parallel"]) == ("x.gguf", 4)
    assert warnings == [
        "warn: LLAMA_ARG_CTX_SIZE environment variable is set, but will be overwritten by "
        "command line argument -c"
    ]
    for flags in (
        ["-ngl", "7"],
        ["--gpu-layers", "7"],
        ["--n-gpu-layers", "7"],
        ["--n_gpu_layers", "7"],
    ):
        assert llamacpp_cli.parse_args(flags, {})[0]["n_gpu_layers"] == 7
    for flags in (["--ctx-size", "7"], ["--parallel", "2", "-c", "7"], ["-b", "1", "-c", "7"]):
        assert llamacpp_cli.parse_args(flags, {})[0]["n_ctx"] == 7
    assert llamacpp_cli.parse_args(["--batch-size", "64", "--foo"], {})[0]["n_batch"] == 64
    with pytest.raises(ValueError, match="stoi"):
        llamacpp_cli.parse_args(["-c", "big"], {})


def test_llama_server_listens_and_stops_on_sigterm(
    standins: Standins, env: dict[str, str], started: list[Server], tmp_path: Path
) -> None:
    args = ["-m", GGUF, "-c", "16384", "-np", "2", "--port", "8081"]
    variables = {"LLAMA_ARG_CTX_SIZE": "8192", "LLAMA_ARG_N_GPU_LAYERS": "99"}
    server = run(started, [str(standins.llama_server), *args], env | variables)
    listening = server.wait_for("starting the main loop")
    assert (
        listening == "main: server is listening on http://127.0.0.1:8081 - starting the main loop"
    )
    lines = server.text.splitlines()
    assert lines[0] == (
        "warn: LLAMA_ARG_CTX_SIZE environment variable is set, but will be overwritten by "
        "command line argument -c"
    )
    for expected in (
        f"srv    load_model: loading model '{GGUF}'",
        "load_tensors: offloaded 33/33 layers to GPU",
        "llama_context: n_ctx         = 16384",
        "llama_context: n_ctx_per_seq = 8192",
        "slot         init: id  1 | task -1 | new slot n_ctx_slot = 8192",
    ):
        assert expected in lines
    assert server.wait_for("KV buffer size").startswith("llama_kv_cache_unified:      CUDA0 KV")
    (record,) = records(tmp_path)
    assert record["argv"] == [str(standins.llama_server), *args] and record["engine"] == "llamacpp"
    assert record["env"]["LLAMA_ARG_CTX_SIZE"] == "8192"  # type: ignore[index]
    assert server.stop() == 0
    assert (
        server.text.splitlines()[-1] == "srv    operator(): operator(): cleaning up before exit..."
    )
    assert classify(tmp_path, server.text)["label"] == "healthy"


@pytest.mark.parametrize(("ctx", "fits"), [("655360", True), ("1048576", False)])
def test_llama_server_fails_to_allocate_a_kv_cache_too_large(
    standins: Standins,
    env: dict[str, str],
    started: list[Server],
    tmp_path: Path,
    ctx: str,
    fits: bool,
) -> None:
    sim = env | {"ADVISOR_SIM_WEIGHTS_GIB": "8"}
    server = run(started, [str(standins.llama_server), "-m", GGUF, "-ngl", "99", "-c", ctx], sim)
    if fits:
        server.wait_for("starting the main loop")
        return
    assert server.finish() == 1
    lines = server.text.splitlines()
    start = next(i for i, line in enumerate(lines) if "cudaMalloc failed" in line)
    assert re.fullmatch(
        r"ggml_backend_cuda_buffer_type_alloc_buffer: allocating \d+\.\d\d MiB on device 0: "
        r"cudaMalloc failed: out of memory",
        lines[start],
    )
    assert lines[start + 1].startswith(
        "alloc_tensor_range: failed to allocate CUDA0 buffer of size "
    )
    assert lines[start + 2 :] == [
        "llama_init_from_model: failed to initialize the context: failed to allocate buffer "
        "for kv cache",
        f"common_init_from_params: failed to create context with model '{GGUF}'",
        f"srv    load_model: failed to load model, '{GGUF}'",
        "srv    operator(): operator(): cleaning up before exit...",
        "main: exiting due to model loading error",
    ]
    result = classify(tmp_path, server.text)
    assert result["label"] in MEMORY_LABELS and result["corroborated"] is True
    assert facts(result)["tried_to_allocate_gib"] == pytest.approx(127.5, abs=1.0)


def test_a_wedged_stand_in_hangs_after_sigterm_until_killed(
    standins: Standins, env: dict[str, str], started: list[Server]
) -> None:
    sim = env | {"ADVISOR_SIM_WEDGE_ON_STOP": "1", "MODEL_ID": MODEL}
    server = run(started, [str(standins.tgi)], sim)
    server.wait_for("Connected")
    server.proc.send_signal(signal.SIGTERM)
    server.wait_for("Waiting for webserver to gracefully shutdown")
    with pytest.raises(subprocess.TimeoutExpired):
        server.proc.wait(timeout=0.5)
    server.proc.kill()
    assert server.finish() == -signal.SIGKILL


# ------------------------------------------------------------------ what the catalogue lacks
@pytest.mark.xfail(
    strict=True, reason="catalogue gap: TGI's {:#?} Args put a Some(N) value on the next line"
)
def test_tgi_max_batch_prefill_tokens_is_read_from_its_pretty_printed_args(tmp_path: Path) -> None:
    args = tgi_cli.parse_args(["--model-id", MODEL, "--max-batch-prefill-tokens", "8192"], {})
    banner = (
        f"2025-01-01T00:00:00.000000Z  INFO text_generation_launcher: {tgi_cli.args_debug(args)}"
    )
    assert facts(classify(tmp_path, banner)).get("max_batch_prefill_tokens") == 8192


def test_llama_server_context_size_and_engine_are_facts(tmp_path: Path) -> None:
    text = "main: loading model\nllama_context: n_ctx         = 16384\n" + (
        "main: exiting due to model loading error"
    )
    found = facts(classify(tmp_path, text))
    assert found.get("max_model_len") == 16384 and found.get("engine") == "llamacpp"
