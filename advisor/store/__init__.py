"""The append-only event store (SQLite or PostgreSQL through SQLAlchemy): events appended
and read with their hash chain, checkpoints and leases; `integrity` builds on it (signed
heads, verification, the central store's side of shipping, retention's anchors).

`EventStore` and `open_store` load SQLAlchemy on first use, so that code which only needs the
small value types (the parser process) does not pay for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor.store.types import AppendResult, Checkpoint, EventFilter

if TYPE_CHECKING:
    from advisor.store.store import EventStore, open_store

__all__ = [
    "AppendResult",
    "Checkpoint",
    "EventFilter",
    "EventStore",
    "chain",
    "checkpointing",
    "engine",
    "glance",
    "integrity",
    "leases",
    "migrate",
    "open_store",
    "schema",
    "store",
    "types",
]


def __getattr__(name: str) -> Any:
    if name in ("EventStore", "open_store"):
        from advisor.store import store

        return getattr(store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
