"""DuckDB reads a SQLite store only in a process of its own (advisor.reports.apart): a
process that holds the store through sqlite3 — the console — keeps its locks when the
fleet's figures are read, so another process closing the store does not take the
write-ahead log from under it, and the console's next write is seen by everyone."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from advisor.console.fleet import stats_report
from advisor.core.errors import InputError, StoreError
from advisor.execution.decisions import approve
from advisor.pipeline.processing import Processor
from advisor.reports.analytics import connect_store, query_store
from advisor.reports.stats import store_stats
from advisor.store import EventFilter, EventStore
from advisor.views.read.actions import all_actions
from ingest.journal_sources import ingest_json_file


def _in_another_process(db: Path, sql: str) -> list[str]:
    """`sql`'s rows (each as text) from a fresh process opening the store with sqlite3."""
    script = (
        "import sqlite3, sys\n"
        "c = sqlite3.connect(sys.argv[1])\n"
        "print('\\n'.join(str(r[0]) for r in c.execute(sys.argv[2])))\n"
        "c.close()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(db), sql],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.split()


def test_the_fleet_page_leaves_the_console_its_locks(
    diagnosed: EventStore, sqlite_url: str, tmp_path: Path
) -> None:
    db = tmp_path / "events.db"
    pending = [r.action_id for r in all_actions(diagnosed)]  # the console holds the store
    assert pending
    report = stats_report(sqlite_url)  # the fleet page, in the console's process
    assert report["crashes_by_label"]
    # Another process opens the store and closes it: with the console's locks gone it
    # believed itself the last, checkpointed and deleted the WAL the console writes to.
    assert _in_another_process(db, "SELECT count(*) FROM events") != []
    assert (tmp_path / "events.db-wal").exists()
    approve(diagnosed, pending[0], "tester")
    assert len(list(diagnosed.read(EventFilter(type="action.approved")))) == 1
    seen = _in_another_process(db, "SELECT count(*) FROM events WHERE type = 'action.approved'")
    assert seen == ["1"]
    assert _in_another_process(db, "PRAGMA integrity_check") == ["ok"]


def test_duckdb_is_not_let_open_a_sqlite_store_in_this_process(diagnosed: EventStore) -> None:
    with pytest.raises(StoreError, match="in a process of its own"):
        connect_store(diagnosed.url)


def test_answers_and_errors_come_back_from_the_other_process(
    store_url: str, opener: Callable[[str], EventStore], seed_journal: Path
) -> None:
    """The same answers on SQLite (from the other process) and on PostgreSQL (from here)."""
    store = opener(store_url)
    ingest_json_file(store, seed_journal)
    Processor(store).run(final=True)
    answer = query_store(store_url, "SELECT count(*) AS n FROM incidents", sandbox=True)
    path = "sqlite scanner" if store.dialect == "sqlite" else "postgres scanner"
    assert (answer.path, answer.columns, answer.rows) == (path, ["n"], [(2,)])
    with pytest.raises(InputError, match="query: Catalog Error"):
        query_store(store_url, "SELECT * FROM no_such_view", sandbox=True)
    labels = store_stats(store_url)["crashes_by_label"]
    assert sorted(row["label"] for row in labels) == ["sampler_warmup_oom", "wedged_stop"]
    assert store_stats(store_url, host="no-such-host")["crashes_by_label"] == []
