"""The store's contract, run on SQLite and on PostgreSQL."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from advisor.core.errors import InvalidEventError, StoreError
from advisor.core.events import UPCASTERS, StoredEvent, validate_batch
from advisor.core.payloads import LogRecorded
from advisor.store import Checkpoint, EventFilter, EventStore, migrate, open_store
from advisor.store.integrity.audit import status, verify

Opener = Callable[[str], EventStore]


def log_event(
    i: int, *, source: str = "test", stream: str = "h/u.service", message: str | None = None
) -> dict[str, Any]:
    return {
        "stream": stream,
        "time_us": 1_700_000_000_000_000 + i,
        "source": source,
        "key": i,
        "payload": {
            "type": "log.recorded",
            "origin": "text",
            "message": message if message is not None else f"line {i}",
        },
    }


def test_append_and_read_back(store_url: str, opener: Opener) -> None:
    store = opener(store_url)
    result = store.append(validate_batch([log_event(i) for i in range(3000)]))
    assert (result.appended, result.duplicates, result.last_seq) == (3000, 0, 3000)
    got = list(store.read())
    assert [e.seq for e in got] == list(range(1, 3001))
    assert [e.payload.message for e in got] == [f"line {i}" for i in range(3000)]  # type: ignore[union-attr]
    assert isinstance(got[0].payload, LogRecorded)
    assert got[5].source == "test" and got[5].key == 5
    assert [e.seq for e in store.read(EventFilter(limit=2))] == [2999, 3000]


def test_an_event_read_back_is_the_validated_event(store_url: str, opener: Opener) -> None:
    """What `read` builds without validating (`stored_event`) is what validating the row
    makes: equal, the same fields set, frozen and hashable alike."""
    store = opener(store_url)
    store.append(validate_batch([log_event(7, message="hello")]))
    (got,) = store.read()
    valid = StoredEvent.model_validate(
        {**got.__dict__, "payload": got.payload.model_dump()}  # type: ignore[union-attr]
    )
    assert got == valid
    assert got.model_fields_set == valid.model_fields_set
    assert got.model_dump() == valid.model_dump()
    assert hash(got) == hash(valid)
    with pytest.raises(ValidationError):
        got.seq = 8  # type: ignore[misc]


def test_appends_are_idempotent_per_source_and_key(store_url: str, opener: Opener) -> None:
    store = opener(store_url)
    store.append(validate_batch([log_event(i) for i in range(10)]))
    again = store.append(validate_batch([log_event(i) for i in range(5, 15)] + [log_event(14)]))
    assert (again.appended, again.duplicates) == (5, 6)
    other = store.append(validate_batch([log_event(1, source="elsewhere")]))
    assert other.appended == 1
    assert len(list(store.read())) == 16
    assert verify(store).ok


def test_filters(store_url: str, opener: Opener) -> None:
    store = opener(store_url)
    store.append(validate_batch([log_event(i, stream=f"h/u{i % 2}") for i in range(10)]))
    assert [e.key for e in store.read(EventFilter(stream="h/u1"))] == [1, 3, 5, 7, 9]
    assert [e.key for e in store.read(EventFilter(since_us=1_700_000_000_000_007))] == [7, 8, 9]
    assert list(store.read(EventFilter(type="gpu.sampled"))) == []


def test_invalid_event_is_refused_before_the_table(store_url: str, opener: Opener) -> None:
    store = opener(store_url)
    bad = log_event(2)
    bad["payload"]["priority"] = "not a number"
    with pytest.raises(InvalidEventError, match="priority"):
        validate_batch([log_event(1), bad])
    with pytest.raises(InvalidEventError, match="stream"):
        validate_batch([log_event(1, stream="h/\nfake")])
    assert list(store.read()) == []


def test_a_batch_is_all_or_nothing(
    store_url: str, opener: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = opener(store_url)
    store.append(validate_batch([log_event(0)]))
    insert = store._insert

    def insert_then_fail(conn: Any, rows: list[tuple[Any, ...]]) -> None:
        insert(conn, rows)  # the events are in (by COPY on PostgreSQL), then a statement fails
        conn.exec_driver_sql("INSERT INTO no_such_table VALUES (1)")

    monkeypatch.setattr(store, "_insert", insert_then_fail)
    with pytest.raises(StoreError):
        store.append(
            validate_batch([log_event(i, source="new-source") for i in range(1, 50)]),
            Checkpoint("reader", {"offset": 99}),
        )
    monkeypatch.undo()
    assert [e.key for e in store.read()] == [0]
    assert store.checkpoint("reader") is None
    result = store.append(validate_batch([log_event(i, source="new-source") for i in range(1, 50)]))
    assert result.appended == 49


def test_checkpoint_is_saved_with_its_events(store_url: str, opener: Opener) -> None:
    store = opener(store_url)
    store.append(validate_batch([log_event(1)]), Checkpoint("file:a", {"offset": 10}))
    store.append(validate_batch([log_event(2)]), Checkpoint("file:a", {"offset": 20}))
    assert store.checkpoint("file:a") == {"offset": 20}
    assert status(store).checkpoints["file:a"]["offset"] == 20


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE events SET payload = '{}' WHERE seq = 1",
        "DELETE FROM events WHERE seq = 1",
        "UPDATE sources SET name = 'x'",
        "DELETE FROM sources",
    ],
)
def test_update_and_delete_are_refused_by_the_database(
    store_url: str, opener: Opener, statement: str
) -> None:
    store = opener(store_url)
    store.append(validate_batch([log_event(1), log_event(2)]))
    with pytest.raises(DBAPIError, match="append-only"), store.begin() as conn:
        conn.execute(text(statement))
    assert len(list(store.read())) == 2
    assert verify(store).ok


def _drop_guards(conn: Any, dialect: str) -> None:
    """What someone with raw database access could do: remove the append-only triggers."""
    if dialect == "sqlite":
        conn.execute(text("DROP TRIGGER events_no_update"))
        conn.execute(text("DROP TRIGGER events_no_delete"))
    else:
        conn.execute(text("ALTER TABLE events DISABLE TRIGGER events_append_only"))


def test_verify_names_the_first_tampered_event(store_url: str, opener: Opener) -> None:
    store = opener(store_url)
    store.append(validate_batch([log_event(i) for i in range(100)]))
    assert verify(store, chunk=7).ok
    with store.begin() as conn:
        _drop_guards(conn, store.dialect)
        conn.execute(
            text("UPDATE events SET payload = :p WHERE seq = 42"),
            {"p": '{"message":"nothing to see","origin":"text"}'},
        )
    report = verify(store, chunk=7)
    assert not report.ok and report.first_bad_seq == 42 and report.checked == 41


def test_verify_finds_a_deleted_event(store_url: str, opener: Opener) -> None:
    store = opener(store_url)
    store.append(validate_batch([log_event(i) for i in range(20)]))
    with store.begin() as conn:
        _drop_guards(conn, store.dialect)
        conn.execute(text("DELETE FROM events WHERE seq = 13"))
    report = verify(store)
    assert report.first_bad_seq == 13 and "missing" in (report.reason or "")


def test_reopening_does_not_migrate_again_and_status_counts(store_url: str, opener: Opener) -> None:
    store = opener(store_url)
    store.append(validate_batch([log_event(i, stream=f"h/u{i % 3}") for i in range(9)]))
    store.close()
    again = opener(store_url)
    st = status(again)
    assert st.revision == st.head_revision == "0014"
    assert st.events == 9 and st.by_type == {"log.recorded": 9}
    assert st.by_stream == {"h/u0": 3, "h/u1": 3, "h/u2": 3}


def test_truncate_is_refused_on_postgresql(pg_url: str, opener: Opener) -> None:
    store = opener(pg_url)
    store.append(validate_batch([log_event(1)]))
    with pytest.raises(DBAPIError, match="append-only"), store.begin() as conn:
        conn.execute(text("TRUNCATE events"))
    assert len(list(store.read())) == 1


def test_old_payload_versions_are_upcast_on_read(
    store_url: str, opener: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stored version-0 payload (message under an older name) reads as the current model."""
    store = opener(store_url)
    store.append(validate_batch([log_event(1)]))
    with store.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO events (seq, stream, type, schema_version, event_time_us, "
                "recorded_time_us, source_id, idem_key, payload, hash) SELECT 2, stream, type, 0, "
                "event_time_us, recorded_time_us, source_id, 99, :p, hash FROM events WHERE seq = 1"
            ),
            {"p": '{"origin":"text","text":"from version 0"}'},
        )

    def v0_to_v1(data: dict[str, Any]) -> dict[str, Any]:
        data["message"] = data.pop("text")
        return data

    monkeypatch.setitem(UPCASTERS, ("log.recorded", 0), v0_to_v1)
    old = list(store.read())[1]
    assert isinstance(old.payload, LogRecorded) and old.payload.message == "from version 0"
    assert old.version == 0


def test_postgresql_idempotency_look_up_probes_the_index_without_statistics(
    pg_url: str, opener: Opener
) -> None:
    """The appender's (source, key) look-up must not depend on ANALYZE having run (a new
    partition has no statistics; autovacuum may be off or behind): it probes the index with
    both columns instead of reading every event of the source."""
    from advisor.store.store import _PG_EXISTING_KEYS

    store = opener(pg_url)
    for start in range(0, 20_000, 5000):
        store.append(validate_batch([log_event(i) for i in range(start, start + 5000)]))
    with store.connect() as conn:
        sid = conn.execute(text("SELECT id FROM sources WHERE name = 'test'")).scalar_one()
        sql = str(_PG_EXISTING_KEYS.compile(compile_kwargs={"literal_binds": False}))
        plan = "\n".join(
            r[0]
            for r in conn.exec_driver_sql(
                "EXPLAIN " + sql.replace(":sid", "%(sid)s").replace(":keys", "%(keys)s"),
                {"sid": sid, "keys": list(range(10_000, 10_500))},
            )
        )
        found = conn.execute(_PG_EXISTING_KEYS, {"sid": sid, "keys": [5, 19_999, 20_000]})
        assert sorted(k for (k,) in found) == [5, 19_999]
    assert re.search(r"Index Cond: \(\(source_id = [^)]+\) AND \(idem_key = ANY", plan), plan


def test_last_seq_of_some_types(store_url: str, opener: Opener) -> None:
    from advisor.store.integrity.retained import last_seq

    store = opener(store_url)
    assert last_seq(store, ("pipeline.skipped",)) == 0
    skipped = {
        "stream": "h/u.service",
        "time_us": 1_700_000_000_000_000,
        "source": "test",
        "key": 100,
        "payload": {"type": "pipeline.skipped", "stage": "fold", "seq": 1, "reason": "r"},
    }
    store.append(validate_batch([log_event(0), skipped, log_event(1), log_event(2)]))
    assert last_seq(store) == 4
    assert last_seq(store, ("pipeline.skipped",)) == 2
    assert last_seq(store, ("pipeline.skipped", "log.recorded")) == 4
    assert last_seq(store, ("incident.opened",)) == 0


def test_the_head_read_from_file_names_is_alembic_s_and_the_chain_is_numbered_in_order() -> None:
    """`migrate.head_revision` reads the head from the migration files' names, so opening a
    current store needs no Alembic: each file is named after its revision, and each revision
    follows the one numbered before it."""
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory.from_config(migrate._config())
    assert migrate.head_revision() == scripts.get_current_head()
    revisions = sorted(scripts.walk_revisions(), key=lambda r: r.revision)
    for before, script in zip([None, *revisions], revisions, strict=False):
        assert Path(script.path).name.startswith(f"{script.revision}_")
        assert script.down_revision == (None if before is None else before.revision)


def test_opening_a_current_store_does_not_import_alembic(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    open_store(url).close()  # created (and migrated) here
    probe = (
        "import sys\n"
        "from advisor.store import open_store\n"
        f"open_store({url!r}).close()\n"
        "print('alembic' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_postgresql_binary_copy_types_are_the_columns_types(pg_url: str, opener: Opener) -> None:
    """Appends COPY rows in binary, each value sent as the type named for its column: those
    names must be the columns' own, as migrated (a wider or narrower one fails every append)."""
    from advisor.store.store import _EVENT_COLUMNS, _PG_COPY_TYPES

    store = opener(pg_url)
    columns = [c.strip() for c in _EVENT_COLUMNS.split(",")]
    with store.connect() as conn:
        udt = dict(
            conn.execute(
                text(
                    "SELECT column_name, udt_name FROM information_schema.columns "
                    "WHERE table_name = 'events' AND table_schema = current_schema()"
                )
            ).all()
        )
    assert [udt[c] for c in columns] == list(_PG_COPY_TYPES)
    assert len(columns) == len(udt)  # every column is written
