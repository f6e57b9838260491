"""PostgreSQL: events partitioned by sequence-number blocks, for retention

A central store grows without end; `advisor retention` exports old events to Parquet and
detaches their partition. `events` becomes a table partitioned by RANGE (seq) in blocks of
PARTITION_BLOCK; the events already stored become its first partition, `events_legacy`.
Partitions are created on demand by `advisor_ensure_partitions(last_seq)`, which the
appender calls in its transaction: a SECURITY DEFINER function, so a shipping role with
only INSERT and SELECT on events can extend it without owning (or being able to drop) any
partition. The append-only triggers move to the partitioned table (row triggers reach every
partition); TRUNCATE is refused on each partition as well.

A partitioned table cannot have a unique index without its partition key, so the
(source, key) index is no longer unique: idempotency rests, as it always did first, on the
appender's look-up under its advisory lock. SQLite stores (the hosts') are not changed.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

PARTITION_BLOCK = 10_000_000

# Creates the partitions that events up to `last_seq` need, each PARTITION_BLOCK seqs wide
# (the size is read from advisor_partitioning, so a fresh store may set another); returns
# the first seq with no partition yet, which the appender remembers.
ENSURE_PARTITIONS = """
CREATE FUNCTION advisor_ensure_partitions(last_seq bigint)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
  lo bigint;
  size bigint;
  name text;
BEGIN
  SELECT next_from, block INTO lo, size FROM advisor_partitioning FOR UPDATE;
  WHILE lo <= last_seq LOOP
    name := format('events_%s', lpad(lo::text, 12, '0'));
    EXECUTE format('CREATE TABLE %I PARTITION OF events FOR VALUES FROM (%s) TO (%s)',
                   name, lo, lo + size);
    EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON %I FOR EACH STATEMENT '
                   'EXECUTE FUNCTION advisor_refuse_change()', name || '_no_truncate', name);
    lo := lo + size;
  END LOOP;
  UPDATE advisor_partitioning SET next_from = lo;
  RETURN lo;
END $$
"""

COLUMNS = """
    seq bigint NOT NULL PRIMARY KEY,
    stream text NOT NULL,
    type varchar(64) NOT NULL,
    schema_version integer NOT NULL,
    event_time_us bigint NOT NULL,
    recorded_time_us bigint NOT NULL,
    source_id integer NOT NULL,
    idem_key bigint NOT NULL,
    payload text NOT NULL,
    hash bytea NOT NULL,
    origin text"""


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    stored = int(
        op.get_bind().exec_driver_sql("SELECT COALESCE(MAX(seq), 0) FROM events").scalar() or 0
    )
    op.execute("ALTER TABLE events RENAME TO events_legacy")
    for index in ("events_pkey", "events_idempotency", "events_stream_seq", "events_type_seq"):
        op.execute(f"ALTER INDEX {index} RENAME TO legacy_{index}")
    op.execute("DROP TRIGGER events_append_only ON events_legacy")
    op.execute("DROP TRIGGER events_no_truncate ON events_legacy")
    op.execute(f"CREATE TABLE events ({COLUMNS}) PARTITION BY RANGE (seq)")
    op.execute("CREATE INDEX events_idempotency ON events (source_id, idem_key)")
    op.execute("CREATE INDEX events_stream_seq ON events (stream, seq)")
    op.execute("CREATE INDEX events_type_seq ON events (type, seq)")
    op.execute("""CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
                  FOR EACH ROW EXECUTE FUNCTION advisor_refuse_change()""")
    op.execute("""CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
                  FOR EACH STATEMENT EXECUTE FUNCTION advisor_refuse_change()""")
    op.execute(
        "CREATE TABLE advisor_partitioning (block bigint NOT NULL CHECK (block > 0), "
        "next_from bigint NOT NULL)"
    )
    op.execute(f"INSERT INTO advisor_partitioning VALUES ({PARTITION_BLOCK}, {stored + 1})")
    if stored:  # what is stored stays where it is, as the first partition
        op.execute(
            "CREATE TRIGGER events_legacy_no_truncate BEFORE TRUNCATE ON events_legacy "
            "FOR EACH STATEMENT EXECUTE FUNCTION advisor_refuse_change()"
        )
        op.execute(
            "ALTER TABLE events ATTACH PARTITION events_legacy "
            f"FOR VALUES FROM (MINVALUE) TO ({stored + 1})"
        )
    else:
        op.execute("DROP TABLE events_legacy")
    op.execute(ENSURE_PARTITIONS)


def downgrade() -> None:
    raise NotImplementedError("events stay partitioned: a downgrade would copy every event")
