"""runs: whether a run's peak GPU memory came from samples attributed to its unit

Lets the fold keep a long run's peak up to date from the new samples alone, instead of
scanning every sample of the run's window again for each chunk.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # NULL: not computed this way yet; the next fold that touches the run computes it in full.
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("peak_gpu_from_unit", sa.Boolean))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("peak_gpu_from_unit")
