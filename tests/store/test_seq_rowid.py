"""Migration 0011: on SQLite, `events` is keyed by seq itself (the rowid), one B-tree fewer;
a store upgraded from 0010 keeps every event, its chain and its guards, and going back
restores the old table."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from alembic import command
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url

from advisor.core.events import validate_batch
from advisor.store import EventStore, open_store
from advisor.store.integrity.audit import verify
from advisor.store.migrate import _config, upgrade
from tests.store.test_store import log_event

Opener = Callable[[str], EventStore]


def _shape(url: str) -> tuple[str, list[str], list[str]]:
    """(seq's declared type, the indexes on events, its triggers)."""
    conn = sqlite3.connect(make_url(url).database or "")
    try:
        seq_type = next(row[2] for row in conn.execute("PRAGMA table_info(events)") if row[5])
        names = {
            kind: sorted(
                name
                for (name,) in conn.execute(
                    "SELECT name FROM sqlite_master WHERE tbl_name = 'events' AND type = ?",
                    (kind,),
                )
            )
            for kind in ("index", "trigger")
        }
    finally:
        conn.close()
    return seq_type, names["index"], names["trigger"]


def _downgrade(url: str, revision: str) -> None:
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            cfg = _config()
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, revision)
    finally:
        engine.dispose()


INDEXES = ["events_idempotency", "events_stream_seq", "events_stream_time", "events_type_seq"]
TRIGGERS = ["events_no_delete", "events_no_replace", "events_no_update"]


def test_seq_is_the_rowid_and_an_upgraded_store_keeps_its_events(sqlite_url: str) -> None:
    with open_store(sqlite_url) as store:
        store.append(validate_batch([log_event(i) for i in range(50)]))
    assert _shape(sqlite_url) == ("INTEGER", INDEXES, TRIGGERS)  # no autoindex on seq

    _downgrade(sqlite_url, "0010")  # the table as 0010 made it: seq beside a hidden rowid
    seq_type, indexes, triggers = _shape(sqlite_url)
    assert (seq_type, triggers) == ("BIGINT", TRIGGERS)
    assert indexes == sorted([*INDEXES, "sqlite_autoindex_events_1"])

    engine = create_engine(sqlite_url)
    try:
        assert upgrade(engine) == "0014"
    finally:
        engine.dispose()
    assert _shape(sqlite_url) == ("INTEGER", INDEXES, TRIGGERS)
    with open_store(sqlite_url) as store:
        assert verify(store).ok
        assert [e.seq for e in store.read()] == list(range(1, 51))
        store.append(validate_batch([log_event(i) for i in range(45, 60)]))  # 10 new, 5 stored
        assert [e.key for e in store.read()] == list(range(60))
        assert verify(store).ok
