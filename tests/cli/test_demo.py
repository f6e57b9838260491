"""`advisor demo` end to end, as a process: the seed scenario on the simulated node."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from advisor.cli.main import cli
from advisor.sim.box import unavailable as box_unavailable
from tests.conftest import run_advisor

UNIT = "vllm-minimax-m25.service"
GOLDEN = (  # a journal of another host (gpu-h100-44)
    Path(__file__).parents[1]
    / "golden/gpu_hardware_fault/xid79-fallen-off-bus-v011-tp2-full-journal.jsonl"
)


def test_demo_goes_from_a_crash_loop_to_healthy_and_leaves_a_store(tmp_path: Path) -> None:
    data = tmp_path / "data"
    real = tmp_path / "real.db"  # $ADVISOR_DB: the user's real store, which the demo leaves be
    env = {**os.environ, "XDG_DATA_HOME": str(data), "ADVISOR_DB": f"sqlite:///{real}"}
    sqlite_url = f"sqlite:///{data / 'advisor' / 'demo.db'}"
    last = CliRunner().invoke(  # an earlier demo's store: this run starts without it
        cli, ["ingest", "journal", "--file", str(GOLDEN), "--db", sqlite_url]
    )
    assert last.exit_code == 0, last.output
    started = time.monotonic()
    done = run_advisor("demo", "--yes", timeout=120, env=env)
    seconds = time.monotonic() - started
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode() + out
    assert seconds < 60
    assert out.startswith(
        f"store: {sqlite_url} (the demo's own, made anew; --db URL picks another)\n"
    )
    assert f"`advisor explain {UNIT} --db {sqlite_url}`" in out
    assert not real.exists() and not (data / "advisor" / "events.db").exists()
    for expected in (
        "sampler_warmup_oom (confidence",
        "2 failed run(s)",
        "set_flag --max-num-seqs 256",
        "approved (--yes)",
        "done: hold_restarts",
        "wedged_stop (confidence",
        # systemd's stop timeout already SIGKILLed the wedged run: nothing to kill
        "skipped: kill — invocation",
        "is over: systemd ended it",
        "done: set_flag — vllm-minimax-m25.service will start with --max-num-seqs 256",
        "done: restart",
        f"{UNIT} is up: Application startup complete",
        "the post-mortem:",
        "failing phase: sampler_warmup",
    ):
        assert expected in out, expected
    runner = CliRunner()
    incidents = json.loads(runner.invoke(cli, ["incidents", "--json", "--db", sqlite_url]).output)
    assert [(i["label"], i["status"]) for i in incidents] == [
        ("sampler_warmup_oom", "resolved"),
        ("wedged_stop", "resolved"),
    ]
    assert incidents[0]["runs"] >= 2
    listed = runner.invoke(cli, ["events", "--json", "--db", sqlite_url]).output.splitlines()
    hosts = {json.loads(line)["stream"].split("/")[0] for line in listed}
    assert hosts == {"gpu-node-07"}, hosts  # nothing of the earlier store
    runs = json.loads(runner.invoke(cli, ["runs", "--json", "--db", sqlite_url]).output)
    assert runs[-1]["outcome"] == "ready" and runs[-1]["config"]["max_num_seqs"] == 256
    actions = json.loads(runner.invoke(cli, ["actions", "--json", "--db", sqlite_url]).output)
    assert {a["status"] for a in actions if not a["alternative"]} == {"succeeded", "skipped"}
    assert {a["kind"] for a in actions if a["status"] == "skipped"} >= {"kill"}
    explain = runner.invoke(
        cli, ["explain", UNIT, "--incident", incidents[0]["incident_id"], "--db", sqlite_url]
    )
    assert "[succeeded] set_flag --max-num-seqs 256" in explain.output
    # The latest incident is the one the demo just printed, last acted on; the wedged stop
    # its hold caused is listed with its short id.
    latest = runner.invoke(cli, ["explain", UNIT, "--db", sqlite_url]).output
    assert latest.startswith(f"gpu-node-07/{UNIT}: sampler_warmup_oom (confidence")
    others = latest[latest.index("Other incidents of this service") :]
    assert f"\n{incidents[1]['short_id']}  " in others and "wedged_stop" in others
    events = runner.invoke(cli, ["events", "--type", "action.succeeded", "--db", sqlite_url])
    assert events.output.count("action.succeeded") == len(
        [a for a in actions if a["status"] == "succeeded"]
    )


def test_demo_without_approval_changes_nothing(sqlite_url: str) -> None:
    done = run_advisor("demo", "--db", sqlite_url, input=b"n\n", timeout=120)
    assert done.returncode == 1
    assert b"Approve this plan?" in done.stdout and b"plan not approved" in done.stdout
    actions = json.loads(CliRunner().invoke(cli, ["actions", "--json", "--db", sqlite_url]).output)
    assert actions and {a["status"] for a in actions} == {"proposed"}


def test_demo_under_real_systemd(sqlite_url: str) -> None:
    reason = box_unavailable()
    if reason is not None:
        pytest.skip(f"no systemd box: {reason}")
    done = run_advisor("demo", "--systemd", "--yes", "--db", sqlite_url, timeout=180)
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode() + out
    for expected in (
        "booted systemd in a box",
        "sampler_warmup_oom (confidence",
        "done: hold_restarts — wrote ",
        "zzz-advisor-hold.conf; daemon-reload; systemd loaded it",
        "zz-advisor.conf; daemon-reload; systemd loaded it",
        "Application startup complete.",
        f"{UNIT} is up under systemd: ",
        "--max-num-seqs 256",
        "the post-mortem:",
    ):
        assert expected in out, expected
    incidents = json.loads(
        CliRunner().invoke(cli, ["incidents", "--json", "--db", sqlite_url]).output
    )
    assert {i["status"] for i in incidents} == {"resolved"}
    result = run_advisor("demo", "--systemd", "--db", sqlite_url, input=b"n\n", timeout=120)
    assert result.returncode == 1 and b"plan not approved" in result.stdout
