"""Whether a central PostgreSQL store takes this host's signed heads, asked before shipping.

A shipping role is bound to its host in `advisor_shippers`, with the public key its heads
must be signed with (docs/fleet.md). A binding whose key is NULL, or another key than the one
this store signs with, refuses every head — and `ship` used to find that out only after its
events went through. `check_binding` asks first: it offers the owner's `advisor_ship_head()`
a head of host seq 0 signed with nothing, with this store's public key. The function checks
the binding (the host's role, then the key) before the seq, and no host seq is 0, so it
always refuses: with the key's refusal (42501) when the binding would refuse the real heads,
with the seq's (AD001) when it would take them. Nothing is stored either way (and the
transaction is rolled back besides). The shipping role needs no grant beyond docs/fleet.md's.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from advisor.core.errors import PrerequisiteError, StoreError
from advisor.store.engine import first_line
from advisor.store.integrity.central import Unreachable, is_transient
from advisor.store.store import EventStore

_TAKEN: Final = "AD001"  # refused for the seq only: the binding takes the key
_REFUSED: Final = "42501"  # insufficient_privilege: the binding (role, host or key) refuses
_PROBE_SQL: Final = text(
    "SELECT advisor_ship_head(:host, :seq, :hash, :time_us, :public_key, :signature, :store)"
)
_NO_KEY: Final = "no public key is registered"
_OTHER_KEY: Final = "signed with another key"


def register_sql(host: str, public_key: bytes) -> str:
    """The statement the central store's owner runs to register `public_key` for `host`."""
    quoted = host.replace("'", "''")
    return (
        f"UPDATE advisor_shippers SET public_key = decode('{public_key.hex()}', 'hex') "
        f"WHERE host = '{quoted}';"
    )


def check_binding(central: EventStore, host: str, public_key: bytes, key_path: str) -> None:
    """PrerequisiteError, saying what to run, unless the central store takes heads of `host`
    signed with `public_key` (the key at `key_path`); Unreachable when it cannot be asked.
    Nothing to ask of a store that is not PostgreSQL (it keeps no heads)."""
    if central.dialect != "postgresql":
        return
    probe = {
        "host": host,
        "seq": 0,
        "hash": bytes(32),
        "time_us": 0,
        "public_key": public_key,
        "signature": bytes(64),
        "store": "",
    }
    where = central.display_url
    try:
        with central.connect() as conn:
            try:
                conn.execute(_PROBE_SQL, probe)
            finally:
                conn.rollback()
    except DBAPIError as e:
        if is_transient(e):
            raise Unreachable(f"the central store {where} is unreachable: {first_line(e)}") from e
        state = getattr(e.orig, "sqlstate", None)
        if state == _TAKEN:
            return
        reason = first_line(e)
        if state == _REFUSED and (_NO_KEY in reason or _OTHER_KEY in reason):
            raise PrerequisiteError(_refusal(where, host, public_key, key_path, reason)) from e
        raise StoreError(f"the central store {where} refused host {host}: {reason}") from e


def _refusal(where: str, host: str, public_key: bytes, key_path: str, reason: str) -> str:
    which = f"this store's key {key_path}" if key_path else "this store's key"
    if _NO_KEY in reason:
        told = f"the central store {where} has no public key registered for host {host}"
    else:
        told = f"the central store {where} has another key registered for host {host}"
    return (
        f"{told}, so it would refuse the heads signed with {which}: nothing shipped. "
        f"As the central store's owner run: {register_sql(host, public_key)} "
        "(or ship with --key naming the key that is registered)"
    )
