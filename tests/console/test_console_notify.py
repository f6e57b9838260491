"""A `notify` step run from the console tells the same `[notify]` targets, and records the
same events, as `advisor remediate` run with the same settings: both build their backend the
one way (`backend_for`, with the settings' targets). The console is the app `advisor serve`
builds (`console_for`), served by uvicorn in this process so that the backend can be one
that acts on no real unit; the targets are a real HTTP receiver on 127.0.0.1."""

from __future__ import annotations

import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from click.testing import CliRunner

import advisor.pipeline.backend_setup as backends_module
from advisor.cli.main import cli
from advisor.cli.serve import console_for
from advisor.console.app import build_app
from advisor.core.ids import short_id
from advisor.core.settings import load_settings
from advisor.pipeline.processing import Processor
from advisor.store import EventFilter, EventStore
from ingest.journal_sources import ingest_json_file
from tests.console.serving import Client, free_port
from tests.http_sink import Sink, serve_sink
from tests.telling import Telling
from tests.waiting import wait

TOKEN = "correct horse battery staple"
CONSOLE = "https://advisor.example"  # where people reach the console: notices link there
GOLDEN = (
    Path(__file__).parents[1]
    / "golden/gpu_hardware_fault/xid79-fallen-off-bus-v011-tp2-full-journal.jsonl"
)
HOST, UNIT = "gpu-h100-44", "vllm.service"
PLAN = f"{HOST}/{UNIT}@2025-12-03T02:10:00.000289Z"


@pytest.fixture
def sink() -> Iterator[Sink]:
    yield from serve_sink()


@pytest.fixture
def settings_with_a_target(sink: Sink, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The settings name one [notify] target (the sink); the systemd backend is `Telling`."""
    config = tmp_path / "advisor.toml"
    target = f"json://127.0.0.1:{sink.port}/hook"
    config.write_text(
        f'host = "{HOST}"\n[console]\ntoken = "{TOKEN}"\n[notify]\nurls = ["{target}"]\n'
        f'console_url = "{CONSOLE}"\n'
    )
    monkeypatch.setenv("ADVISOR_CONFIG", str(config))
    monkeypatch.delenv("ADVISOR_HOST", raising=False)

    def systemd_backend(root: Path, **kwargs: Any) -> Telling:
        return Telling(host=kwargs.get("host"), notices=kwargs.get("notices"))

    monkeypatch.setattr(backends_module, "systemd_backend", systemd_backend)


def _diagnosed(opener: Callable[[str], EventStore], url: str) -> EventStore:
    store = opener(url)
    ingest_json_file(store, GOLDEN)
    Processor(store).run(final=True)
    return store


def _actions(store: EventStore) -> list[tuple[str, Any]]:
    """Each action event's type and what it says (times and executors left out)."""
    out = []
    for e in store.read(EventFilter()):
        if e.type.startswith("action.") and e.type != "action.proposed":
            payload = e.payload.model_dump()
            out.append((e.type, {k: payload.get(k) for k in ("action_id", "detail", "error")}))
    return out


@contextmanager
def _serving(app: Any) -> Iterator[str]:
    """`app` on uvicorn in a thread of this process, until the block ends."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.mark.usefixtures("settings_with_a_target")
def test_a_notify_step_run_in_the_console_tells_whom_remediate_tells(
    sink: Sink, tmp_path: Path, opener: Callable[[str], EventStore]
) -> None:
    cli_url, console_url = (f"sqlite:///{tmp_path / name}" for name in ("cli.db", "console.db"))
    by_cli = _diagnosed(opener, cli_url)
    runner = CliRunner()
    for argv in (["approve", PLAN], ["remediate", f"{HOST}/{UNIT}", "--yes"]):
        result = runner.invoke(cli, [*argv, "--db", cli_url])
        assert result.exit_code == 0, result.output
    assert len(sink.bodies("/hook")) == 1  # remediate told the target

    by_console = _diagnosed(opener, console_url)
    conf = load_settings(db=console_url)
    console = console_for(conf, by_console, "systemd", tmp_path / "systemd")
    with _serving(build_app(console)) as base:
        client = Client(base)
        assert client.login(TOKEN, "ops").status == 303
        for path in ("/approve", "/run"):
            fields = {"csrftoken": client.csrf(), "id": short_id(PLAN)}
            assert client.post(path, fields).status == 303
        wait("the console's run to tell the target", lambda: len(sink.bodies("/hook")) == 2)
        wait("the run's end", lambda: len(_actions(by_console)) == len(_actions(by_cli)))
        # each message links to the incident's page, which this console serves
        for body in sink.bodies("/hook"):
            link = body["message"].splitlines()[-1]
            assert link == f"console: {CONSOLE}/incident/{urllib.parse.quote(PLAN)}", body
            page = client.get(link.removeprefix(f"console: {CONSOLE}"))
            assert page.status == 200 and 'id="plan"' in page.body
    assert _actions(by_console) == _actions(by_cli)
    told = [e for e in _actions(by_console) if e[0] == "action.succeeded"]
    assert told and "1 target(s) told" in str(told[0][1]["detail"]), told
    assert "recorded only" not in str(_actions(by_console))
