"""Readers' checkpoints: append-only rows, the latest of each name its current position."""

from __future__ import annotations

import time
from typing import Any

import orjson
from sqlalchemy import Connection, func, select

from advisor.store.schema import checkpoints

__all__ = ["latest_checkpoint", "latest_checkpoints", "save_checkpoint"]


def save_checkpoint(conn: Connection, name: str, position: dict[str, Any]) -> None:
    """Save a reader's new position in the caller's write transaction: checkpoints are
    append-only (migration 0008), so a new row numbered one past the name's latest; nothing
    when the position has not changed. Callers hold the lock that orders the name's writers
    (SQLite's write lock, the append or projection advisory lock)."""
    text_ = orjson.dumps(position, option=orjson.OPT_SORT_KEYS).decode()
    latest = conn.execute(
        select(checkpoints.c.n, checkpoints.c.position)
        .where(checkpoints.c.name == name)
        .order_by(checkpoints.c.n.desc())
        .limit(1)
    ).first()
    if latest is not None and latest[1] == text_:
        return
    conn.execute(
        checkpoints.insert().values(
            name=name,
            n=1 if latest is None else latest[0] + 1,
            position=text_,
            updated_time_us=time.time_ns() // 1000,
        )
    )


def latest_checkpoint(conn: Connection, name: str) -> str | None:
    """A reader's current position (its latest row's JSON text), None when it has none."""
    value = conn.execute(
        select(checkpoints.c.position)
        .where(checkpoints.c.name == name)
        .order_by(checkpoints.c.n.desc())
        .limit(1)
    ).scalar()
    return None if value is None else str(value)


def latest_checkpoints(conn: Connection) -> list[tuple[str, str, int]]:
    """Every reader's current position: (name, position JSON, saved at µs), by name."""
    latest = (
        select(checkpoints.c.name, func.max(checkpoints.c.n).label("n"))
        .group_by(checkpoints.c.name)
        .subquery()
    )
    rows = conn.execute(
        select(checkpoints.c.name, checkpoints.c.position, checkpoints.c.updated_time_us)
        .join(latest, (latest.c.name == checkpoints.c.name) & (latest.c.n == checkpoints.c.n))
        .order_by(checkpoints.c.name)
    ).all()
    return [(str(r[0]), str(r[1]), int(r[2])) for r in rows]
