"""One store, many processes, no lost write (issue 22): the console (a real `advisor serve`)
reads the fleet page and approves while `advisor stats`, `query`, `ingest`, `approve` and
`verify` run beside it as processes of their own, round after round; every write one of them
makes is read back by another (the console's approvals by the CLI's `verify`, and all of
them by this process), and a SQLite store stays whole (`PRAGMA integrity_check`)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sqlalchemy import make_url

from advisor.pipeline.processing import Processor
from advisor.store import EventFilter, EventStore, open_store
from advisor.views.read.actions import all_actions
from ingest.journal_sources import ingest_json_file
from tests.conftest import advisor_argv, run_advisor
from tests.console.serving import Client, served

TOKEN = "one store, many processes"
SAMPLER = "gpu-node-07/vllm-minimax-m25.service@2026-02-21T00:32:55.000000Z"
WEDGE = "gpu-node-07/vllm-minimax-m25.service@2026-02-21T00:33:27.400000Z"
# Each round: the console approves one step while the others run, the CLI another, and the
# console a third once they have all closed the store (what lost its WAL before).
ROUNDS = [
    (f"{SAMPLER}#0", f"{SAMPLER}#1", f"{WEDGE}#0"),
    (f"{SAMPLER}#3", f"{SAMPLER}#4", f"{WEDGE}#1"),
    (f"{SAMPLER}#5", f"{WEDGE}#2", f"{WEDGE}#3"),
]
SEED_LINES = 86
LINES_A_ROUND = 3


def _journal(seed_journal: Path, folder: Path, round_: int) -> Path:
    """A few new journal lines (new cursors) for round `round_`."""
    out = folder / f"round-{round_}.jsonl"
    entries = [json.loads(line) for line in seed_journal.read_text().splitlines()[:LINES_A_ROUND]]
    for i, entry in enumerate(entries):
        entry["__CURSOR"] = f"s=round{round_};i={i}"
        entry["MESSAGE"] = f"round {round_} line {i}"
    out.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return out


def _read_back(url: str, approved: set[str], lines: int) -> None:
    """From this process (neither the console nor the CLI): every approval, every line
    ingested, and a SQLite store whole."""
    with open_store(url, read_only=True) as store:
        statuses = {r.action_id: r.status for r in all_actions(store)}
        assert {a: statuses.get(a) for a in approved} == dict.fromkeys(approved, "approved")
        assert len(list(store.read(EventFilter(type="log.recorded")))) == lines
    _whole(url)


def _console_round(client: Client, action: str) -> None:
    """The fleet page (DuckDB, with the console holding the store), then an approval."""
    page = client.get("/fleet")
    assert page.status == 200 and "crashes_by_label" in page.body, page.body[-2000:]
    done = client.post("/approve", {"csrftoken": client.csrf(), "id": action, "next": "/"})
    assert done.status == 303, done.body


def _beside(url: str, journal: Path, action: str) -> list[subprocess.Popen[bytes]]:
    """The other processes of a round, started at once."""
    commands = [
        ["stats", "--json"],
        ["query", "SELECT count(*) FROM events", "--json"],
        ["ingest", "journal", "--file", str(journal), "--no-diagnose"],
        ["approve", action],
        ["verify"],
    ]
    return [
        subprocess.Popen(
            advisor_argv(*argv, "--db", url), stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for argv in commands
    ]


def _whole(url: str) -> None:
    database = make_url(url).database
    if make_url(url).get_backend_name() != "sqlite" or not database:
        return
    conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()


@pytest.mark.slow
def test_no_write_is_lost_between_processes(
    store_url: str, opener: Callable[[str], EventStore], seed_journal: Path, tmp_path: Path
) -> None:
    store = opener(store_url)
    ingest_json_file(store, seed_journal)
    Processor(store).run(final=True)
    store.close()
    approved: set[str] = set()
    with (
        served(
            store_url, "--token", TOKEN, "--backend", "dry-run", log=tmp_path / "serve.log"
        ) as base,
        ThreadPoolExecutor(1) as console,
    ):
        client = Client(base)
        assert client.login(TOKEN).status == 303
        for round_, (by_console, by_cli, after) in enumerate(ROUNDS, start=1):
            working = console.submit(_console_round, client, by_console)
            others = _beside(store_url, _journal(seed_journal, tmp_path, round_), by_cli)
            for proc in others:
                _out, err = proc.communicate(timeout=120)
                assert proc.returncode == 0, (proc.args, err.decode())
            working.result(timeout=120)
            done = client.post("/approve", {"csrftoken": client.csrf(), "id": after})
            assert done.status == 303, done.body
            approved |= {by_console, by_cli, after}
            _read_back(store_url, approved, SEED_LINES + LINES_A_ROUND * round_)
    assert run_advisor("verify", "--db", store_url).returncode == 0
    _whole(store_url)
