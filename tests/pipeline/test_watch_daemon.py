"""`advisor watch` as systemd runs it: follows the journal, diagnoses and proposes as lines
arrive, speaks the notify protocol (READY, WATCHDOG, STOPPING), stops cleanly on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from advisor.sim.box import SystemdBox
from advisor.store import EventStore
from advisor.views.fold.projector import Projector
from advisor.views.read.reading import read_rows
from tests.conftest import advisor_argv
from tests.journal_fixtures import Entry, have_journal_tools, make_journal

needs_journal = pytest.mark.skipif(
    not have_journal_tools(), reason="journalctl and systemd-journal-remote are needed"
)


def _fields(obj: dict[str, object]) -> Entry:
    out: Entry = []
    for name, value in obj.items():
        if name == "__CURSOR":
            continue
        if isinstance(value, list):
            out.append((name, bytes(value)))  # type: ignore[arg-type]
        elif isinstance(value, str):
            out.append((name, value))
    return out


def _wait(condition: Callable[[], bool], proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 120  # a bound for a failing test, not a speed target
    while not condition():
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


@needs_journal
def test_watch_diagnoses_live_and_speaks_sd_notify(
    tmp_path: Path, sqlite_url: str, opener: Callable[[str], EventStore], seed_journal: Path
) -> None:
    entries = [_fields(json.loads(line)) for line in seed_journal.read_text().splitlines()]
    journal = make_journal(tmp_path / "live.journal", entries[:47])
    address = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(address)
        sock.settimeout(60)
        env = {**os.environ, "NOTIFY_SOCKET": address, "WATCHDOG_USEC": "400000"}
        proc = subprocess.Popen(
            advisor_argv("watch", "--journal-file", str(journal), "--no-gpu", "--db", sqlite_url),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            assert sock.recv(4096).startswith(b"READY=1\nSTATUS=watching ")
            store = opener(sqlite_url)

            def incidents(n: int) -> Callable[[], bool]:
                def check() -> bool:
                    Projector(store).catch_up()
                    return len(read_rows(store, "incidents")) >= n

                return check

            _wait(incidents(1), proc, "the sampler OOM was not diagnosed live")
            make_journal(journal, entries[47:])
            _wait(incidents(2), proc, "the wedged stop was not diagnosed live")
            messages = [sock.recv(4096) for _ in range(2)]
            assert b"WATCHDOG=1" in messages
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        rest = []
        sock.settimeout(0.5)
        try:
            while True:
                rest.append(sock.recv(4096))
        except TimeoutError:
            pass
        assert b"STOPPING=1" in rest
    labels = [i["label"] for i in read_rows(store, "incidents")]
    assert labels == ["sampler_warmup_oom", "wedged_stop"]
    assert len(read_rows(store, "actions")) == 10
    assert sum(1 for e in store.read() if e.type == "log.recorded") == 86


def test_watch_refuses_bad_arguments(tmp_path: Path, sqlite_url: str) -> None:
    from click.testing import CliRunner

    from advisor.cli.main import cli

    result = CliRunner().invoke(cli, ["watch", "--auto", "--db", sqlite_url])
    assert result.exit_code == 2 and "--auto needs a policy: --policy FILE" in result.output
    result = CliRunner().invoke(
        cli, ["watch", "--journal-file", str(tmp_path / "none.journal"), "--db", sqlite_url]
    )
    assert result.exit_code in (2, 4)


def test_discovery_reads_the_command_systemd_holds(box: SystemdBox, tmp_path: Path) -> None:
    """Without --unit, the units are those whose ExecStart (over D-Bus) is a server's."""
    import sys

    from advisor.execution.bus import SystemdBus
    from advisor.execution.discover import inference_units

    server = tmp_path / "vllm" / "entrypoints" / "openai"
    server.mkdir(parents=True)
    (server / "api_server.py").write_text("import time\ntime.sleep(600)\n")
    box.install(
        "vllm-a.service",
        f"[Service]\nWorkingDirectory={tmp_path}\nExecStart="
        f"{sys.executable} -m vllm.entrypoints.openai.api_server "
        "--model x\n",
    )
    box.install(
        "ssh.service",
        f"[Service]\nWorkingDirectory={tmp_path}\n"
        f"ExecStart={sys.executable} -c 'import time; time.sleep(600)'\n",
    )
    box.systemctl("start", "vllm-a.service", "ssh.service")
    with SystemdBus(box.bus_address, peer_to_peer=True) as bus:
        found = inference_units(bus)
    assert [(f.unit, f.engine, f.state) for f in found] == [
        ("vllm-a.service", "vllm", "active/running")
    ]


def test_the_shipped_unit_file_runs_watch_as_a_notify_service() -> None:
    import configparser

    path = Path(__file__).resolve().parents[2] / "deploy" / "advisor-watch.service"
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read_string(path.read_text())
    service = unit["Service"]
    assert service["Type"] == "notify" and int(service["WatchdogSec"]) > 0
    assert service["ExecStart"].split()[1:] == ["watch", "--metrics", "127.0.0.1:9750"]
    assert service["KillMode"] == "mixed" and unit["Install"]["WantedBy"] == "multi-user.target"


@needs_journal
def test_watch_with_auto_applies_what_the_policy_allows(
    tmp_path: Path, sqlite_url: str, opener: Callable[[str], EventStore], seed_journal: Path
) -> None:
    entries = [_fields(json.loads(line)) for line in seed_journal.read_text().splitlines()]
    journal = make_journal(tmp_path / "live.journal", entries)
    policy = tmp_path / "policy.toml"
    policy.write_text(
        "cooldown_s = 0\nmax_actions_per_hour = 20\n[[allow]]\n"
        'units = "vllm-*.service"\n'
        'kinds = ["hold_restarts", "set_flag", "wait_gpu_free", "restart", "kill",'
        ' "set_unit_option", "reset_failed"]\n'
    )
    proc = subprocess.Popen(
        advisor_argv(
            "watch",
            "--journal-file",
            str(journal),
            "--no-gpu",
            "--auto",
            "--policy",
            str(policy),
            "--backend",
            "dry-run",
            "--db",
            sqlite_url,
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    store = opener(sqlite_url)

    lines: list[bytes] = []
    assert proc.stderr is not None
    reader = threading.Thread(
        target=lambda: lines.extend(iter(proc.stderr.readline, b"")), daemon=True
    )
    reader.start()

    def previewed() -> bool:
        return sum(b"dry run: would apply" in line for line in list(lines)) >= 2

    try:
        _wait(previewed, proc, "the policy's plans were not previewed")
        time.sleep(1.0)  # more batches, more passes: still said once
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        reader.join(timeout=10)
        proc.stderr.close()
    out = b"".join(lines)
    assert proc.returncode == 0, out
    plan = b"gpu-node-07/vllm-minimax-m25.service@2026-02-21T00:32:55.000000Z"
    assert b"dry run: would apply " + plan in out and out.count(b"would apply " + plan) == 1
    # A dry run approves, runs and records nothing: the plans wait as they were proposed.
    Projector(store).catch_up()
    rows = read_rows(store, "actions")
    assert len(rows) == 10 and {r["status"] for r in rows} == {"proposed"}


@needs_journal
def test_watch_ships_to_a_central_store(
    tmp_path: Path, sqlite_url: str, opener: Callable[[str], EventStore], seed_journal: Path
) -> None:
    entries = [_fields(json.loads(line)) for line in seed_journal.read_text().splitlines()]
    journal = make_journal(tmp_path / "live.journal", entries)
    central_url = f"sqlite:///{tmp_path / 'central.db'}"
    proc = subprocess.Popen(
        advisor_argv(
            "watch",
            "--journal-file",
            str(journal),
            "--no-gpu",
            "--ship-to",
            central_url,
            "--db",
            sqlite_url,
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:

        def shipped() -> bool:
            try:
                central = opener(central_url)
            except Exception:
                return False
            Projector(central).catch_up()
            return len(read_rows(central, "incidents")) == 2

        _wait(shipped, proc, "nothing reached the central store")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
