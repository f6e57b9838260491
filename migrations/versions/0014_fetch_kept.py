"""A central store asks a host for the events it kept, and takes them only as kept

A host ships what the fleet needs and keeps its routine lines (`advisor.fleet.selection`);
each run of kept events stands in the central store as a `ship.held` event: the range's
first and last host seq, the host's chain hash before it (payload) and after it (origin).
A central post-mortem that needs those lines now asks for them (`advisor fetch`):

- `fetch_requests` holds the owner's requests, one row a range (the host, the range's last
  seq `held_key`, its first seq, who asked and when) and the host's answer (when, how many
  events, or why it could not). The owner writes it; a host's shipping role reads it.
- PostgreSQL: `advisor_ship_kept(host, held_key, note, …the events as advisor_ship takes
  them…)`, a SECURITY DEFINER function of the owner, takes a whole range or nothing: the host
  from the calling role's binding (`advisor_ship_host`), the range from its `ship.held`
  event, every host seq of it once and in order, each event's hash recomputed from the
  range's starting hash as `advisor_ship` does, and the last one equal to the range's closing
  hash — the hash the host committed to when it shipped the range. The events are stored with
  source `kept:HOST` and their host seq as key (a range fetched twice is a duplicate), their
  origin as a shipped event's, numbered and chained by the server, and the request is marked
  answered. With no events, `note` says why the host could not send them (retained there)
  and the request is answered with it.

SQLite stores get the table; a SQLite central store (development, tests) makes the same
checks in Python (`advisor.store.integrity.kept`).

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

APPEND_LOCK_ID = 0x616476_617070  # advisor.store.store.APPEND_LOCK_ID
MAX_RANGE = 100_000  # events in one advisor_ship_kept call (a kept range is at most 5,000)
NOTE_CHARS = 500


def _migration_0009() -> ModuleType:
    path = Path(__file__).with_name("0009_central_ship.py")
    spec = importlib.util.spec_from_file_location("advisor_migration_0009", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _between(text: str, start: str, end: str) -> str:
    """`text` from `start` up to `end`, each found once."""
    if text.count(start) != 1 or text.count(end) != 1:
        raise RuntimeError(f"migration 0014: expected once in 0009's advisor_ship: {start!r}")
    return text[text.index(start) : text.index(end)]


# advisor_ship's checks of its arrays (one value per event in each, none NULL), as migration
# 0009 made them (a migration's text never changes): advisor_ship_kept takes the same arrays
ARRAY_CHECKS = _between(
    _migration_0009().SHIP,
    "  IF COALESCE(cardinality(p_streams), 0) <> n",
    "  PERFORM pg_advisory_xact_lock(",
)
KEPT_SIGNATURE = (
    "text, bigint, text, bigint[], text[], text[], integer[], bigint[], bigint[], text[], "
    "bigint[], text[], bytea[]"
)

# The JSON array the host chain hashes, as in migration 0009's advisor_ship.
SHIP_KEPT = f"""
CREATE FUNCTION advisor_ship_kept(
    p_host text, p_held bigint, p_note text, p_keys bigint[], p_streams text[], p_types text[],
    p_versions integer[], p_times bigint[], p_recorded bigint[], p_sources text[],
    p_source_keys bigint[], p_payloads text[], p_hashes bytea[],
    OUT appended integer, OUT duplicates integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT
SET plan_cache_mode = force_custom_plan AS $$
DECLARE
  host_ text := advisor_ship_host(p_host);
  src text := 'kept:' || host_;
  n integer := COALESCE(cardinality(p_keys), 0);
  now_ bigint := (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
  held jsonb;
  held_origin text;
  first_ bigint;
  prev_hash bytea;
  closing bytea;
  sid integer;
  k bigint;
  h bytea;
  chain bytea;
  last_seq bigint;
  next_from bigint;
  origin_ text;
  i integer;
  ins_hash bytea[] := '{{}}';
  ins_origin text[] := '{{}}';
BEGIN
  IF current_setting('server_encoding') <> 'UTF8' THEN
    RAISE EXCEPTION 'the central store must be a UTF8 database, not %',
                    current_setting('server_encoding');
  END IF;
  SELECT e.payload::jsonb, e.origin INTO held, held_origin FROM events e
    JOIN sources s ON s.id = e.source_id
    WHERE s.name = 'ship:' || host_ AND e.idem_key = p_held AND e.type = 'ship.held';
  IF NOT FOUND OR held_origin IS NULL THEN
    RAISE EXCEPTION 'host % kept no range ending at its seq % here', host_, p_held
      USING ERRCODE = 'AD001', DETAIL = p_held::text;
  END IF;
  first_ := (held ->> 'first_seq')::bigint;
  prev_hash := decode(held ->> 'from_hash', 'hex');
  closing := decode(held_origin::jsonb ->> 'hash', 'hex');
  IF n = 0 THEN  -- the host cannot send them: say why
    UPDATE fetch_requests SET answered_us = now_, fetched = 0,
        note = left(COALESCE(NULLIF(p_note, ''), 'the host sent no events'), {NOTE_CHARS})
      WHERE host = host_ AND held_key = p_held AND answered_us IS NULL;
    appended := 0;
    duplicates := 0;
    RETURN;
  END IF;
  IF n > {MAX_RANGE} THEN
    RAISE EXCEPTION 'at most {MAX_RANGE:,} events a call, not %', n
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
{ARRAY_CHECKS}  FOR i IN 1 .. n LOOP  -- the range, whole, in the host's chain
    k := p_keys[i];
    IF k <> first_ + i - 1 OR k > p_held THEN
      RAISE EXCEPTION 'host % seq % is not the next of its kept range %..%', host_, k, first_,
                      p_held USING ERRCODE = 'AD001', DETAIL = (first_ + i - 1)::text;
    END IF;
    h := sha256(prev_hash || convert_to(
           '[' || k || ',' || to_json(p_streams[i])::text || ',' || to_json(p_types[i])::text
           || ',' || p_versions[i] || ',' || p_times[i] || ',' || p_recorded[i] || ','
           || to_json(p_sources[i])::text || ',' || p_source_keys[i] || ']' || E'\\n'
           || p_payloads[i], 'UTF8'));
    IF h IS DISTINCT FROM p_hashes[i] THEN
      RAISE EXCEPTION 'host % seq % does not extend its chain from the start of its kept range '
                      '%..%', host_, k, first_, p_held
        USING ERRCODE = 'AD001', DETAIL = k::text;
    END IF;
    IF json_typeof(p_payloads[i]::json) IS DISTINCT FROM 'object' THEN
      RAISE EXCEPTION 'host % seq %: the payload is not a JSON object', host_, k
        USING ERRCODE = 'AD001', DETAIL = k::text;
    END IF;
    prev_hash := h;
  END LOOP;
  IF first_ + n - 1 <> p_held THEN
    RAISE EXCEPTION 'host % kept range %..% ends at seq %, not %', host_, first_, p_held,
                    first_ + n - 1, p_held
      USING ERRCODE = 'AD001', DETAIL = (first_ + n)::text;
  END IF;
  IF prev_hash IS DISTINCT FROM closing THEN
    RAISE EXCEPTION 'host % kept range %..% does not end at the hash it shipped for it: these '
                    'are not the events it kept', host_, first_, p_held
      USING ERRCODE = 'AD001', DETAIL = first_::text;
  END IF;
  PERFORM pg_advisory_xact_lock({APPEND_LOCK_ID});
  SELECT id INTO sid FROM sources WHERE name = src;
  IF sid IS NOT NULL AND EXISTS (SELECT 1 FROM events e WHERE e.source_id = sid
                                   AND e.idem_key = p_held) THEN
    appended := 0;  -- fetched before (a range is stored whole or not at all)
    duplicates := n;
  ELSE
    IF sid IS NULL THEN
      SELECT COALESCE(max(id), 0) + 1 INTO sid FROM sources;
      INSERT INTO sources (id, name) VALUES (sid, src);
    END IF;
    SELECT e.seq, e.hash INTO last_seq, chain FROM events e ORDER BY e.seq DESC LIMIT 1;
    IF NOT FOUND THEN
      last_seq := 0;
      chain := decode(repeat('00', 32), 'hex');
    END IF;
    FOR i IN 1 .. n LOOP
      origin_ := '{{"hash":"' || encode(p_hashes[i], 'hex') || '","key":' || p_source_keys[i]
                 || ',"recorded_us":' || p_recorded[i] || ',"source":'
                 || to_json(p_sources[i])::text || '}}';
      chain := sha256(chain || convert_to(
                 '[' || (last_seq + i) || ',' || to_json(p_streams[i])::text || ','
                 || to_json(p_types[i])::text || ',' || p_versions[i] || ',' || p_times[i]
                 || ',' || now_ || ',' || to_json(src)::text || ',' || p_keys[i] || ']'
                 || E'\\n' || p_payloads[i] || E'\\n' || origin_, 'UTF8'));
      ins_hash := ins_hash || chain;
      ins_origin := ins_origin || origin_;
    END LOOP;
    SELECT p.next_from INTO next_from FROM advisor_partitioning p;
    IF last_seq + n >= next_from THEN
      PERFORM advisor_ensure_partitions(last_seq + n);
    END IF;
    INSERT INTO events (seq, stream, type, schema_version, event_time_us, recorded_time_us,
                        source_id, idem_key, payload, hash, origin)
      SELECT last_seq + u.ix, p_streams[u.ix], p_types[u.ix], p_versions[u.ix], p_times[u.ix],
             now_, sid, p_keys[u.ix], p_payloads[u.ix], u.hh, u.oo
      FROM unnest(ins_hash, ins_origin) WITH ORDINALITY AS u(hh, oo, ix);
    appended := n;
    duplicates := 0;
  END IF;
  UPDATE fetch_requests SET answered_us = now_, fetched = n, note = NULL
    WHERE host = host_ AND held_key = p_held AND answered_us IS NULL;
END $$
"""


def upgrade() -> None:
    op.create_table(
        "fetch_requests",
        sa.Column("host", sa.Text, primary_key=True),
        sa.Column("held_key", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("first_seq", sa.BigInteger, nullable=False),
        sa.Column("requested_us", sa.BigInteger, nullable=False),
        sa.Column("requested_by", sa.Text, nullable=False),
        sa.Column("answered_us", sa.BigInteger),
        sa.Column("fetched", sa.Integer),
        sa.Column("note", sa.Text),
    )
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(
        "CREATE INDEX fetch_requests_open ON fetch_requests (host, held_key) "
        "WHERE answered_us IS NULL"
    )
    op.execute(SHIP_KEPT)
    op.execute(f"REVOKE ALL ON FUNCTION advisor_ship_kept({KEPT_SIGNATURE}) FROM PUBLIC")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP FUNCTION advisor_ship_kept({KEPT_SIGNATURE})")
    op.drop_table("fetch_requests")
