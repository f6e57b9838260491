"""The append-only event store (SQLite or PostgreSQL through SQLAlchemy)."""

from advisor.store.store import AppendResult, Checkpoint, EventFilter, EventStore, open_store

__all__ = ["AppendResult", "Checkpoint", "EventFilter", "EventStore", "open_store"]
