"""events.origin: where a shipped event came from, so each host's chain verifies centrally

For an event a host shipped, `origin` holds the host's own envelope fields that the central
row does not keep (the host's recorded time, source, key and hash), as canonical JSON; with
the host's sequence number (the central row's key) and the payload text, which is shipped as
the host stored it, the host's chain can be recomputed in the central store. NULL for events
written where they were observed.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ADD COLUMN (no table copy on SQLite): the append-only triggers stay in place.
    op.add_column("events", sa.Column("origin", sa.Text))


def downgrade() -> None:
    op.drop_column("events", "origin")
