"""executor: one executor per plan (leases), and what each step saw and wrote

`leases`: a plan is run by the executor holding its lease; a lease that is not renewed expires,
so a killed executor's plan can be taken over, and a live one's never is.
`actions` gains what the executor recorded: who ran the step, the unit's state after it, the
drop-in text it wrote and the text it replaced (for rollback, and for a step interrupted after
it wrote the file).

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "leases",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("holder", sa.Text, nullable=False),
        sa.Column("acquired_us", sa.BigInteger, nullable=False),
        sa.Column("expires_us", sa.BigInteger, nullable=False),
    )
    with op.batch_alter_table("actions") as batch:
        batch.add_column(sa.Column("executor", sa.Text))
        batch.add_column(sa.Column("state_after", sa.Text))
        batch.add_column(sa.Column("written_text", sa.Text))
        batch.add_column(sa.Column("previous_text", sa.Text))
        batch.add_column(sa.Column("had_previous", sa.Boolean))


def downgrade() -> None:
    with op.batch_alter_table("actions") as batch:
        for column in ("executor", "state_after", "written_text", "previous_text", "had_previous"):
            batch.drop_column(column)
    op.drop_table("leases")
