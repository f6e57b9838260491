"""Tamper evidence (docs/integrity.md), run on SQLite and on PostgreSQL: what an attacker
holding the store file could do before, reproduced, and what stops or reveals it now — no
INSERT over a stored event (SQLite's REPLACE), checkpoints append-only, and chain heads
signed with a host key outside the store that `advisor verify --heads` compares with."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from alembic import command
from click.testing import CliRunner
from sqlalchemy import text
from sqlalchemy.engine import make_url

from advisor.cli.main import cli
from advisor.core.events import validate_batch
from advisor.sim.box import SystemdBox
from advisor.store import Checkpoint, EventStore, open_store
from advisor.store import migrate as store_migrate
from advisor.store.chain import GENESIS_HASH
from advisor.store.engine import make_engine
from advisor.store.integrity.audit import status, verify
from advisor.store.integrity.headlog import (
    HEAD_FIELD,
    IDENTIFIER,
    HeadWriter,
    JournalSink,
    default_key_path,
    heads_file_for,
    load_key,
    load_or_create_key,
    store_label,
)
from advisor.store.integrity.heads import HostKey, SignedHead
from advisor.store.types import AppendResult
from advisor.views.fold.projector import CHECKPOINT, Projector
from tests.boxproc import advisor_in

Opener = Callable[[str], EventStore]


def log_event(i: int, *, source: str = "test") -> dict[str, Any]:
    return {
        "stream": "h/u.service",
        "time_us": 1_700_000_000_000_000 + i,
        "source": source,
        "key": i,
        "payload": {"type": "log.recorded", "origin": "text", "message": f"line {i}"},
    }


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def _ingest(db: str, folder: Path, name: str, lines: int) -> None:
    """`advisor ingest text` of a log with `lines` lines: what signs the heads."""
    log = folder / f"{name}.log"
    log.write_text("".join(f"{name} line {i}: INFO serving\n" for i in range(lines)))
    code, out, err = _invoke(
        "ingest", "text", str(log), "--service", "vllm", "--db", db, "--no-diagnose"
    )
    assert code == 0, out + err


def _verify(db: str, *extra: str) -> tuple[int, dict[str, Any]]:
    code, out, err = _invoke("verify", "--json", "--db", db, *extra)
    assert out, err
    return code, json.loads(out)


def _heads_file() -> Path:
    return heads_file_for(default_key_path())


def _is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def _sqlite_path(url: str) -> str:
    return make_url(url).database or ""


def _rechain(url: str, from_seq: int) -> None:
    """What an attacker with the store (and DDL) does: alter event `from_seq` and rewrite the
    hash of it and of every later event, so the chain verifies again. SQLite: by INSERT OR
    REPLACE, as was possible before migration 0008 (its trigger dropped); PostgreSQL: by
    UPDATE, its trigger dropped."""
    store = open_store(url)
    try:
        with store.connect() as conn:
            prev_row = conn.execute(
                text("SELECT hash FROM events WHERE seq = :s"), {"s": from_seq - 1}
            ).scalar()
        prev = GENESIS_HASH if prev_row is None else bytes(prev_row)
        rows = []
        for event in store.read_raw(after_seq=from_seq - 1):
            payload = event.payload
            if event.seq == from_seq:
                body = orjson.loads(payload)
                body["message"] = "nothing happened here"
                payload = orjson.dumps(body, option=orjson.OPT_SORT_KEYS).decode()
            altered = type(event)(
                event.seq,
                event.stream,
                event.type,
                event.version,
                event.time_us,
                event.recorded_us,
                event.source,
                event.key,
                payload,
                b"",
                event.origin,
            )
            prev = altered.recomputed_hash(prev)
            rows.append((event.seq, payload, prev))
        with store.begin() as conn:
            if _is_sqlite(url):
                conn.exec_driver_sql("DROP TRIGGER events_no_replace")
                for seq, payload, hash_ in rows:
                    conn.execute(
                        text(
                            "INSERT OR REPLACE INTO events SELECT seq, stream, type, "
                            "schema_version, event_time_us, recorded_time_us, source_id, idem_key, "
                            ":p, :h, origin FROM events WHERE seq = :s"
                        ),
                        {"p": payload, "h": hash_, "s": seq},
                    )
            else:
                conn.exec_driver_sql("DROP TRIGGER events_append_only ON events")
                for seq, payload, hash_ in rows:
                    conn.execute(
                        text("UPDATE events SET payload = :p, hash = :h WHERE seq = :s"),
                        {"p": payload, "h": hash_, "s": seq},
                    )
    finally:
        store.close()


def _cut(url: str, after_seq: int) -> None:
    """An attacker with the store (and DDL) deletes the events after `after_seq`."""
    store = open_store(url)
    try:
        with store.begin() as conn:
            if _is_sqlite(url):
                conn.exec_driver_sql("DROP TRIGGER events_no_delete")
            else:
                conn.exec_driver_sql("DROP TRIGGER events_append_only ON events")
            conn.execute(text("DELETE FROM events WHERE seq > :s"), {"s": after_seq})
    finally:
        store.close()


def _delete(url: str) -> None:
    """An attacker deletes the store: the SQLite file, the PostgreSQL tables."""
    if _is_sqlite(url):
        for suffix in ("", "-wal", "-shm"):
            Path(_sqlite_path(url) + suffix).unlink(missing_ok=True)
        return
    engine = make_engine(url)
    with engine.begin() as conn:
        schema = conn.exec_driver_sql("SELECT current_schema()").scalar()
        conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    engine.dispose()


# ------------------------------------------------------------ no INSERT over a stored row


def test_sqlite_refuses_replace_over_a_stored_event_or_source(
    sqlite_url: str, opener: Opener
) -> None:
    """Before migration 0008, `INSERT OR REPLACE` with a stored seq replaced the event: the
    DELETE trigger does not fire for REPLACE's delete."""
    store = opener(sqlite_url)
    store.append(validate_batch([log_event(i) for i in range(10)]))
    conn = sqlite3.connect(_sqlite_path(sqlite_url))
    columns = (
        "seq, stream, type, schema_version, event_time_us, recorded_time_us, "
        "source_id, idem_key, '{}', hash, origin"
    )
    attempts = [
        f"INSERT OR REPLACE INTO events SELECT {columns} FROM events WHERE seq = 5",
        f"REPLACE INTO events SELECT {columns} FROM events WHERE seq = 5",
        # a new seq with a stored (source, key): REPLACE would delete the stored event
        f"INSERT OR REPLACE INTO events SELECT {columns.replace('seq,', '99,', 1)} "
        "FROM events WHERE seq = 5",
        "INSERT OR REPLACE INTO sources VALUES (1, 'someone-else')",
        "INSERT OR REPLACE INTO sources SELECT 7, name FROM sources WHERE id = 1",
        f"INSERT INTO events SELECT {columns} FROM events WHERE seq = 5 "
        "ON CONFLICT (seq) DO UPDATE SET payload = excluded.payload",
    ]
    try:
        for statement in attempts:
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                conn.execute(statement)
            conn.rollback()
    finally:
        conn.close()
    assert verify(store).ok and [e.key for e in store.read()] == list(range(10))
    assert status(store).by_type == {"log.recorded": 10}


def test_upsert_over_a_stored_row_is_refused(store_url: str, opener: Opener) -> None:
    """`INSERT … ON CONFLICT DO UPDATE` (PostgreSQL's only REPLACE) hits the UPDATE guard, on
    events, sources and checkpoints."""
    store = opener(store_url)
    store.append(validate_batch([log_event(i) for i in range(3)]), Checkpoint("r", {"at": 3}))
    columns = (
        "seq, stream, type, schema_version, event_time_us, recorded_time_us, "
        "source_id, idem_key, payload, hash, origin"
    )
    for statement in (
        f"INSERT INTO events ({columns}) SELECT {columns} FROM events WHERE seq = 2 "
        "ON CONFLICT (seq) DO UPDATE SET payload = '{}'",
        "INSERT INTO sources (id, name) SELECT id, name FROM sources WHERE id = 1 "
        "ON CONFLICT (id) DO UPDATE SET name = 'other'",
        "INSERT INTO checkpoints (name, n, position, updated_time_us) SELECT name, n, "
        "position, updated_time_us FROM checkpoints WHERE name = 'r' "
        "ON CONFLICT (name, n) DO UPDATE SET position = '{\"at\": 0}'",
    ):
        with pytest.raises(Exception, match="append-only"), store.begin() as conn:
            conn.execute(text(statement))
    assert verify(store).ok and store.checkpoint("r") == {"at": 3}


# ------------------------------------------------------------ checkpoints append-only


def test_checkpoints_are_append_only(store_url: str, opener: Opener) -> None:
    """A reader's position was one row UPDATEd in place: an attacker could move a reader on
    (so that it skips lines) or back, unrecorded. Now each position is a new row, and the
    rows cannot be changed or removed."""
    store = opener(store_url)
    for at in (1, 2, 2, 3):
        store.append([], Checkpoint("journal", {"at": at}))
    assert store.checkpoint("journal") == {"at": 3}
    assert status(store).checkpoints["journal"]["at"] == 3
    with store.connect() as conn:
        rows = conn.execute(
            text("SELECT n, position FROM checkpoints WHERE name = 'journal' ORDER BY n")
        ).all()
    assert [(n, json.loads(p)["at"]) for n, p in rows] == [(1, 1), (2, 2), (3, 3)]
    refused = ["UPDATE checkpoints SET position = '{\"at\": 99}'", "DELETE FROM checkpoints"]
    if not _is_sqlite(store_url):
        refused.append("TRUNCATE checkpoints")
    else:
        refused.append("INSERT OR REPLACE INTO checkpoints VALUES ('journal', 3, '{}', 0)")
    for statement in refused:
        with pytest.raises(Exception, match="append-only"), store.begin() as conn:
            conn.execute(text(statement))
    assert store.checkpoint("journal") == {"at": 3}


def test_projections_fold_and_rebuild_with_append_only_checkpoints(
    store_url: str, opener: Opener
) -> None:
    """The projector's position is a checkpoint: `rebuild` appends a reset row instead of
    deleting it, and folding goes on from the latest row."""
    store = opener(store_url)
    store.append(validate_batch([log_event(i) for i in range(20)]))
    projector = Projector(store)
    assert projector.catch_up() == 20 and projector.position() == 20
    store.append(validate_batch([log_event(i) for i in range(20, 25)]))
    assert projector.catch_up() == 5
    assert projector.rebuild() == 25 and projector.position() == 25
    with store.connect() as conn:
        positions = [
            json.loads(p)["seq"]
            for (p,) in conn.execute(
                text("SELECT position FROM checkpoints WHERE name = :n ORDER BY n"),
                {"n": CHECKPOINT},
            )
        ]
    assert positions == [20, 25, 0, 25]


def test_migration_0008_keeps_each_readers_position(store_url: str, opener: Opener) -> None:
    engine = make_engine(store_url)
    config = store_migrate._config()
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0007")
        conn.execute(
            text(
                "INSERT INTO checkpoints (name, position, updated_time_us) "
                "VALUES (:name, :position, :at)"
            ),
            [
                {"name": "a", "position": '{"at":1}', "at": 10},
                {"name": "b", "position": '{"at":2}', "at": 20},
            ],
        )
    engine.dispose()
    store = opener(store_url)  # upgrades to the head
    assert (store.checkpoint("a"), store.checkpoint("b")) == ({"at": 1}, {"at": 2})
    store.append([], Checkpoint("a", {"at": 5}))
    with store.connect() as conn:
        rows = conn.execute(text("SELECT name, n, position FROM checkpoints ORDER BY name, n"))
        assert [tuple(r) for r in rows] == [
            ("a", 1, '{"at":1}'),
            ("a", 2, '{"at":5}'),
            ("b", 1, '{"at":2}'),
        ]
    with pytest.raises(Exception, match="append-only"), store.begin() as conn:
        conn.execute(text("DELETE FROM checkpoints WHERE name = 'b'"))


# ------------------------------------------------------------ signed heads


def test_a_rechained_history_passes_verify_but_not_verify_heads(
    store_url: str, tmp_path: Path
) -> None:
    _ingest(store_url, tmp_path, "first", 30)
    _ingest(store_url, tmp_path, "second", 20)
    assert [h["seq"] for h in map(json.loads, _heads_file().read_text().splitlines())] == [30, 50]
    assert _verify(store_url, "--heads")[0] == 0

    _rechain(store_url, 12)
    code, plain = _verify(store_url)
    assert code == 0 and plain["ok"], "the re-chained history verifies: the attack works"
    code, report = _verify(store_url, "--heads")
    assert code == 3 and not report["ok"]
    reasons = [f["reason"] for f in report["heads"]["findings"] if not f["ok"]]
    assert len(reasons) == 2 and all("history was rewritten" in r for r in reasons)
    code, out, err = _invoke("verify", "--heads", "--db", store_url)
    assert code == 3 and "hash chain intact" in out
    assert "Error: heads: seq 30 holds another hash than the one signed" in err


def test_a_cut_tail_passes_verify_but_not_verify_heads(store_url: str, tmp_path: Path) -> None:
    _ingest(store_url, tmp_path, "first", 30)
    _ingest(store_url, tmp_path, "second", 20)
    _cut(store_url, 30)
    code, plain = _verify(store_url)
    assert code == 0 and plain["last_seq"] == 30, "the cut chain verifies: the attack works"
    code, report = _verify(store_url, "--heads")
    assert code == 3
    (finding,) = [f for f in report["heads"]["findings"] if not f["ok"]]
    assert finding["seq"] == 50 and "the chain ends at seq 30" in finding["reason"]
    assert "events were cut" in finding["reason"]


def test_a_deleted_store_is_reported_by_verify_heads(store_url: str, tmp_path: Path) -> None:
    _ingest(store_url, tmp_path, "first", 30)
    _delete(store_url)
    code, _out, _err = _invoke("verify", "--db", store_url)
    assert code == 1  # plain verify: no store to read, and nothing says there was one
    code, report = _verify(store_url, "--heads")
    assert code == 3 and not report["ok"] and report["reason"] == "the store does not exist"
    (finding,) = report["heads"]["findings"]
    assert "the store does not exist, but 1 head was signed for it" in finding["reason"]
    code, _out, err = _invoke("verify", "--heads", "--db", store_url)
    assert code == 3 and "deleted or replaced" in err
    # A store made afresh in its place is another chain: the head does not match it.
    _ingest(store_url, tmp_path, "again", 40)
    code, report = _verify(store_url, "--heads")
    assert code == 3 and report["checked"] == 40
    assert any("history was rewritten" in f["reason"] for f in report["heads"]["findings"])


def test_forged_heads_and_another_key_are_findings(sqlite_url: str, tmp_path: Path) -> None:
    _ingest(sqlite_url, tmp_path, "first", 10)
    heads_file = _heads_file()
    (line,) = heads_file.read_text().splitlines()
    signed = SignedHead.from_json(json.loads(line))
    assert signed.valid() and signed.store == store_label(sqlite_url)
    # an edited head (another seq under the same signature) does not verify
    edited = {**json.loads(line), "seq": 5}
    # a head signed by another key
    other = HostKey.generate().sign(signed.host, 10, signed.hash, signed.time_us, signed.store)
    with open(heads_file, "a") as f:
        f.write(json.dumps(edited) + "\n" + json.dumps(other.as_json()) + "\nnot a head\n")
    code, report = _verify(sqlite_url, "--heads")
    assert code == 3
    reasons = sorted(f["reason"] for f in report["heads"]["findings"] if not f["ok"])
    assert len(reasons) == 2
    assert "1 head for this store is signed by another key" in reasons[0]
    assert reasons[1] == "a head's signature does not verify"
    assert report["heads"]["unreadable"] == 1
    # the key removed (while heads exist) is a finding too
    default_key_path().unlink()
    code, report = _verify(sqlite_url, "--heads-file", str(heads_file))
    assert code == 3 and "is missing" in report["heads"]["findings"][0]["reason"]
    assert not default_key_path().exists(), "a reading command never creates the key"


def test_the_key_is_made_once_0600_and_verify_never_makes_it(
    sqlite_url: str, tmp_path: Path
) -> None:
    key_path = default_key_path()
    code, _out, err = _invoke("verify", "--heads", "--db", sqlite_url)  # no store, no heads
    assert code == 1 and "does not exist" in err and not key_path.exists()
    _ingest(sqlite_url, tmp_path, "first", 5)
    assert key_path.stat().st_mode & 0o777 == 0o600
    key = load_key(key_path)
    assert key is not None and load_or_create_key(key_path).public_key == key.public_key
    _ingest(sqlite_url, tmp_path, "second", 5)
    heads = [SignedHead.from_json(json.loads(x)) for x in _heads_file().read_text().splitlines()]
    assert [h.seq for h in heads] == [5, 10] and all(h.valid(key.public_key) for h in heads)
    code, report = _verify(sqlite_url, "--key", str(key_path))
    assert code == 0 and report["heads"]["findings"] == [
        {"ok": True, "seq": None, "reason": "2 signed heads match the chain"}
    ]


def test_default_key_path(monkeypatch: pytest.MonkeyPatch) -> None:
    assert default_key_path({"ADVISOR_KEY": "/k/key"}) == Path("/k/key")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert default_key_path({}) == Path("/etc/advisor/host-key")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert default_key_path({"XDG_CONFIG_HOME": "/c"}) == Path("/c/advisor/host-key")
    assert default_key_path({"HOME": "/h"}) == Path("/h/.config/advisor/host-key")
    assert heads_file_for(Path("/c/host-key")) == Path("/c/host-key.heads")


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_heads_are_coalesced_and_the_last_batch_is_always_signed(
    sqlite_url: str, opener: Opener, tmp_path: Path
) -> None:
    """A daemon that commits every second writes a head at most every interval; the batch
    after the last head is signed when the interval is up or the writer closes."""
    store = opener(sqlite_url)
    received: list[bytes] = []
    sockets = Path(tempfile.mkdtemp(prefix="heads-"))  # a short path: AF_UNIX's limit
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind(str(sockets / "journal"))
    server.settimeout(5)
    clock = _Clock()
    writer = HeadWriter(
        store,
        HostKey.generate(),
        host="h",
        label="test",
        heads_file=tmp_path / "heads",
        interval_s=3600,
        journal=JournalSink(sockets / "journal"),
        clock=clock,
    )
    for i in range(0, 30, 10):
        store.append(validate_batch([log_event(j) for j in range(i, i + 10)]))
    assert [h.seq for h in writer.written] == [10]
    clock.now += 3600
    store.append(validate_batch([log_event(30)]))
    store.append(validate_batch([log_event(31)]))
    writer.close()
    assert [h.seq for h in writer.written] == [10, 31, 32]
    store.append(validate_batch([log_event(40)]))
    assert len(writer.written) == 3, "closed: no more heads"
    lines = (tmp_path / "heads").read_text().splitlines()
    assert [SignedHead.from_json(json.loads(x)) for x in lines] == writer.written
    while len(received) < 3:
        received.append(server.recv(65536))
    server.close()
    (sockets / "journal").unlink()
    sockets.rmdir()
    fields = dict(line.split(b"=", 1) for line in received[2].splitlines())
    assert fields[b"SYSLOG_IDENTIFIER"] == IDENTIFIER.encode()
    assert fields[b"MESSAGE"] == b"advisor chain head seq 32 of test"
    assert SignedHead.from_json(json.loads(fields[HEAD_FIELD.encode()])) == writer.written[2]
    assert writer.journal_sent == 3


def test_without_journald_heads_still_go_to_the_file(
    sqlite_url: str, opener: Opener, tmp_path: Path
) -> None:
    store = opener(sqlite_url)
    writer = HeadWriter(
        store,
        HostKey.generate(),
        host="h",
        label="test",
        heads_file=tmp_path / "heads",
        journal=JournalSink(tmp_path / "no-journald"),
    )
    store.append(validate_batch([log_event(0)]))
    writer.observe(AppendResult(appended=0, last_seq=None))
    writer.close()
    assert writer.journal_sent == 0 and len((tmp_path / "heads").read_text().splitlines()) == 1


def test_heads_in_a_real_journal_reveal_what_the_heads_file_no_longer_shows(
    box: SystemdBox, tmp_path: Path
) -> None:
    """`advisor ingest` on a host with journald (the box's, real systemd 252) sends each
    head to the journal; an attacker who re-chains the store and deletes the heads file is
    still caught by the heads journald kept."""
    db = f"sqlite:///{tmp_path / 'events.db'}"
    log = tmp_path / "app.log"
    log.write_text("".join(f"line {i}: INFO serving\n" for i in range(25)))
    done = advisor_in(box, db, "ingest", "text", str(log), "--service", "vllm", "--no-diagnose")
    assert done.returncode == 0, done.stderr
    deadline = time.monotonic() + 15
    while IDENTIFIER not in box.journalctl("-o", "json", f"SYSLOG_IDENTIFIER={IDENTIFIER}"):
        assert time.monotonic() < deadline, "the head never reached the box's journal"
        time.sleep(0.1)
    journal = [arg for f in box.journal_files() for arg in ("--heads-journal-file", str(f))]
    code, report = _verify(db, *journal)
    assert code == 0, report
    assert [v for k, v in report["heads"]["sources"].items() if k.startswith("journal ")] == [1]

    _rechain(db, 3)
    _heads_file().unlink()
    assert _verify(db)[0] == 0
    code, report = _verify(db, *journal)
    assert code == 3
    assert report["heads"]["notes"] == [f"no heads file at {_heads_file()}"]
    (finding,) = [f for f in report["heads"]["findings"] if not f["ok"]]
    assert finding["seq"] == 25 and "history was rewritten" in finding["reason"]


def test_verify_heads_reads_journal_files_it_is_given_or_says_why_not(
    sqlite_url: str, tmp_path: Path
) -> None:
    _ingest(sqlite_url, tmp_path, "first", 3)
    code, _out, err = _invoke(
        "verify",
        "--heads",
        "--heads-journal-file",
        str(tmp_path / "none.journal"),
        "--db",
        sqlite_url,
    )
    assert code == 4 and err.startswith("Error: --heads-journal-file") and "no such file" in err
