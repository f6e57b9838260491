"""The stand-in vLLM server as a real systemd unit (``vllm serve ...`` from a unit file), the GPU
driver daemon beside it, and NVML's twin reading what the driver publishes."""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import orjson
import pytest

from advisor.core.errors import GpuUnavailableError
from advisor.core.payloads import GpuSampled
from advisor.sim.box import SystemdBox
from advisor.sim.boxunits import GPUD_UNIT, gpud_unit, vllm_unit
from advisor.sim.claims import read_claims, write_claim
from advisor.sim.gpud import Daemon, alive, write_view
from advisor.sim.gpus import Driver
from advisor.sim.models import GIB
from advisor.sim.nvml_twin import TwinSampler
from advisor.sim.server_config import make_config
from advisor.sim.vllm_cli import parse_serve, sim_settings, write_vllm_script
from tests.waiting import wait

MODEL = "MiniMaxAI/MiniMax-M2.5"
SPEC = '{"method": "ngram", "num_speculative_tokens": 3}'
API_KEY = 'sk-50%off"\\x'  # a %, a double quote and a backslash, through systemd whole
SEED_SIM = {
    "ADVISOR_SIM_VOCAB_SIZE": "200064",
    "ADVISOR_SIM_WEIGHTS_GIB": "230",
    "ADVISOR_SIM_GPUS": "0,1,2,3",
    "ADVISOR_SIM_GPU_GIB": "96",
    "ADVISOR_SIM_SPEED": "200",
}
SERVE = [
    "--trust-remote-code",
    "--max-model-len",
    "131072",
    "-tp",
    "4",
    "--gpu-memory-utilization",
    "0.9",
    "--enable-expert-parallel",
]
UNIT = "vllm-minimax-m25.service"


wait_for = partial(wait, timeout=15.0, pause_s=0.03)


# ------------------------------------------------------------------ without systemd


def test_serve_flags_become_vllm_non_default_args_and_the_modelled_ones_shape_the_run() -> None:
    argv = [
        MODEL,
        "--served-model-name",
        "minimax m25",
        "--speculative-config",
        SPEC,
        "--api-key",
        "KEY",
        "--chat-template",
        "/etc/vllm/t.jinja",
        "--kv-cache-dtype",
        "fp8",
        "--max-num-seqs",
        "512",
        "-tp",
        "4",
        "--host",
        "0.0.0.0",
        "--port=8001",
        "--no-enable-prefix-caching",
        "--trust-remote-code",
        "--some-new-flag",
        "7",
        "--another-switch",
    ]
    given = parse_serve(argv)
    assert list(given.items()) == [
        ("model_tag", MODEL),
        ("host", "0.0.0.0"),
        ("port", 8001),
        ("api_key", ["KEY"]),
        ("chat_template", "/etc/vllm/t.jinja"),
        ("model", MODEL),
        ("trust_remote_code", True),
        ("served_model_name", ["minimax m25"]),
        ("tensor_parallel_size", 4),
        ("kv_cache_dtype", "fp8"),
        ("enable_prefix_caching", False),
        ("max_num_seqs", 512),
        ("speculative_config", {"method": "ngram", "num_speculative_tokens": 3}),
        ("some_new_flag", 7),
        ("another_switch", True),
    ]
    cfg = make_config(
        given,
        sim_settings(
            {**SEED_SIM, "ADVISOR_SIM_WEDGE_ON_STOP": "1", "ADVISOR_SIM_CLAIMS": "/tmp/c"}
        ),
    )
    assert (cfg.max_num_seqs, cfg.tensor_parallel_size, cfg.port, cfg.gpus) == (
        512,
        4,
        8001,
        (0, 1, 2, 3),
    )
    assert (cfg.card.vocab_size, cfg.speed, cfg.wedge_on_stop, str(cfg.claims)) == (
        200064,
        200.0,
        True,
        "/tmp/c",
    )
    assert parse_serve(["--model", "m"]) == {"model": "m"}  # --model, no model_tag
    for bad, why in (
        (["m", "--speculative-config", "{nope"], "invalid json value"),
        (["--max-num-seqs", "8"], "required: model_tag"),
        (["m", "n"], "unrecognized arguments: n"),
        (["m", "--enforce-eager=yes"], "ignored explicit argument"),
    ):
        with pytest.raises(ValueError, match=why):
            parse_serve(bad)
    with pytest.raises(ValueError, match="ADVISOR_SIM_SPEED"):
        sim_settings({"ADVISOR_SIM_SPEED": "fast"})


def test_the_vllm_script_runs_this_checkout_and_refuses_bad_flags(tmp_path: Path) -> None:
    script = write_vllm_script(tmp_path / "bin")
    assert script.read_text().startswith(f"#!{sys.executable}\n") and os.access(script, os.X_OK)
    env = {
        "PATH": "/usr/bin:/bin",
        "ADVISOR_SIM_ARGV_LOG": str(tmp_path / "argv.jsonl"),
        "ADVISOR_SIM_ARGV_ENV": "ADVISOR_SIM_SPEED,UNSET",
    }
    version = subprocess.run(
        [str(script), "--version"],
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
        timeout=30,
        check=False,
    )
    assert (version.returncode, version.stdout) == (0, "0.15.1\n")
    bad = subprocess.run(
        [str(script), "serve", MODEL, "--max-num-seqs", "lots"],
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
        timeout=30,
        check=False,
    )
    assert bad.returncode == 2
    assert "argument --max-num-seqs: invalid int value: 'lots'" in bad.stderr
    logged = [json.loads(line) for line in (tmp_path / "argv.jsonl").read_text().splitlines()]
    assert [e["argv"][1:] for e in logged] == [
        ["--version"],
        ["serve", MODEL, "--max-num-seqs", "lots"],
    ]
    assert logged[1]["env"] == {"ADVISOR_SIM_SPEED": None, "UNSET": None}
    assert logged[1]["pid"] != logged[0]["pid"]


def test_the_driver_daemon_frees_a_dead_process_memory_after_the_delay(tmp_path: Path) -> None:
    """Host processes, no systemd: a live claimant is listed with its comm; once it dies —
    a zombie not yet reaped counts as dead — its memory stays for the release delay."""
    claims, view = tmp_path / "claims", tmp_path / "view.json"
    driver = Driver(
        claims,
        tmp_path / "rec.jsonl",
        host="h",
        count=2,
        gpu_gib=8.0,
        clock=time.time,
        release_delay_s=0.6,
        clear=False,
    )
    daemon = Daemon(driver, view, 0.05)
    child = subprocess.Popen(["sleep", "30"])
    try:
        write_claim(claims, child.pid, {1: 3 * GIB})
        daemon.tick()
        twin = TwinSampler(view, "h")
        _, samples = twin.sample()
        assert [s.memory_used_bytes for s in samples] == [0, 3 * GIB]
        assert [(p.pid, p.name) for p in samples[1].processes or ()] == [(child.pid, "sleep")]
        os.kill(child.pid, signal.SIGKILL)
        wait_for("the zombie", lambda: not alive(child.pid))
        assert Path(f"/proc/{child.pid}").exists()  # not reaped: still a zombie
        died = time.time()
        while time.time() - died < 0.45:
            daemon.tick()
            assert child.pid in read_claims(claims), "freed before the release delay"
            time.sleep(0.05)

        def released() -> bool:
            daemon.tick()
            return child.pid not in read_claims(claims)

        wait_for("the release", released, timeout=2.0)
        assert time.time() - died >= 0.6
        assert twin.sample()[1][1].memory_used_bytes == 0
    finally:
        child.kill()
        child.wait()
        driver.close()
    recorded = (tmp_path / "rec.jsonl").read_bytes().splitlines()
    assert orjson.loads(recorded[0])["gpus"][1]["memory_used_bytes"] == 3 * GIB


def test_the_twin_refuses_missing_unreadable_and_stale_views(tmp_path: Path) -> None:
    view = tmp_path / "view.json"
    with pytest.raises(GpuUnavailableError, match="does not exist"):
        TwinSampler(view, "h").open()
    view.write_text("{not json\n")
    with pytest.raises(GpuUnavailableError, match="unreadable"):
        TwinSampler(view, "h").sample()
    sample = GpuSampled(
        origin="nvml",
        host="box",
        index=0,
        memory_total_bytes=8 * GIB,
        memory_used_bytes=0,
        memory_free_bytes=8 * GIB,
        processes=(),
    )
    write_view(view, int((time.time() - 10) * 1e6), "box", [sample])
    with pytest.raises(GpuUnavailableError, match=r"not updated for 1\d\.\d s"):
        TwinSampler(view, "h").sample()
    with TwinSampler(view, "node-3", stale_s=60) as twin:
        when, samples = twin.sample(time_us=123)
    assert when == 123 and [(s.host, s.memory_free_bytes) for s in samples] == [("node-3", 8 * GIB)]


# ------------------------------------------------------------------ under real systemd


def _messages(box: SystemdBox, unit: str) -> dict[str, list[str]]:
    """The unit's own output lines by invocation, in order (byte arrays decoded)."""
    out: dict[str, list[str]] = {}
    for line in box.journalctl("-u", unit, "-o", "json").splitlines():
        entry = json.loads(line)
        inv = entry.get("_SYSTEMD_INVOCATION_ID")
        if inv is None or entry.get("_PID") == "1":
            continue
        text = entry.get("MESSAGE")
        out.setdefault(inv, []).append(
            bytes(text).decode() if isinstance(text, list) else text or ""
        )
    return out


def _boot_gpud(box: SystemdBox, tmp_path: Path, release_delay_s: float) -> tuple[Path, Path]:
    claims, view = tmp_path / "claims", tmp_path / "view.json"
    box.install(
        GPUD_UNIT,
        gpud_unit(
            claims=claims,
            view=view,
            gpus=8,
            gpu_gib=96.0,
            release_delay_s=release_delay_s,
            interval_s=0.1,
        ),
    )
    box.systemctl("start", GPUD_UNIT)
    wait_for("the driver's first view", view.exists)
    return claims, view


def _holders(view: Path, unit: str) -> dict[int, set[int]]:
    """GPU index → PIDs of ``unit`` holding memory on it, through the twin."""
    _, samples = TwinSampler(view, "gpu-box").sample()
    return {
        s.index: {p.pid for p in s.processes or () if p.unit == unit and p.used_bytes}
        for s in samples
    }


def test_a_vllm_unit_gets_its_argv_from_systemd_and_its_memory_outlives_it_by_the_delay(
    box: SystemdBox, tmp_path: Path
) -> None:
    release_s = 1.5
    claims, view = _boot_gpud(box, tmp_path, release_s)
    script = write_vllm_script(tmp_path / "bin")
    args = [
        "serve",
        "${MODEL}",
        "--served-model-name",
        "minimax m25",
        "--speculative-config",
        SPEC,
        "--api-key",
        API_KEY,
        "--kv-cache-dtype",
        "fp8",
        "--chat-template",
        str(tmp_path / "chat template.jinja"),
        *SERVE,
        "--max-num-seqs",
        "256",
    ]
    env = {
        "MODEL": MODEL,
        **SEED_SIM,
        "ADVISOR_SIM_CLAIMS": str(claims),
        "ADVISOR_SIM_ARGV_LOG": str(tmp_path / "argv.jsonl"),
        "ADVISOR_SIM_ARGV_ENV": "MODEL,ADVISOR_SIM_SPEED",
    }
    box.install(UNIT, vllm_unit("vLLM MiniMax-M2.5 (simulated)", script, args, environment=env))
    box.systemctl("start", UNIT)
    inv = box.show(UNIT, "InvocationID")["InvocationID"]
    wait_for(
        "Application startup complete.",
        lambda: any(
            "Application startup complete." in m for m in _messages(box, UNIT).get(inv, [])
        ),
    )
    pid = int(box.show(UNIT, "MainPID")["MainPID"])

    expanded = [str(script), "serve", MODEL, *args[2:]]
    logged = [json.loads(line) for line in (tmp_path / "argv.jsonl").read_text().splitlines()]
    assert logged == [
        {"pid": pid, "argv": expanded, "env": {"MODEL": MODEL, "ADVISOR_SIM_SPEED": "200"}}
    ]
    cmdline = box.run(["cat", f"/proc/{pid}/cmdline"]).stdout.split("\0")[:-1]
    assert cmdline == [sys.executable, *expanded]  # the interpreter first, as pip's vllm
    line = next(m for m in _messages(box, UNIT)[inv] if "non-default args: " in m)
    printed = ast.literal_eval(line.split("non-default args: ", 1)[1])
    assert printed == {
        **parse_serve(expanded[2:]),
        "api_key": [API_KEY],
        "speculative_config": json.loads(SPEC),
        "served_model_name": ["minimax m25"],
    }
    assert list(printed)[:2] == ["model_tag", "api_key"]
    engine = next(m for m in _messages(box, UNIT)[inv] if "Initializing a V1 LLM engine" in m)
    assert f"model='{MODEL}'" in engine and "served_model_name=minimax m25," in engine

    claimed = read_claims(claims)[pid]  # final: the server is up
    assert sorted(claimed) == [0, 1, 2, 3] and claimed[0] > 80 * GIB

    def used() -> list[int]:
        return [s.memory_used_bytes for s in TwinSampler(view, "gpu-box").sample()[1]]

    wait_for("the server's memory in the view", lambda: used() == [claimed[0]] * 4 + [0] * 4)
    assert _holders(view, UNIT) == {
        **{i: {pid} for i in range(4)},
        **{i: set() for i in range(4, 8)},
    }
    _, samples = TwinSampler(view, "gpu-box").sample()
    assert {p.name for s in samples for p in s.processes or ()} == {"vllm"}
    assert TwinSampler(view, "gpu-box").used_by(UNIT) == 4 * claimed[0]

    killed = time.monotonic()
    box.systemctl("kill", "--signal=SIGKILL", UNIT)
    wait_for("the unit to fail", lambda: box.show(UNIT, "ActiveState")["ActiveState"] == "failed")
    assert box.show(UNIT, "Result")["Result"] == "signal"
    assert _holders(view, UNIT)[0] == {pid}, "freed at the death, not after the delay"
    while _holders(view, UNIT)[0] == {pid}:
        assert time.monotonic() - killed < release_s + 3, "memory never freed"
        time.sleep(0.03)
    freed_after = time.monotonic() - killed
    assert release_s <= freed_after < release_s + 1.5
    assert all(not pids for pids in _holders(view, UNIT).values()) and not read_claims(claims)

    box.systemctl("stop", GPUD_UNIT)
    time.sleep(0.4)
    with pytest.raises(GpuUnavailableError, match="driver gone"):
        TwinSampler(view, "gpu-box", stale_s=0.3).sample()


def test_the_seed_config_fails_in_the_sampler_warm_up_and_systemd_restarts_it(
    box: SystemdBox, tmp_path: Path
) -> None:
    """RestartSec= outlasts the driver's release delay, so every start meets free GPUs and
    fails the same way: the warm-up of 1024 dummy requests over a 200,064-token vocabulary."""
    claims, _ = _boot_gpud(box, tmp_path, 0.2)
    script = write_vllm_script(tmp_path / "bin")
    box.install(
        UNIT,
        vllm_unit(
            "vLLM MiniMax-M2.5 (simulated)",
            script,
            ["serve", "${MODEL}", *SERVE, "--max-num-seqs", "1024"],
            environment={"MODEL": MODEL, **SEED_SIM, "ADVISOR_SIM_CLAIMS": str(claims)},
            restart="on-failure",
            restart_sec=0.8,
            start_limit_interval_sec=0,
        ),
    )
    box.systemctl("start", UNIT)
    warm_up = (
        "RuntimeError: CUDA out of memory occurred when warming up sampler with 1024 "
        "dummy requests."
    )

    def failed_runs() -> list[str]:
        return [
            text
            for text in ("\n".join(lines) for lines in _messages(box, UNIT).values())
            if "Engine core initialization failed" in text
        ]

    wait_for(
        "two restarts",
        lambda: int(box.show(UNIT, "NRestarts")["NRestarts"]) >= 2 and len(failed_runs()) >= 2,
        timeout=20,
    )
    for text in failed_runs():
        assert warm_up in text
        assert "Free memory on device" not in text and "Application startup complete" not in text
    failures = [
        e
        for e in map(json.loads, box.journalctl("-u", UNIT, "-o", "json").splitlines())
        if e.get("_PID") == "1" and "Main process exited" in str(e.get("MESSAGE"))
    ]
    assert len(failures) >= 2
    assert all("code=exited, status=1/FAILURE" in e["MESSAGE"] for e in failures)
