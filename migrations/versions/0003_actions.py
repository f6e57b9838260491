"""projection: actions (proposed steps of plans and what became of them)

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "actions",
        sa.Column("action_id", sa.Text, primary_key=True),
        sa.Column("plan_id", sa.Text, nullable=False),
        sa.Column("step", sa.Integer, nullable=False),
        sa.Column("incident_id", sa.Text),
        sa.Column("host", sa.Text, nullable=False),
        sa.Column("unit", sa.Text),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("alternative", sa.Boolean, nullable=False),
        sa.Column("spec", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("proposed_seq", sa.BigInteger, nullable=False),
        sa.Column("proposed_us", sa.BigInteger, nullable=False),
        sa.Column("updated_us", sa.BigInteger, nullable=False),
        sa.Column("decided_by", sa.Text),
        sa.Column("decided_why", sa.Text),
        sa.Column("detail", sa.Text),
        sa.Column("dropin", sa.Text),
        sa.Column("previous", sa.Text),
    )
    op.create_index("actions_plan_step", "actions", ["plan_id", "step"])
    op.create_index("actions_status", "actions", ["status"])


def downgrade() -> None:
    op.drop_table("actions")
