"""A central store's requests for the ranges of events a host kept (`fetch_requests`,
migration 0014): the owner asks (`ask`), the host's shipper reads its open ones
(`open_requests`) and answers through `advisor.store.integrity.kept`, which marks each
answered (`answered`: how many events came, or why none)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import Connection, and_, insert, select, update
from sqlalchemy.exc import ProgrammingError

from advisor.core.errors import StoreError
from advisor.store.engine import first_line, in_parts
from advisor.store.schema import fetch_requests
from advisor.store.store import EventStore

if TYPE_CHECKING:
    from advisor.store.integrity.kept import Kept

__all__ = ["Answer", "Request", "RequestsUnreadable", "answered", "answers", "ask", "open_requests"]


@dataclass(frozen=True)
class Request:
    """An open request for a kept range: the range's last host seq and its first."""

    held_key: int
    first_seq: int


@dataclass(frozen=True)
class Answer:
    """A request as it stands: answered or not, how many events the host sent, or why not."""

    held_key: int
    answered_us: int | None
    fetched: int | None
    note: str | None


def ask(
    central: EventStore, host: str, ranges: Sequence[Kept], by: str, now_us: int
) -> tuple[int, dict[int, Answer]]:
    """Ask `host` for these ranges (one request each, unless one is there already): how many
    requests were added, and every one of these ranges' requests as it stands. The owner's:
    a shipping role may only read the requests."""
    added = 0
    with central.begin() as conn:
        there = _answers(conn, host, [r.key for r in ranges])
        for r in ranges:
            if r.key in there:
                continue
            there[r.key] = Answer(r.key, None, None, None)
            conn.execute(
                insert(fetch_requests).values(
                    host=host,
                    held_key=r.key,
                    first_seq=r.held.first_seq,
                    requested_us=now_us,
                    requested_by=by,
                )
            )
            added += 1
    return added, there


def answers(central: EventStore, host: str, keys: Sequence[int]) -> dict[int, Answer]:
    """The requests for these ranges, as they stand."""
    with central.connect() as conn:
        return _answers(conn, host, keys)


def _answers(conn: Connection, host: str, keys: Sequence[int]) -> dict[int, Answer]:
    found: dict[int, Answer] = {}
    for part in in_parts(keys):
        for row in conn.execute(
            select(
                fetch_requests.c.held_key,
                fetch_requests.c.answered_us,
                fetch_requests.c.fetched,
                fetch_requests.c.note,
            ).where(
                and_(
                    fetch_requests.c.host == host,
                    fetch_requests.c.held_key.in_(part),
                )
            )
        ):
            found[int(row[0])] = Answer(int(row[0]), row[1], row[2], row[3])
    return found


class RequestsUnreadable(StoreError):
    """The central store has no requests this role may read: older than migration 0014, or
    the role was granted before it (docs/fleet.md's grants)."""


def open_requests(central: EventStore, host: str, limit: int) -> list[Request]:
    """The host's requests not answered yet, oldest range first."""
    try:
        with central.connect() as conn:
            rows = conn.execute(
                select(fetch_requests.c.held_key, fetch_requests.c.first_seq)
                .where(fetch_requests.c.host == host)
                .where(fetch_requests.c.answered_us.is_(None))
                .order_by(fetch_requests.c.held_key)
                .limit(limit)
            ).all()
    except ProgrammingError as e:
        raise RequestsUnreadable(
            f"cannot read the central store's requests for kept lines: {first_line(e)}"
        ) from e
    return [Request(int(k), int(f)) for k, f in rows]


def answered(central: EventStore, host: str, held_key: int, n: int, note: str | None) -> None:
    with central.begin() as conn:
        conn.execute(
            update(fetch_requests)
            .where(fetch_requests.c.host == host)
            .where(fetch_requests.c.held_key == held_key)
            .where(fetch_requests.c.answered_us.is_(None))
            .values(answered_us=time.time_ns() // 1000, fetched=n, note=note)
        )
