"""Table definitions the store queries through. Migrations in migrations/ create them."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)

metadata = MetaData()

# Sources are interned so that the idempotency index is (integer, integer).
sources = Table(
    "sources",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("name", Text, nullable=False, unique=True),
)

events = Table(
    "events",
    metadata,
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("stream", Text, nullable=False),
    Column("type", String(64), nullable=False),
    Column("schema_version", Integer, nullable=False),
    Column("event_time_us", BigInteger, nullable=False),
    Column("recorded_time_us", BigInteger, nullable=False),
    Column("source_id", Integer, nullable=False),
    Column("idem_key", BigInteger, nullable=False),
    Column("payload", Text, nullable=False),
    Column("hash", LargeBinary(32), nullable=False),
    # migration 0005: a shipped event's envelope on its host (see `advisor.fleet.ship`); else NULL
    Column("origin", Text),
)

# Where each reader of an external source got to; saved in the transaction of its events.
# Append-only (migration 0008): each new position is a new row, numbered `n` = 1, 2, … per
# name; a reader's current position is the row of its name with the highest `n`.
checkpoints = Table(
    "checkpoints",
    metadata,
    Column("name", Text, primary_key=True),
    Column("n", BigInteger, primary_key=True, autoincrement=False),
    Column("position", Text, nullable=False),
    Column("updated_time_us", BigInteger, nullable=False),
)


# ---------------------------------------------------------------- projections (migration 0002)
# Derived from events only; `advisor rebuild` empties and refills them.
runs = Table(
    "runs",
    metadata,
    Column("run_id", Text, primary_key=True),
    Column("stream", Text, nullable=False),
    Column("host", Text, nullable=False),
    Column("unit", Text, nullable=False),
    Column("invocation_id", Text),
    Column("first_seq", BigInteger, nullable=False),
    Column("last_seq", BigInteger, nullable=False),
    Column("started_us", BigInteger, nullable=False),
    Column("ended_us", BigInteger),
    Column("lines", Integer, nullable=False),
    Column("engine", Text),
    Column("phases", Text, nullable=False),
    Column("last_phase", Text),
    Column("ready_us", BigInteger),
    Column("stop_us", BigInteger),
    Column("config", Text, nullable=False),
    Column("exit_code", Integer),
    Column("exit_signal", Text),
    Column("unit_result", Text),
    Column("restart_count", Integer),
    Column("stop_timed_out", Boolean, nullable=False),
    Column("ended", Boolean, nullable=False),
    Column("died", Boolean, nullable=False),
    Column("outcome", Text, nullable=False),
    Column("peak_gpu_used_bytes", BigInteger),
    Column("peak_gpu_total_bytes", BigInteger),
    Column("label", Text),
    Column("confidence", Float),
    Column("incident_id", Text),
    # migration 0004: the peak came from samples attributed to the run's unit (None: not yet)
    Column("peak_gpu_from_unit", Boolean),
    # migration 0010 (the order-independent fold, `advisor.views.fold.projector`): where the
    # run's first and last lines stand in the stream's order, its last line's time, what its
    # lines are (`run_content`), the lifecycle events seen, and whether its label was given
    # for other lines (stale: diagnosed again) and by which event
    Column("first_key", Text),
    Column("last_key", Text),
    Column("last_us", BigInteger),
    Column("content", Text),
    Column("lifecycle", Text),
    Column("label_stale", Boolean),
    Column("label_seq", BigInteger),
)

incidents = Table(
    "incidents",
    metadata,
    Column("incident_id", Text, primary_key=True),
    Column("stream", Text, nullable=False),
    Column("host", Text, nullable=False),
    Column("unit", Text, nullable=False),
    Column("opened_seq", BigInteger, nullable=False),
    Column("opened_us", BigInteger, nullable=False),
    Column("config_key", Text, nullable=False),
    Column("first_run_id", Text, nullable=False),
    Column("last_run_id", Text, nullable=False),
    Column("runs", Integer, nullable=False),
    Column("status", Text, nullable=False),
    Column("label", Text),
    Column("confidence", Float),
    Column("phase", Text),
    Column("facts", Text),
    Column("evidence", Text),
    Column("candidates", Text),
    Column("classified_seq", BigInteger),
    Column("resolved_us", BigInteger),
    Column("resolved_run_id", Text),
    # migration 0010: when its first run started; for a `superseded` incident (an id the
    # diagnoser named that the runs no longer make an incident), the one now holding its run
    Column("started_us", BigInteger),
    Column("superseded_by", Text),
)

# migration 0010: every `run.classified`, by the run and the lines it judged (`content`; ''
# for a version 1 event, which holds for any): a run's label is looked up here.
run_labels = Table(
    "run_labels",
    metadata,
    Column("run_id", Text, primary_key=True),
    Column("content", Text, primary_key=True),
    Column("label", Text, nullable=False),
    Column("confidence", Float, nullable=False),
    Column("phase", Text),
    Column("seq", BigInteger, nullable=False),
)

gpu_samples = Table(
    "gpu_samples",
    metadata,
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("host", Text, nullable=False),
    Column("gpu", Integer, nullable=False),
    Column("time_us", BigInteger, nullable=False),
    Column("used_bytes", BigInteger, nullable=False),
    Column("total_bytes", BigInteger, nullable=False),
    Column("units", Text),
)

actions = Table(  # migration 0003
    "actions",
    metadata,
    Column("action_id", Text, primary_key=True),
    Column("plan_id", Text, nullable=False),
    Column("step", Integer, nullable=False),
    Column("incident_id", Text),
    Column("host", Text, nullable=False),
    Column("unit", Text),
    Column("kind", Text, nullable=False),
    Column("alternative", Boolean, nullable=False),
    Column("spec", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("proposed_seq", BigInteger, nullable=False),
    Column("proposed_us", BigInteger, nullable=False),
    Column("updated_us", BigInteger, nullable=False),
    Column("decided_by", Text),
    Column("decided_why", Text),
    Column("detail", Text),
    Column("dropin", Text),
    Column("previous", Text),
    Column("executor", Text),  # migration 0007
    Column("state_after", Text),
    Column("written_text", Text),
    Column("previous_text", Text),
    Column("had_previous", Boolean),
    # migration 0013: when the store recorded the proposal (its event's recorded time)
    Column("proposed_recorded_us", BigInteger),
)

leases = Table(  # migration 0007: one executor per plan
    "leases",
    metadata,
    Column("name", Text, primary_key=True),
    Column("holder", Text, nullable=False),
    Column("acquired_us", BigInteger, nullable=False),
    Column("expires_us", BigInteger, nullable=False),
)

# migration 0010: streams whose runs the fold re-derives at the end of its catch-up (older
# lines came), from where (the earliest such line) to where (the latest).
fold_pending = Table(
    "fold_pending",
    metadata,
    Column("stream", Text, primary_key=True),
    Column("first_key", Text, nullable=False),
    Column("first_us", BigInteger, nullable=False),
    Column("last_key", Text, nullable=False),
)

# migration 0013: each stream's newest event, newest heartbeat and newest shipped event
# (`advisor.views.fold.heads`): `advisor hosts` reads them here, not by searching events.
stream_heads = Table(
    "stream_heads",
    metadata,
    Column("stream", Text, primary_key=True),
    Column("seq", BigInteger, nullable=False),
    Column("time_us", BigInteger, nullable=False),
    Column("beat_seq", BigInteger),
    Column("ship_seq", BigInteger),
    Column("shipper", Text),
)

# migration 0014: a central store's requests for ranges of events a host kept
# (`advisor.fleet.fetch`): the range's closing host seq (`held_key`, the key of its
# `ship.held` event) and first seq; the host answers through its shipper (`answered_us`, how
# many events it sent, or why it could not).
fetch_requests = Table(
    "fetch_requests",
    metadata,
    Column("host", Text, primary_key=True),
    Column("held_key", BigInteger, primary_key=True, autoincrement=False),
    Column("first_seq", BigInteger, nullable=False),
    Column("requested_us", BigInteger, nullable=False),
    Column("requested_by", Text, nullable=False),
    Column("answered_us", BigInteger),
    Column("fetched", Integer),
    Column("note", Text),
)

PROJECTION_TABLES = (
    runs,
    incidents,
    gpu_samples,
    actions,
    run_labels,
    fold_pending,
    stream_heads,
)
