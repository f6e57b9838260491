"""What the fleet's readers need at scale: each stream's newest events, kept by the fold
(`stream_heads`), when each plan step was recorded, and the indexes the readers ask through

`advisor hosts`, the console's hosts page and the per-host metrics read, for every host, its
newest event, its newest heartbeat and its newest shipped event. They found them in `events`
one stream at a time (an index look-up each, on every partition of a central store: at a
thousand hosts, minutes). The fold now keeps them, one row a stream (`stream`): the newest
event's seq and time, the newest `agent.heartbeat`'s seq, and the newest event shipped by a
host (source `ship:HOST`) with that host (`shipper`).

The table is filled here from the events stored, all of them, so that no fold has to run
again (the fold's version does not change); a one-off pass over `events` (an index scan a
stream, a scan for the shipped ones). What the fold then folds again it merges by seq: the
rows are the same whichever folded an event first.

`advisor stats` reads the projections through DuckDB. On PostgreSQL, DuckDB hands a filter
on a text column to the server as `host = '…' COLLATE "C"`, which an index in the
database's own collation cannot answer: each GPU-memory-release figure scanned every GPU
sample. `gpu_samples_host_c` indexes (host COLLATE "C", time_us), so the samples around each
killed run are an index range.

The console's incident list shows the incidents whose plans await a decision first, then the
newest: `incidents_open` finds the open incidents and `actions_incident` their steps,
`incidents_opened` reads the newest down the index (it sorted every incident of the fleet,
and counted every proposed step of every plan, for each first page). An incident's page
reads its service's plans by `actions_host_unit`.

The metrics' time from a crash to its plan read each plan's first step's event by seq, on
every scrape: PostgreSQL merged every event of the store for it. The fold now keeps when the
store recorded each proposal (`actions.proposed_recorded_us`), filled here from the events.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

FILL = """
INSERT INTO stream_heads (stream, seq, time_us, beat_seq, ship_seq, shipper)
SELECT n.stream, n.seq, e.event_time_us, b.seq, s.seq, substr(so.name, 6)
FROM (SELECT stream, max(seq) AS seq FROM events GROUP BY stream) n
JOIN events e ON e.seq = n.seq
LEFT JOIN (SELECT stream, max(seq) AS seq FROM events WHERE type = 'agent.heartbeat'
           GROUP BY stream) b ON b.stream = n.stream
LEFT JOIN (SELECT x.stream, max(x.seq) AS seq FROM events x
           JOIN sources xs ON xs.id = x.source_id
           WHERE xs.name LIKE 'ship:%' GROUP BY x.stream) s ON s.stream = n.stream
LEFT JOIN events se ON se.seq = s.seq
LEFT JOIN sources so ON so.id = se.source_id
"""


def upgrade() -> None:
    op.create_table(
        "stream_heads",
        sa.Column("stream", sa.Text, primary_key=True),
        sa.Column("seq", sa.BigInteger, nullable=False),
        sa.Column("time_us", sa.BigInteger, nullable=False),
        sa.Column("beat_seq", sa.BigInteger),
        sa.Column("ship_seq", sa.BigInteger),
        sa.Column("shipper", sa.Text),
    )
    op.execute(FILL)
    op.add_column("actions", sa.Column("proposed_recorded_us", sa.BigInteger))
    op.execute(
        "UPDATE actions SET proposed_recorded_us = "
        "(SELECT recorded_time_us FROM events WHERE events.seq = actions.proposed_seq)"
    )
    op.execute("CREATE INDEX incidents_opened ON incidents (opened_us, incident_id)")
    op.execute("CREATE INDEX incidents_open ON incidents (incident_id) WHERE status = 'open'")
    op.execute("CREATE INDEX actions_incident ON actions (incident_id)")
    op.execute("CREATE INDEX actions_host_unit ON actions (host, unit)")
    if op.get_bind().dialect.name == "postgresql":
        op.execute('CREATE INDEX gpu_samples_host_c ON gpu_samples (host COLLATE "C", time_us)')


def downgrade() -> None:
    with op.batch_alter_table("actions") as batch:
        batch.drop_column("proposed_recorded_us")
    for index in ("incidents_opened", "incidents_open", "actions_incident", "actions_host_unit"):
        op.execute(f"DROP INDEX {index}")
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX gpu_samples_host_c")
    op.drop_table("stream_heads")
