"""event store: sources, events (append-only, hash-chained), checkpoints

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

SQLITE_TRIGGERS = [
    """CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table}
       BEGIN SELECT RAISE(ABORT, '{table} is append-only: UPDATE refused'); END""",
    """CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table}
       BEGIN SELECT RAISE(ABORT, '{table} is append-only: DELETE refused'); END""",
]

PG_FUNCTION = """
CREATE OR REPLACE FUNCTION advisor_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
    USING ERRCODE = 'insufficient_privilege';
END $$
"""
PG_TRIGGERS = [
    """CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table}
       FOR EACH ROW EXECUTE FUNCTION advisor_refuse_change()""",
    """CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table}
       FOR EACH STATEMENT EXECUTE FUNCTION advisor_refuse_change()""",
]


def upgrade() -> None:
    op.create_table(
        "sources",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("name", sa.Text, nullable=False, unique=True),
    )
    op.create_table(
        "events",
        sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("stream", sa.Text, nullable=False),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("schema_version", sa.Integer, nullable=False),
        sa.Column("event_time_us", sa.BigInteger, nullable=False),
        sa.Column("recorded_time_us", sa.BigInteger, nullable=False),
        sa.Column("source_id", sa.Integer, nullable=False),
        sa.Column("idem_key", sa.BigInteger, nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("hash", sa.LargeBinary(32), nullable=False),
    )
    op.create_index("events_idempotency", "events", ["source_id", "idem_key"], unique=True)
    op.create_index("events_stream_seq", "events", ["stream", "seq"])
    op.create_index("events_type_seq", "events", ["type", "seq"])
    op.create_table(
        "checkpoints",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("position", sa.Text, nullable=False),
        sa.Column("updated_time_us", sa.BigInteger, nullable=False),
    )
    dialect = op.get_bind().dialect.name
    for table in ("events", "sources"):
        if dialect == "sqlite":
            for trigger in SQLITE_TRIGGERS:
                op.execute(trigger.format(table=table))
        elif dialect == "postgresql":
            op.execute(PG_FUNCTION)
            for trigger in PG_TRIGGERS:
                op.execute(trigger.format(table=table))
        else:
            raise RuntimeError(f"unsupported database {dialect!r}: use SQLite or PostgreSQL")


def downgrade() -> None:
    op.drop_table("checkpoints")
    op.drop_table("events")
    op.drop_table("sources")
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS advisor_refuse_change()")
