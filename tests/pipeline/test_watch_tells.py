"""`advisor watch` as a process tells people: it prints a line when it opens an incident and
when a plan waits for approval, sends each once to the `[notify]` targets of its settings
file (a real HTTP sink on 127.0.0.1 standing in for a webhook and an Alertmanager), and
serves /metrics on the address `--metrics` gives."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import advisor_argv
from tests.http_sink import Sink, serve_sink
from tests.journal_fixtures import Entry, have_journal_tools, make_journal

UNIT = "vllm-minimax-m25.service"


@pytest.fixture
def sink() -> Iterator[Sink]:
    yield from serve_sink()


def _fields(obj: dict[str, object]) -> Entry:
    out: Entry = []
    for name, value in obj.items():
        if isinstance(value, list):
            out.append((name, bytes(value)))  # type: ignore[arg-type]
        elif isinstance(value, str) and name != "__CURSOR":
            out.append((name, value))
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait(condition: Callable[[], bool], proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def _told(sink: Sink) -> Counter[tuple[str, str]]:
    return Counter(
        (a["labels"]["incident"], a["annotations"]["kind"])
        for alerts in sink.bodies("/api/v2/alerts")
        for a in alerts
    )


@pytest.mark.skipif(
    not have_journal_tools(), reason="journalctl and systemd-journal-remote are needed"
)
def test_watch_says_and_notifies_once_and_serves_metrics(
    tmp_path: Path, sqlite_url: str, seed_journal: Path, sink: Sink
) -> None:
    entries = [_fields(json.loads(line)) for line in seed_journal.read_text().splitlines()]
    journal = make_journal(tmp_path / "live.journal", entries[:47])
    config = tmp_path / "advisor.toml"
    config.write_text(
        f'[notify]\nurls = ["json://127.0.0.1:{sink.port}/hook"]\nalertmanager = ["{sink.url}"]\n'
    )
    listen = f"127.0.0.1:{_free_port()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADVISOR_")}
    env["ADVISOR_CONFIG"] = str(config)
    argv = ("watch", "--journal-file", str(journal), "--no-gpu", "--db", sqlite_url)
    proc = subprocess.Popen(
        advisor_argv(*argv, "--metrics", listen),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:

        def kinds() -> list[str]:
            return sorted(k for _, k in _told(sink))

        _wait(lambda: kinds() == ["incident_opened", "plan_pending"], proc, "not told live")
        make_journal(journal, entries[47:])
        _wait(lambda: len(kinds()) == 4, proc, "the wedged stop was not told")
        with urllib.request.urlopen(f"http://{listen}/metrics", timeout=30) as response:
            metrics = response.read().decode()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    told = _told(sink)
    assert set(told.values()) == {1} and len(told) == 4
    assert len(sink.bodies("/hook")) == 4
    lines = err.decode().splitlines()
    assert f"metrics on http://{listen}/metrics" in lines
    opened = [line for line in lines if line.startswith("incident opened: ")]
    assert [line.split(": ")[2].split(" (")[0] for line in opened] == [
        "sampler_warmup_oom",
        "wedged_stop",
    ]
    proposed = [line for line in lines if line.startswith("plan proposed for ")]
    assert len(proposed) == 2 and all("advisor approve " in line for line in proposed)
    samples = {
        (s.name, s.labels.get("label"), s.labels.get("status")): s.value
        for family in text_string_to_metric_families(metrics)
        for s in family.samples
    }
    assert samples[("advisor_incidents", "sampler_warmup_oom", "open")] == 1
    assert samples[("advisor_plans_pending", None, None)] == 2
    _restart_tells_nothing(tmp_path, env, argv, sink)


def _restart_tells_nothing(
    tmp_path: Path, env: dict[str, str], argv: tuple[str, ...], sink: Sink
) -> None:
    """The daemon started again on the same store: ready (what arrived meanwhile processed
    and told), yet nothing is sent again."""
    address = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(address)
        sock.settimeout(60)
        proc = subprocess.Popen(
            advisor_argv(*argv),
            env={**env, "NOTIFY_SOCKET": address},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            assert sock.recv(4096).startswith(b"READY=1")
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
    # SIGTERM right after READY=1 is a clean stop: the handler is in place before READY=1.
    assert proc.returncode == 0, err
    assert not [line for line in err.decode().splitlines() if "opened" in line]
    assert len(sink.bodies("/hook")) == 4 and sum(_told(sink).values()) == 4
