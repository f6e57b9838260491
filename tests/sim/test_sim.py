"""The simulated GPU node: the stand-in vLLM server, systemd semantics, the driver's delayed
release, and that what the node writes reads back through the real ingest and diagnosis."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from advisor.diagnosis.classify import diagnose
from advisor.diagnosis.model import load_model
from advisor.diagnosis.rules import load_rules
from advisor.pipeline.inputs import read_log
from advisor.reports.contract import to_contract
from advisor.sim import SimNode, UnitSpec
from advisor.sim.models import GIB, MINIMAX_M25_FLAGS, card_for, plan
from advisor.sim.process import Exit
from advisor.sim.units import (
    exit_status,
    flag_value,
    parse_signal,
    parse_timespan,
    restarts_after,
    set_flag,
    timespan,
)
from advisor.store import open_store
from ingest.gpu import replay_recording
from ingest.journal_sources import ingest_json_file

SPEED = "30"
RELEASE_S = 0.4
SEED_UNIT = "vllm-minimax-m25.service"
SEED_ARGS = [
    "--model",
    "MiniMaxAI/MiniMax-M2.5",
    *MINIMAX_M25_FLAGS,
    "--speed",
    SPEED,
]
SMALL_UNIT = "vllm-llama8b.service"
SMALL_ARGS = [
    "--model",
    "meta-llama/Llama-3.1-8B-Instruct",
    "--max-model-len",
    "32768",
    "--max-num-seqs",
    "256",
    "--speed",
    SPEED,
]
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture
def node(tmp_path: Path) -> Iterator[SimNode]:
    with SimNode(tmp_path / "node", release_delay_s=RELEASE_S, sample_interval_s=0.2) as n:
        yield n


def messages(path: Path) -> list[str]:
    """Every MESSAGE of the journal, byte arrays decoded, colour codes removed."""
    out = []
    for line in path.read_bytes().splitlines():
        value = orjson.loads(line).get("MESSAGE")
        text = bytes(value).decode() if isinstance(value, list) else value or ""
        out.append(ANSI.sub("", text))
    return out


def index_of(lines: list[str], needle: str, start: int = 0) -> int:
    return next(i for i in range(start, len(lines)) if needle in lines[i])


# ------------------------------------------------------------------ pure parts


def test_memory_model_fails_the_seed_in_the_sampler_warm_up_and_fits_256() -> None:
    card = card_for("MiniMaxAI/MiniMax-M2.5")
    seed = plan(
        card, tensor_parallel_size=4, gpu_memory_utilization=0.9, gpu_gib=96.0, max_num_seqs=1024
    )
    assert seed.weights == int(215.36 * GIB / 4) and seed.kv > 0
    assert seed.kv_tokens >= 131072  # the KV cache is not the problem
    left = seed.total - seed.budget - (seed.context + seed.graphs)
    assert seed.sampler_chunk == 1024 * 200_064 * 4  # one [N, V] float32 tensor
    assert seed.sampler_need == 1024 * 200_064 * 20 > left
    fixed = plan(
        card, tensor_parallel_size=4, gpu_memory_utilization=0.9, gpu_gib=96.0, max_num_seqs=256
    )
    assert fixed.sampler_need <= left


def test_flags_options_and_restart_policy() -> None:
    argv = ["--model", "m", "--max-num-seqs", "1024", "--wedge-on-stop", "--speed=5"]
    assert set_flag(argv, "--max-num-seqs", 256) == [
        "--model",
        "m",
        "--wedge-on-stop",
        "--speed=5",
        "--max-num-seqs",
        "256",
    ]
    assert set_flag(argv, "--speed", 9)[-2:] == ["--speed", "9"]
    assert "--wedge-on-stop" not in set_flag(argv, "--wedge-on-stop", False)
    assert flag_value(argv, "--speed") == "5" and flag_value(argv, "--wedge-on-stop") == ""
    with pytest.raises(ValueError):
        set_flag(argv, "max-num-seqs", 1)
    assert parse_timespan("1min 30s") == 90 and parse_timespan("500ms") == 0.5
    assert parse_timespan("infinity") == float("inf") and parse_timespan(2) == 2.0
    with pytest.raises(ValueError):
        parse_timespan("soon")
    assert restarts_after("on-failure", clean=False, code="exited", result="exit-code")
    assert not restarts_after("on-failure", clean=True, code="killed", result="success")
    assert restarts_after("on-abnormal", clean=False, code="killed", result="signal")
    assert not restarts_after("on-abnormal", clean=False, code="exited", result="exit-code")
    assert exit_status(Exit("exited", 1, 0.0, 0.0)) == "1/FAILURE"
    assert exit_status(Exit("exited", 120, 0.0, 0.0)) == "120/n/a"
    assert exit_status(Exit("killed", 9, 0.0, 0.0)) == "9/KILL"
    assert parse_signal("KILL") == parse_signal("SIGKILL") == parse_signal(9)
    assert (timespan(0.345), timespan(2.345), timespan(64.811)) == (
        "345ms",
        "2.345s",
        "1min 4.811s",
    )


def test_server_refuses_a_kv_cache_that_does_not_fit() -> None:
    """Run as a plain process: the two KV-cache failures vLLM reports, exit status 1."""
    base = [
        sys.executable,
        "-m",
        "advisor.sim.server",
        "--model",
        "meta-llama/Llama-3.1-70B-Instruct",
        "--tensor-parallel-size",
        "2",
        "--speed",
        "500",
    ]
    runs = {
        "needed": [*base, "--max-model-len", "1048576", "--gpu-gib", "80"],
        "no_blocks": [*base, "--gpu-memory-utilization", "0.5", "--gpu-gib", "80"],
    }
    procs = {
        k: subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for k, argv in runs.items()
    }
    out = {k: p.communicate(timeout=30)[0].decode() for k, p in procs.items()}
    assert all(p.returncode == 1 for p in procs.values())
    assert re.search(
        r"max seq len \(1048576\), \([\d.]+ GiB KV cache is needed, which is "
        r"larger than the available KV cache memory \([\d.]+ GiB\)",
        out["needed"],
    )
    assert "No available memory for the cache blocks" in out["no_blocks"]
    for text in out.values():
        assert "EngineCore failed to start." in text
        assert "Engine core initialization failed. See root cause above." in text
        assert "Application startup complete" not in text


# ------------------------------------------------------------------ the node


def test_a_unit_that_fits_comes_up_and_its_memory_is_freed_after_it_dies(node: SimNode) -> None:
    node.add_unit(UnitSpec(SMALL_UNIT, SMALL_ARGS, "vLLM Llama 8B", gpus=(2,)))
    started = node.start(SMALL_UNIT)
    assert (started.active_state, started.sub_state) == ("active", "running")
    assert node.run_until(lambda: node.unit_state(SMALL_UNIT).ready, 15)
    state = node.unit_state(SMALL_UNIT)
    assert (state.active_state, state.sub_state, state.n_restarts) == ("active", "running", 0)
    pid = state.main_pid
    assert pid is not None and (node.claims_dir / f"{pid}.json").exists()
    used = node.gpu_used_bytes()
    assert used[2] > 80 * GIB and used[0] == used[3] == 0
    node.sample()
    last = orjson.loads(node.gpus_path.read_bytes().splitlines()[-1])
    procs = last["gpus"][2]["processes"]
    assert [(p["pid"], p["unit"]) for p in procs] == [(pid, SMALL_UNIT)]

    stopped = node.stop(SMALL_UNIT)
    died = time.monotonic()
    assert (stopped.active_state, stopped.result, stopped.exit_status) == (
        "inactive",
        "success",
        "0/SUCCESS",
    )
    assert node.gpu_used_bytes()[2] > 0  # the driver has not released it yet
    assert node.run_until(lambda: node.gpu_used_bytes()[2] == 0, 5)
    assert RELEASE_S - 0.1 <= time.monotonic() - died <= RELEASE_S + 1.0
    text = messages(node.journal_path)
    assert any(t.endswith("INFO:     Application startup complete.") for t in text)
    after = index_of(text, "Stopping vllm-llama8b.service - vLLM Llama 8B...")
    for needle in (
        "Shutting down FastAPI HTTP server.",
        "INFO:     Finished server process",
        "vllm-llama8b.service: Deactivated successfully.",
        "Stopped vllm-llama8b.service - vLLM Llama 8B.",
    ):
        after = index_of(text, needle, after)


def test_the_seed_config_crash_loops_until_restarts_are_held(node: SimNode) -> None:
    node.add_unit(UnitSpec(SEED_UNIT, SEED_ARGS, "vLLM MiniMax-M2.5", restart_sec=0.5))
    node.start(SEED_UNIT)
    assert node.run_until(lambda: node.unit_state(SEED_UNIT).n_restarts >= 2, 20)
    held = node.hold_restarts(SEED_UNIT)
    assert held.restarts_held
    assert node.run_until(lambda: node.unit_state(SEED_UNIT).active_state == "failed", 15)
    count = node.unit_state(SEED_UNIT).n_restarts
    node.run_for(0.8)  # longer than RestartSec: nothing comes
    state = node.unit_state(SEED_UNIT)
    assert (state.n_restarts, state.sub_state, state.result) == (count, "failed", "exit-code")
    assert state.exit_status == "1/FAILURE" and state.main_pid is None

    text = messages(node.journal_path)
    for n in range(1, count + 1):
        assert f"{SEED_UNIT}: Scheduled restart job, restart counter is at {n}." in text
    assert (
        text.count(f"{SEED_UNIT}: Main process exited, code=exited, status=1/FAILURE") == count + 1
    )
    warmups = [t for t in text if "warming up sampler with 1024 dummy requests" in t]
    assert len(warmups) == count + 1
    assert any(
        re.search(
            r"Tried to allocate 781\.50 MiB\. GPU 0 has a total capacity of "
            r"96\.00 GiB of which [\d.]+ MiB is free",
            t,
        )
        for t in text
    )
    assert any(t.endswith("in _dummy_sampler_run") for t in text)
    assert any(t.endswith("Failed core proc(s): {}") for t in text)


def test_a_wedged_stop_times_out_into_sigkill(node: SimNode) -> None:
    node.add_unit(
        UnitSpec(
            SMALL_UNIT,
            [*SMALL_ARGS, "--wedge-on-stop"],
            "vLLM Llama 8B",
            gpus=(0,),
            timeout_stop_sec=0.6,
        )
    )
    node.start(SMALL_UNIT)
    assert node.run_until(lambda: node.unit_state(SMALL_UNIT).ready, 15)
    pid = node.unit_state(SMALL_UNIT).main_pid
    begun = time.monotonic()
    state = node.stop(SMALL_UNIT)
    assert time.monotonic() - begun >= 0.6
    assert (state.active_state, state.sub_state, state.result) == ("failed", "failed", "timeout")
    assert (state.exit_code, state.exit_status, state.n_restarts) == ("killed", "9/KILL", 0)
    node.run_for(0.3)  # no restart after an explicit stop
    assert node.unit_state(SMALL_UNIT).active_state == "failed"
    text = messages(node.journal_path)
    i = index_of(text, "Stopping vllm-llama8b.service - vLLM Llama 8B...")
    for needle in (
        "Shutting down FastAPI HTTP server.",
        f"{SMALL_UNIT}: State 'stop-sigterm' timed out. Killing.",
        f"{SMALL_UNIT}: Killing process {pid} (",
        f"{SMALL_UNIT}: Main process exited, code=killed, status=9/KILL",
        f"{SMALL_UNIT}: Failed with result 'timeout'.",
        "Stopped vllm-llama8b.service - vLLM Llama 8B.",
    ):
        i = index_of(text, needle, i)
    assert not any("Finished server process" in t for t in text)


def test_kill_only_signals_and_on_failure_restarts_after_sigkill(node: SimNode) -> None:
    node.add_unit(UnitSpec(SMALL_UNIT, SMALL_ARGS, "vLLM Llama 8B", gpus=(1,), restart_sec=0.6))
    node.start(SMALL_UNIT)
    assert node.run_until(lambda: node.unit_state(SMALL_UNIT).ready, 15)
    first = node.unit_state(SMALL_UNIT)
    node.kill(SMALL_UNIT, "SIGKILL")
    assert node.run_until(lambda: node.unit_state(SMALL_UNIT).n_restarts == 1, 5)
    second = node.unit_state(SMALL_UNIT)
    assert second.main_pid != first.main_pid and second.invocation_id != first.invocation_id
    text = messages(node.journal_path)
    assert not any(t.startswith("Stopping ") for t in text)
    i = index_of(text, f"{SMALL_UNIT}: Main process exited, code=killed, status=9/KILL")
    i = index_of(text, f"{SMALL_UNIT}: Failed with result 'signal'.", i)
    index_of(text, f"{SMALL_UNIT}: Scheduled restart job, restart counter is at 1.", i)
    node.kill(SMALL_UNIT, "SIGTERM")  # handled: a clean exit, no restart
    assert node.run_until(lambda: node.unit_state(SMALL_UNIT).active_state == "inactive", 5)
    assert node.unit_state(SMALL_UNIT).n_restarts == 1


def test_a_restart_faster_than_the_driver_finds_the_memory_held(tmp_path: Path) -> None:
    """RestartSec shorter than the release delay: the new run sees the old run's memory."""
    with SimNode(tmp_path / "slow", release_delay_s=3.0) as node:
        node.add_unit(UnitSpec(SMALL_UNIT, SMALL_ARGS, "vLLM Llama 8B", gpus=(3,), restart_sec=0.0))
        node.start(SMALL_UNIT)
        assert node.run_until(lambda: node.unit_state(SMALL_UNIT).ready, 15)
        node.kill(SMALL_UNIT, "SIGKILL")
        assert node.run_until(lambda: node.unit_state(SMALL_UNIT).n_restarts == 1, 5)
        node.hold_restarts(SMALL_UNIT)
        assert node.run_until(lambda: node.unit_state(SMALL_UNIT).active_state == "failed", 10)
        text = messages(node.journal_path)
    assert any(
        re.search(
            r"Free memory on device \([\d.]+/96\.0 GiB\) on startup is less than "
            r"desired GPU memory utilization \(0\.9, 86\.4 GiB\)",
            t,
        )
        for t in text
    )


def test_the_seed_story_reads_back_through_ingest_and_diagnosis(
    node: SimNode, tmp_path: Path
) -> None:
    """Crash in the warm-up, a restart, a wedged stop, the advisor's fix: the journal is
    diagnosed like the real seed journal, and both files ingest without a malformed line."""
    node.add_unit(
        UnitSpec(
            SEED_UNIT,
            [*SEED_ARGS, "--wedge-on-stop"],
            "vLLM MiniMax-M2.5",
            restart_sec=0.5,
            timeout_stop_sec=0.6,
        )
    )
    node.start(SEED_UNIT)
    assert node.run_until(
        lambda: (s := node.unit_state(SEED_UNIT)).n_restarts == 1 and s.output_lines > 0, 20
    )
    wedged = node.stop(SEED_UNIT)
    assert (wedged.result, wedged.exit_status) == ("timeout", "9/KILL")

    node.set_flag(SEED_UNIT, "--max-num-seqs", 256)  # what the advisor recommends (below)
    node.set_flag(SEED_UNIT, "--wedge-on-stop", False)
    assert node.run_until(lambda: not any(node.gpu_used_bytes().values()), 5)
    node.start(SEED_UNIT)
    assert node.run_until(lambda: node.unit_state(SEED_UNIT).ready, 20)
    assert node.stop(SEED_UNIT).active_state == "inactive"
    node.run_for(0.3)

    fmt, lines = read_log(str(node.journal_path))
    diagnosis = diagnose(lines, load_rules(), load_model())
    assert [v.label for v in diagnosis.verdicts] == ["sampler_warmup_oom", "wedged_stop", "healthy"]
    contract = to_contract(diagnosis, fmt)
    facts = contract["facts"]
    assert (
        facts["max_num_seqs"],
        facts["dummy_requests"],
        facts["tensor_parallel_size"],
        facts["restart_count"],
    ) == (1024, 1024, 4, 1)
    fix = [a for a in contract["actions"] if a["kind"] == "set_flag" and not a.get("alternative")]
    assert (fix[0]["flag"], fix[0]["value"]) == ("--max-num-seqs", 256)

    journal_lines = len(node.journal_path.read_bytes().splitlines())
    gpu_lines = len(node.gpus_path.read_bytes().splitlines())
    store = open_store(f"sqlite:///{tmp_path / 'events.db'}")
    try:
        logs = ingest_json_file(store, node.journal_path)
        gpus = replay_recording(store, node.gpus_path)
    finally:
        store.close()
    assert (logs.malformed_count, logs.appended) == (0, journal_lines)
    assert (gpus.malformed_count, gpus.appended) == (0, gpu_lines * node.gpu_count)
