"""Table definitions the store queries through. Migrations in migrations/ create them."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)

metadata = MetaData()

# Sources are interned so that the idempotency index is (integer, integer).
sources = Table(
    "sources",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("name", Text, nullable=False, unique=True),
)

events = Table(
    "events",
    metadata,
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("stream", Text, nullable=False),
    Column("type", String(64), nullable=False),
    Column("schema_version", Integer, nullable=False),
    Column("event_time_us", BigInteger, nullable=False),
    Column("recorded_time_us", BigInteger, nullable=False),
    Column("source_id", Integer, nullable=False),
    Column("idem_key", BigInteger, nullable=False),
    Column("payload", Text, nullable=False),
    Column("hash", LargeBinary(32), nullable=False),
)

# Where each reader of an external source got to; saved in the transaction of its events.
checkpoints = Table(
    "checkpoints",
    metadata,
    Column("name", Text, primary_key=True),
    Column("position", Text, nullable=False),
    Column("updated_time_us", BigInteger, nullable=False),
)
