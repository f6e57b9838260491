"""projections: service runs, incidents, GPU samples (derived from events; rebuildable)

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("run_id", sa.Text, primary_key=True),
        sa.Column("stream", sa.Text, nullable=False),
        sa.Column("host", sa.Text, nullable=False),
        sa.Column("unit", sa.Text, nullable=False),
        sa.Column("invocation_id", sa.Text),
        sa.Column("first_seq", sa.BigInteger, nullable=False),
        sa.Column("last_seq", sa.BigInteger, nullable=False),
        sa.Column("started_us", sa.BigInteger, nullable=False),
        sa.Column("ended_us", sa.BigInteger),
        sa.Column("lines", sa.Integer, nullable=False),
        sa.Column("engine", sa.Text),
        sa.Column("phases", sa.Text, nullable=False),
        sa.Column("last_phase", sa.Text),
        sa.Column("ready_us", sa.BigInteger),
        sa.Column("stop_us", sa.BigInteger),
        sa.Column("config", sa.Text, nullable=False),
        sa.Column("exit_code", sa.Integer),
        sa.Column("exit_signal", sa.Text),
        sa.Column("unit_result", sa.Text),
        sa.Column("restart_count", sa.Integer),
        sa.Column("stop_timed_out", sa.Boolean, nullable=False),
        sa.Column("ended", sa.Boolean, nullable=False),
        sa.Column("died", sa.Boolean, nullable=False),
        sa.Column("outcome", sa.Text, nullable=False),
        sa.Column("peak_gpu_used_bytes", sa.BigInteger),
        sa.Column("peak_gpu_total_bytes", sa.BigInteger),
        sa.Column("label", sa.Text),
        sa.Column("confidence", sa.Float),
        sa.Column("incident_id", sa.Text),
    )
    op.create_index("runs_stream_seq", "runs", ["stream", "first_seq"])
    op.create_index("runs_host_time", "runs", ["host", "started_us"])
    op.create_table(
        "incidents",
        sa.Column("incident_id", sa.Text, primary_key=True),
        sa.Column("stream", sa.Text, nullable=False),
        sa.Column("host", sa.Text, nullable=False),
        sa.Column("unit", sa.Text, nullable=False),
        sa.Column("opened_seq", sa.BigInteger, nullable=False),
        sa.Column("opened_us", sa.BigInteger, nullable=False),
        sa.Column("config_key", sa.Text, nullable=False),
        sa.Column("first_run_id", sa.Text, nullable=False),
        sa.Column("last_run_id", sa.Text, nullable=False),
        sa.Column("runs", sa.Integer, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("label", sa.Text),
        sa.Column("confidence", sa.Float),
        sa.Column("phase", sa.Text),
        sa.Column("facts", sa.Text),
        sa.Column("evidence", sa.Text),
        sa.Column("candidates", sa.Text),
        sa.Column("classified_seq", sa.BigInteger),
        sa.Column("resolved_us", sa.BigInteger),
        sa.Column("resolved_run_id", sa.Text),
    )
    op.create_index("incidents_unit", "incidents", ["host", "unit", "status"])
    op.create_table(
        "gpu_samples",
        sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("host", sa.Text, nullable=False),
        sa.Column("gpu", sa.Integer, nullable=False),
        sa.Column("time_us", sa.BigInteger, nullable=False),
        sa.Column("used_bytes", sa.BigInteger, nullable=False),
        sa.Column("total_bytes", sa.BigInteger, nullable=False),
        sa.Column("units", sa.Text),
    )
    op.create_index("gpu_samples_host_time", "gpu_samples", ["host", "time_us"])


def downgrade() -> None:
    op.drop_table("gpu_samples")
    op.drop_table("incidents")
    op.drop_table("runs")
