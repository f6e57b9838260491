"""SQLite: events keyed by seq itself (`seq INTEGER PRIMARY KEY`, the table's rowid)

Declared `BIGINT PRIMARY KEY`, SQLite kept `events` in a B-tree of hidden rowids and seq in
an index beside it: every append wrote one B-tree more than needed, and every read in seq
order went through the index to the table. `INTEGER PRIMARY KEY` makes seq the rowid (a
64-bit integer: the same values), one B-tree fewer; appends at the end of the table, the
append-only trigger's seq look-up a rowid look-up. It cut the CPU an append of 100,000
journal events costs SQLite by about a third (bench/ingest.py).

The table is rebuilt: its rows copied in seq order, its indexes and triggers made again from
their own SQL. A one-off copy of the store's events (about a minute per million on one core).
PostgreSQL is untouched (a bigint primary key is its own index there).

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_COLUMNS = """
    stream TEXT NOT NULL,
    type VARCHAR(64) NOT NULL,
    schema_version INTEGER NOT NULL,
    event_time_us BIGINT NOT NULL,
    recorded_time_us BIGINT NOT NULL,
    source_id INTEGER NOT NULL,
    idem_key BIGINT NOT NULL,
    payload TEXT NOT NULL,
    hash BLOB NOT NULL,
    origin TEXT"""
_NAMES = (
    "seq, stream, type, schema_version, event_time_us, recorded_time_us, source_id, idem_key, "
    "payload, hash, origin"
)


def _rebuild(seq_column: str, key: str = "") -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    bind = op.get_bind()
    attached = bind.exec_driver_sql(
        "SELECT sql FROM sqlite_master WHERE tbl_name = 'events' "
        "AND type IN ('index', 'trigger') AND sql IS NOT NULL ORDER BY type, name"
    ).all()
    op.execute("ALTER TABLE events RENAME TO events_0010")
    op.execute(f"CREATE TABLE events (\n    {seq_column},{_COLUMNS}{key})")
    op.execute(f"INSERT INTO events ({_NAMES}) SELECT {_NAMES} FROM events_0010 ORDER BY seq")
    op.execute("DROP TABLE events_0010")  # with its indexes and triggers, made again below
    for (sql,) in attached:  # as they were before the rename (which rewrote them)
        op.execute(sql)


def upgrade() -> None:
    _rebuild("seq INTEGER NOT NULL PRIMARY KEY")


def downgrade() -> None:
    _rebuild("seq BIGINT NOT NULL", key=",\n    PRIMARY KEY (seq)")
