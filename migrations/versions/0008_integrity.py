"""host side tamper evidence: no INSERT over an existing event, checkpoints append-only

SQLite: `INSERT OR REPLACE` (or `REPLACE`) with the seq or the (source, key) of a stored event
deletes that row and inserts the new one, and the delete does not fire the DELETE trigger
(SQLite fires triggers for REPLACE's deletes only under `PRAGMA recursive_triggers`, which
a connection sets for itself). A BEFORE INSERT trigger now refuses a row whose seq or
(source_id, idem_key) is stored, on `events`, and whose id or name is, on `sources`. An
upsert (`ON CONFLICT DO UPDATE`) was refused already by the UPDATE trigger (and now by this
one first). PostgreSQL has no REPLACE; its upsert is refused by the row trigger on UPDATE.

`checkpoints`: a reader's position was one row per name, UPDATEd in place. It becomes one
row per position, keyed (name, n) with n = 1, 2, … per name; the current position is the
name's highest n. UPDATE and DELETE (and TRUNCATE) are refused as on `events`, and on SQLite
an INSERT over a stored (name, n). The rows there become each name's n = 1.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_REFUSE = (
    "BEGIN SELECT RAISE(ABORT, '{table} is append-only: INSERT over a stored row refused'); END"
)
SQLITE_NO_REPLACE = {
    "events": """CREATE TRIGGER events_no_replace BEFORE INSERT ON events
        WHEN EXISTS (SELECT 1 FROM events WHERE seq = NEW.seq)
          OR EXISTS (SELECT 1 FROM events
                     WHERE source_id = NEW.source_id AND idem_key = NEW.idem_key)
        """
    + _REFUSE.format(table="events"),
    "sources": """CREATE TRIGGER sources_no_replace BEFORE INSERT ON sources
        WHEN EXISTS (SELECT 1 FROM sources WHERE id = NEW.id OR name = NEW.name)
        """
    + _REFUSE.format(table="sources"),
    "checkpoints": """CREATE TRIGGER checkpoints_no_replace BEFORE INSERT ON checkpoints
        WHEN EXISTS (SELECT 1 FROM checkpoints WHERE name = NEW.name AND n = NEW.n)
        """
    + _REFUSE.format(table="checkpoints"),
}
SQLITE_NO_CHANGE = [
    """CREATE TRIGGER checkpoints_no_update BEFORE UPDATE ON checkpoints
       BEGIN SELECT RAISE(ABORT, 'checkpoints is append-only: UPDATE refused'); END""",
    """CREATE TRIGGER checkpoints_no_delete BEFORE DELETE ON checkpoints
       BEGIN SELECT RAISE(ABORT, 'checkpoints is append-only: DELETE refused'); END""",
]
PG_TRIGGERS = [  # advisor_refuse_change() is migration 0001's
    """CREATE TRIGGER checkpoints_append_only BEFORE UPDATE OR DELETE ON checkpoints
       FOR EACH ROW EXECUTE FUNCTION advisor_refuse_change()""",
    """CREATE TRIGGER checkpoints_no_truncate BEFORE TRUNCATE ON checkpoints
       FOR EACH STATEMENT EXECUTE FUNCTION advisor_refuse_change()""",
]
_SQLITE_CHECKPOINTS = """CREATE TABLE checkpoints (
    name TEXT NOT NULL,
    n BIGINT NOT NULL,
    position TEXT NOT NULL,
    updated_time_us BIGINT NOT NULL,
    PRIMARY KEY (name, n))"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE checkpoints ADD COLUMN n bigint NOT NULL DEFAULT 1")
        op.execute("ALTER TABLE checkpoints ALTER COLUMN n DROP DEFAULT")
        op.execute("ALTER TABLE checkpoints DROP CONSTRAINT checkpoints_pkey")
        op.execute("ALTER TABLE checkpoints ADD CONSTRAINT checkpoints_pkey PRIMARY KEY (name, n)")
        for trigger in PG_TRIGGERS:
            op.execute(trigger)
        return
    op.execute("ALTER TABLE checkpoints RENAME TO checkpoints_0007")
    op.execute(_SQLITE_CHECKPOINTS)
    op.execute(
        "INSERT INTO checkpoints (name, n, position, updated_time_us) "
        "SELECT name, 1, position, updated_time_us FROM checkpoints_0007 ORDER BY name"
    )
    op.execute("DROP TABLE checkpoints_0007")
    for trigger in (*SQLITE_NO_REPLACE.values(), *SQLITE_NO_CHANGE):
        op.execute(trigger)


def downgrade() -> None:
    latest = (
        "SELECT c.name, c.position, c.updated_time_us FROM checkpoints c "
        "WHERE c.n = (SELECT MAX(n) FROM checkpoints l WHERE l.name = c.name)"
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER checkpoints_append_only ON checkpoints")
        op.execute("DROP TRIGGER checkpoints_no_truncate ON checkpoints")
        op.execute(
            "DELETE FROM checkpoints c WHERE c.n < "
            "(SELECT MAX(n) FROM checkpoints l WHERE l.name = c.name)"
        )
        op.execute("ALTER TABLE checkpoints DROP CONSTRAINT checkpoints_pkey")
        op.execute("ALTER TABLE checkpoints DROP COLUMN n")
        op.execute("ALTER TABLE checkpoints ADD CONSTRAINT checkpoints_pkey PRIMARY KEY (name)")
        return
    for name in (
        "events_no_replace",
        "sources_no_replace",
        "checkpoints_no_replace",
        "checkpoints_no_update",
        "checkpoints_no_delete",
    ):
        op.execute(f"DROP TRIGGER {name}")
    op.execute("ALTER TABLE checkpoints RENAME TO checkpoints_0008")
    op.execute(
        "CREATE TABLE checkpoints (name TEXT NOT NULL PRIMARY KEY, "
        "position TEXT NOT NULL, updated_time_us BIGINT NOT NULL)"
    )
    op.execute(
        "INSERT INTO checkpoints (name, position, updated_time_us) "
        + latest.replace("checkpoints", "checkpoints_0008")
    )
    op.execute("DROP TABLE checkpoints_0008")
