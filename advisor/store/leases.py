"""Leases: at most one holder of a name at a time, across processes and hosts sharing a store.

The executor takes the lease of a plan before it runs a step and renews it while a step runs;
a holder that stops renewing (killed, frozen, its host gone) loses it when it expires, and only
then may another take the plan over. Taking, renewing and giving back are each one write
transaction (SQLite's write lock, a PostgreSQL advisory lock), so two contenders never both win.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Final

from sqlalchemy import select, text
from sqlalchemy.exc import IntegrityError as SAIntegrityError
from sqlalchemy.exc import SQLAlchemyError

from advisor.core.errors import StoreError
from advisor.store.engine import first_line, retry_busy
from advisor.store.schema import leases
from advisor.store.store import EventStore

LEASE_LOCK_ID: Final = 0x616476_6C6561  # pg advisory lock key for leases ("advlea")


@dataclass(frozen=True)
class Lease:
    name: str
    holder: str
    acquired_us: int
    expires_us: int


def _now_us() -> int:
    return time.time_ns() // 1000


def holder_of(store: EventStore, name: str) -> Lease | None:
    """The current lease on `name`, expired or not (None when nobody ever held it)."""
    with store.connect() as conn:
        row = conn.execute(select(leases).where(leases.c.name == name)).first()
    return Lease(row.name, row.holder, row.acquired_us, row.expires_us) if row else None


def take(store: EventStore, name: str, holder: str, ttl_s: float) -> Lease | None:
    """Take or renew the lease on `name` for `ttl_s`: yes (the lease) if nobody holds it, it
    expired, or `holder` holds it already; None while another holder's lease is live."""

    def attempt() -> Lease | None:
        now = _now_us()
        expires = now + int(ttl_s * 1_000_000)
        with store.connect(write=True) as conn, conn.begin():
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": LEASE_LOCK_ID})
            row = conn.execute(select(leases).where(leases.c.name == name)).first()
            if row is None:
                conn.execute(
                    leases.insert().values(
                        name=name, holder=holder, acquired_us=now, expires_us=expires
                    )
                )
                return Lease(name, holder, now, expires)
            if row.holder != holder and row.expires_us > now:
                return None
            acquired = row.acquired_us if row.holder == holder else now
            conn.execute(
                leases.update()
                .where(leases.c.name == name)
                .values(holder=holder, acquired_us=acquired, expires_us=expires)
            )
            return Lease(name, holder, acquired, expires)

    try:
        return retry_busy(attempt)
    except SAIntegrityError:  # a contender inserted the row first (its lease now)
        return None
    except SQLAlchemyError as e:
        raise StoreError(
            f"cannot take lease {name!r} in {store.display_url}: {first_line(e)}"
        ) from e


def give_back(store: EventStore, name: str, holder: str) -> None:
    """End `holder`'s lease on `name` now (nothing if another holds it)."""

    def attempt() -> None:
        with store.connect(write=True) as conn, conn.begin():
            conn.execute(
                leases.update()
                .where(leases.c.name == name)
                .where(leases.c.holder == holder)
                .values(expires_us=0)
            )

    try:
        retry_busy(attempt)
    except SQLAlchemyError as e:
        raise StoreError(f"cannot give back lease {name!r}: {first_line(e)}") from e


def take_over(store: EventStore, name: str, gone: str, holder: str, ttl_s: float) -> Lease | None:
    """Take the lease on `name` from `gone` — a holder known to be dead (its process is no
    more) — before it expires; None if the lease is no longer `gone`'s."""

    def attempt() -> Lease | None:
        now = _now_us()
        expires = now + int(ttl_s * 1_000_000)
        with store.connect(write=True) as conn, conn.begin():
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": LEASE_LOCK_ID})
            done = conn.execute(
                leases.update()
                .where(leases.c.name == name)
                .where(leases.c.holder == gone)
                .values(holder=holder, acquired_us=now, expires_us=expires)
            )
            return Lease(name, holder, now, expires) if done.rowcount == 1 else None

    try:
        return retry_busy(attempt)
    except SQLAlchemyError as e:
        raise StoreError(f"cannot take lease {name!r} over: {first_line(e)}") from e
