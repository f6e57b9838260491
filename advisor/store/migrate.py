"""Create or upgrade the store schema with Alembic, safely when several processes start at once."""

from __future__ import annotations

import functools
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import SQLAlchemyError

import advisor.migrations
from advisor.errors import StoreError
from advisor.store.engine import WRITE_OPTION, first_line, redact, retry_busy

MIGRATION_LOCK_ID = 0x616476_6D6967  # pg advisory lock key for schema changes


def _config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(Path(advisor.migrations.__file__).parent))
    return cfg


@functools.lru_cache(maxsize=1)  # the migrations on disk do not change while we run
def head_revision() -> str | None:
    return ScriptDirectory.from_config(_config()).get_current_head()


def current_revision(conn: Connection) -> str | None:
    try:
        row = conn.execute(text("SELECT version_num FROM alembic_version")).first()
    except SQLAlchemyError:
        conn.rollback()
        return None
    return None if row is None else str(row[0])


def upgrade(engine: Engine) -> str | None:
    """Bring the schema to the head revision; return the revision now in place."""
    try:
        return retry_busy(lambda: _upgrade(engine))
    except SQLAlchemyError as e:
        raise StoreError(f"cannot open the store {redact(engine.url)}: "
                         f"{first_line(e)}") from e


def _upgrade(engine: Engine) -> str | None:
    head = head_revision()
    with engine.connect() as conn:
        if current_revision(conn) == head:
            return head
    with engine.connect().execution_options(**{WRITE_OPTION: True}) as conn:
        with conn.begin():
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": MIGRATION_LOCK_ID})
            cfg = _config()
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
        return current_revision(conn)
