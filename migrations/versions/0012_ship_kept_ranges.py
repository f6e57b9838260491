"""PostgreSQL: `advisor_ship` takes a range of host events the host kept

A host ships what the fleet needs and keeps its routine lines (`advisor.fleet.selection`);
each run of kept events arrives as one `ship.held` event keyed by the range's last host seq,
whose origin holds the host's chain hash after the range and whose payload holds the range
(`first_seq`, `last_seq`) and the hash before it (`from_hash`). `advisor_ship` now takes such
an event when the range starts right after the host's last shipped seq, ends at its key, and
starts from the hash the host's chain has there; it then goes on from the hash after the
range. Everything else is checked as before: the function is migration 0009's (read from
that migration, which never changes) with that one change.

SQLite stores are not changed.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def _migration_0009() -> ModuleType:
    path = Path(__file__).with_name("0009_central_ship.py")
    spec = importlib.util.spec_from_file_location("advisor_migration_0009", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _once(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        raise RuntimeError(f"migration 0012: expected once in 0009's advisor_ship: {old!r}")
    return text.replace(old, new)


# migration 0009's function as it created it (a migration's text never changes)
PREVIOUS = _once(
    _migration_0009().SHIP,
    "CREATE FUNCTION advisor_ship(",
    "CREATE OR REPLACE FUNCTION advisor_ship(",
)
FOLLOWS = r"""    IF k <> last_key + 1 THEN
      RAISE EXCEPTION 'host % seq % does not follow its last shipped seq %', host_, k, last_key
        USING ERRCODE = 'AD001', DETAIL = k::text;
    END IF;
    IF prev_hash IS NOT NULL THEN  -- NULL: shipped before origins were kept"""
FOLLOWS_OR_KEPT = r"""    IF p_types[i] = 'ship.held' THEN
      -- a range of host events the host kept (advisor.fleet.selection): it must start right
      -- after the last shipped seq, from the hash the chain has there; its own hash (the
      -- chain's after the range) is the host's word: the next event must extend it, and the
      -- kept events, read from the host, must reproduce it
      held := p_payloads[i]::jsonb;
      IF (held ->> 'first_seq')::bigint IS DISTINCT FROM last_key + 1
         OR (held ->> 'last_seq')::bigint IS DISTINCT FROM k THEN
        RAISE EXCEPTION 'host % kept range ending at seq % does not follow its last shipped '
                        'seq %', host_, k, last_key
          USING ERRCODE = 'AD001', DETAIL = (last_key + 1)::text;
      END IF;
      IF prev_hash IS NOT NULL
         AND decode(held ->> 'from_hash', 'hex') IS DISTINCT FROM prev_hash THEN
        RAISE EXCEPTION 'host % kept range from seq % does not start from the host''s chain '
                        'as shipped', host_, last_key + 1
          USING ERRCODE = 'AD001', DETAIL = (last_key + 1)::text;
      END IF;
    ELSIF k <> last_key + 1 THEN
      RAISE EXCEPTION 'host % seq % does not follow its last shipped seq %', host_, k, last_key
        USING ERRCODE = 'AD001', DETAIL = k::text;
    ELSIF prev_hash IS NOT NULL THEN  -- NULL: shipped before origins were kept"""
SHIP = _once(
    _once(PREVIOUS, FOLLOWS, FOLLOWS_OR_KEPT),
    "  anchor jsonb;\n",
    "  anchor jsonb;\n  held jsonb;\n",
)


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(SHIP)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(PREVIOUS)
