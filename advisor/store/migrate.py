"""Create or upgrade the store schema with Alembic, safely when several processes start at once.

Alembic is imported only to upgrade: a store already at the head revision is opened without
it (its import is a tenth of a second of every command's start-up). The head is read from
the migration files' names — each is named after its revision, the revisions numbered in
the order they chain (`tests/store/test_store.py` checks that against Alembic's own view).
"""

from __future__ import annotations

import functools
import re
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import SQLAlchemyError

import advisor.migrations
from advisor.core.errors import StoreError
from advisor.store.engine import (
    WRITE_OPTION,
    first_line,
    make_engine,
    parse_url,
    redact,
    retry_busy,
)

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATION_LOCK_ID = 0x616476_6D6967  # pg advisory lock key for schema changes


MIGRATIONS = Path(advisor.migrations.__file__).parent
_REVISION_FILE = re.compile(r"(\d{4})_\w+\.py")


def _config() -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


@functools.lru_cache(maxsize=1)  # the migrations on disk do not change while we run
def head_revision() -> str | None:
    """The newest revision: the highest number among the migration files' names."""
    numbers = [
        m.group(1)
        for p in (MIGRATIONS / "versions").iterdir()
        if (m := _REVISION_FILE.fullmatch(p.name))
    ]
    return max(numbers, default=None)


def current_revision(conn: Connection) -> str | None:
    try:
        row = conn.execute(text("SELECT version_num FROM alembic_version")).first()
    except SQLAlchemyError:
        conn.rollback()
        return None
    return None if row is None else str(row[0])


def require_current(engine: Engine) -> None:
    """For reading commands: the store exists and is at the revision this advisor reads."""
    head = head_revision()
    try:
        with engine.connect() as conn:
            revision = current_revision(conn)
    except SQLAlchemyError as e:
        raise StoreError(f"cannot open the store {redact(engine.url)}: {first_line(e)}") from e
    if revision is None:
        raise StoreError(
            f"{redact(engine.url)} is not an advisor store (it has no advisor "
            "schema); a reading command never creates one"
        )
    if revision != head:
        raise StoreError(
            f"{redact(engine.url)} is at schema revision {revision} and this "
            f"advisor reads {head}: run `advisor db upgrade --db URL` (on a "
            "read-only copy, upgrade a writable copy of it)"
        )


def upgrade(engine: Engine, *, shared_schema: bool = False) -> str | None:
    """Bring the schema to the head revision; return the revision now in place. A new store
    is created only where the database (PostgreSQL: the schema) holds no other tables,
    unless `shared_schema`."""
    try:
        return retry_busy(lambda: _upgrade(engine, shared_schema))
    except SQLAlchemyError as e:
        raise StoreError(f"cannot open the store {redact(engine.url)}: {first_line(e)}") from e


def _tables(conn: Connection) -> list[str]:
    if conn.dialect.name == "postgresql":
        query = (
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema() ORDER BY table_name"
        )
    else:
        query = (
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND name NOT LIKE 'sqlite_%' ORDER BY name"
        )
    return [str(name) for (name,) in conn.execute(text(query))]


def _upgrade(engine: Engine, shared_schema: bool) -> str | None:
    head = head_revision()
    with engine.connect() as conn:
        if current_revision(conn) == head:
            return head
    with engine.connect().execution_options(**{WRITE_OPTION: True}) as conn:
        with conn.begin():
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": MIGRATION_LOCK_ID})
                # A migration of a big store (0006 copies every event) may outlast the
                # statement timeout every other connection has.
                conn.execute(text("SET LOCAL statement_timeout = 0"))
            others = [] if shared_schema else _tables(conn)
            if others and "alembic_version" not in others:
                where = "its schema" if conn.dialect.name == "postgresql" else "the file"
                raise StoreError(
                    f"{redact(engine.url)} is not an advisor store and {where} holds "
                    f"{len(others)} other tables ({', '.join(others[:3])}"
                    f"{', …' if len(others) > 3 else ''}); advisor creates its tables only "
                    "in an empty one: choose another (PostgreSQL: "
                    "?options=-csearch_path%3DSCHEMA), or run `advisor db upgrade "
                    "--shared-schema` to create them beside the others"
                )
            from alembic import command

            cfg = _config()
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
        return current_revision(conn)


def store_exists(url: str) -> bool:
    """Whether `url` holds an advisor store, looked at without creating anything. What
    cannot be looked at counts as there: opening it then says what is wrong."""
    parsed = parse_url(url)
    if parsed.get_backend_name() == "sqlite":
        path = Path(parsed.database or "").expanduser()
        if not path.is_file():
            return False
        try:
            db = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True)
        except sqlite3.Error:
            return True
        try:
            return (
                db.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'"
                ).fetchone()
                is not None
            )
        except sqlite3.OperationalError:
            return True
        except sqlite3.DatabaseError:  # "file is not a database": replaced by something else
            return False
        finally:
            db.close()
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return current_revision(conn) is not None
    except SQLAlchemyError:
        return True
    finally:
        engine.dispose()
