"""order-independent fold: runs keyed by where their lines stand, labels by what they judged

Runs become a function of the set of a stream's log lines in a total order that does not
depend on arrival (time, then the journal's own order: `advisor.projections.order_key`), so the
fold re-derives a stream's runs when older lines arrive late; incidents become a function of
a unit's classified runs. New columns say where each run's first and last lines stand and
what its lines are; `run_labels` keeps every classification by the lines it judged;
`fold_pending` the streams to re-derive at the end of a catch-up; indexes make a stream's
lines and runs from a time range reads.

The projections are not moved here: the fold's checkpoint carries the fold's version, and the
first catch-up after this upgrade finds it older, empties the projections and folds every
event again (`advisor rebuild`) — see `Projector.catch_up`.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_RUN_COLUMNS = (
    ("first_key", sa.Text),
    ("last_key", sa.Text),
    ("last_us", sa.BigInteger),
    ("content", sa.Text),
    ("lifecycle", sa.Text),
    ("label_stale", sa.Boolean),
    ("label_seq", sa.BigInteger),
)
_INCIDENT_COLUMNS = (("started_us", sa.BigInteger), ("superseded_by", sa.Text))


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        for name, type_ in _RUN_COLUMNS:
            batch.add_column(sa.Column(name, type_))
    with op.batch_alter_table("incidents") as batch:
        for name, type_ in _INCIDENT_COLUMNS:
            batch.add_column(sa.Column(name, type_))
    op.create_table(
        "run_labels",
        sa.Column("run_id", sa.Text, primary_key=True),
        sa.Column("content", sa.Text, primary_key=True),
        sa.Column("label", sa.Text, nullable=False),
        sa.Column("confidence", sa.Float, nullable=False),
        sa.Column("phase", sa.Text),
        sa.Column("seq", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "fold_pending",
        sa.Column("stream", sa.Text, primary_key=True),
        sa.Column("first_key", sa.Text, nullable=False),
        sa.Column("first_us", sa.BigInteger, nullable=False),
        sa.Column("last_key", sa.Text, nullable=False),
    )
    # A stream's lines from a time on (re-deriving its runs after late lines; a run's lines).
    op.create_index("events_stream_time", "events", ["stream", "event_time_us"])
    op.create_index("runs_stream_time", "runs", ["stream", "started_us"])
    op.create_index("runs_incident", "runs", ["incident_id", "started_us"])
    op.create_index("incidents_stream_time", "incidents", ["stream", "started_us"])


def downgrade() -> None:
    op.drop_index("incidents_stream_time", "incidents")
    op.drop_index("runs_incident", "runs")
    op.drop_index("runs_stream_time", "runs")
    op.drop_index("events_stream_time", "events")
    op.drop_table("fold_pending")
    op.drop_table("run_labels")
    with op.batch_alter_table("incidents") as batch:
        for name, _type in reversed(_INCIDENT_COLUMNS):
            batch.drop_column(name)
    with op.batch_alter_table("runs") as batch:
        for name, _type in reversed(_RUN_COLUMNS):
            batch.drop_column(name)
