"""PostgreSQL: `advisor_ship` takes a range of host events the host kept

A host ships what the fleet needs and keeps its routine lines (`advisor.fleet.selection`);
each run of kept events arrives as one `ship.held` event keyed by the range's last host seq,
whose origin holds the host's chain hash after the range and whose payload holds the range
(`first_seq`, `last_seq`) and the hash before it (`from_hash`). `advisor_ship` now takes such
an event when the range starts right after the host's last shipped seq, ends at its key, and
starts from the hash the host's chain has there; it then goes on from the hash after the
range. Everything else is checked as before (migration 0009, whose function this replaces
with the one change).

SQLite stores are not changed.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

SHIP = r"""
CREATE OR REPLACE FUNCTION advisor_ship(
    p_host text, p_keys bigint[], p_streams text[], p_types text[], p_versions integer[],
    p_times bigint[], p_recorded bigint[], p_sources text[], p_source_keys bigint[],
    p_payloads text[], p_hashes bytea[],
    OUT appended integer, OUT duplicates integer, OUT last_key bigint, OUT last_seq bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT
SET plan_cache_mode = force_custom_plan AS $$
DECLARE
  host_ text := advisor_ship_host(p_host);
  src text := 'ship:' || host_;
  n integer := COALESCE(cardinality(p_keys), 0);
  sid integer;
  k bigint;
  prev_hash bytea := decode(repeat('00', 32), 'hex');
  anchor jsonb;
  held jsonb;
  anchor_seq bigint;
  stored text;
  found_ boolean;
  same boolean;
  chain bytea;
  h bytea;
  origin_ text;
  recorded bigint := (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
  next_from bigint;
  i integer;
  ins_seq bigint[] := '{}';
  ins_idx integer[] := '{}';
  ins_hash bytea[] := '{}';
  ins_origin text[] := '{}';
BEGIN
  IF current_setting('server_encoding') <> 'UTF8' THEN
    RAISE EXCEPTION 'the central store must be a UTF8 database, not %',
                    current_setting('server_encoding');
  END IF;
  IF n > 100000 THEN
    RAISE EXCEPTION 'at most 100,000 events a call, not %', n
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF COALESCE(cardinality(p_streams), 0) <> n OR COALESCE(cardinality(p_types), 0) <> n
     OR COALESCE(cardinality(p_versions), 0) <> n OR COALESCE(cardinality(p_times), 0) <> n
     OR COALESCE(cardinality(p_recorded), 0) <> n OR COALESCE(cardinality(p_sources), 0) <> n
     OR COALESCE(cardinality(p_source_keys), 0) <> n
     OR COALESCE(cardinality(p_payloads), 0) <> n OR COALESCE(cardinality(p_hashes), 0) <> n
  THEN
    RAISE EXCEPTION 'one value per event in every array' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF array_position(p_keys, NULL) IS NOT NULL OR array_position(p_streams, NULL) IS NOT NULL
     OR array_position(p_types, NULL) IS NOT NULL OR array_position(p_versions, NULL) IS NOT NULL
     OR array_position(p_times, NULL) IS NOT NULL OR array_position(p_recorded, NULL) IS NOT NULL
     OR array_position(p_sources, NULL) IS NOT NULL
     OR array_position(p_source_keys, NULL) IS NOT NULL
     OR array_position(p_payloads, NULL) IS NOT NULL OR array_position(p_hashes, NULL) IS NOT NULL
  THEN
    RAISE EXCEPTION 'no value may be NULL' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  PERFORM pg_advisory_xact_lock(107084110721136);
  appended := 0;
  duplicates := 0;
  last_key := 0;
  SELECT id INTO sid FROM sources WHERE name = src;
  IF sid IS NOT NULL THEN
    SELECT e.idem_key, e.origin INTO k, stored FROM events e WHERE e.source_id = sid
      ORDER BY e.idem_key DESC LIMIT 1;
    IF FOUND THEN
      last_key := k;
      prev_hash := CASE WHEN stored IS NULL THEN NULL
                        ELSE decode(stored::jsonb ->> 'hash', 'hex') END;
    END IF;
  END IF;
  -- the host's anchor where its older events were retained (advisor retention)
  SELECT a INTO anchor FROM (
      SELECT e.payload::jsonb -> 'hosts' -> src AS a FROM events e
      WHERE e.type = 'store.retained') r
    WHERE a IS NOT NULL ORDER BY (a ->> 'seq')::bigint DESC LIMIT 1;
  anchor_seq := (anchor ->> 'seq')::bigint;
  IF anchor_seq > last_key THEN
    last_key := anchor_seq;
    prev_hash := decode(anchor ->> 'hash', 'hex');
  END IF;
  SELECT e.seq, e.hash INTO last_seq, chain FROM events e ORDER BY e.seq DESC LIMIT 1;
  IF NOT FOUND THEN
    last_seq := 0;
    chain := decode(repeat('00', 32), 'hex');
  END IF;
  FOR i IN 1 .. n LOOP
    k := p_keys[i];
    IF length(p_hashes[i]) <> 32 THEN
      RAISE EXCEPTION 'host % seq %: a hash is 32 bytes', host_, k
        USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF k <= last_key THEN  -- there already, or it must be refused
      found_ := false;
      IF sid IS NOT NULL THEN
        SELECT e.origin, (e.stream, e.type, e.schema_version, e.event_time_us, e.payload)
                         IS NOT DISTINCT FROM (p_streams[i], p_types[i], p_versions[i],
                                               p_times[i], p_payloads[i])
          INTO stored, same FROM events e WHERE e.source_id = sid AND e.idem_key = k LIMIT 1;
        found_ := FOUND;
      END IF;
      IF found_ THEN
        -- shipped with its origin: the same hash; before origins were kept: the same content
        IF (CASE WHEN stored IS NULL THEN NOT same
                 ELSE decode(stored::jsonb ->> 'hash', 'hex') <> p_hashes[i] END) THEN
          RAISE EXCEPTION 'host % seq % is in the central store with another hash: the host''s '
                          'history differs from what it shipped', host_, k
            USING ERRCODE = 'AD001', DETAIL = k::text;
        END IF;
      ELSIF anchor_seq IS NOT NULL AND k <= anchor_seq THEN
        IF k = anchor_seq AND decode(anchor ->> 'hash', 'hex') <> p_hashes[i] THEN
          RAISE EXCEPTION 'host % seq % was retained with another hash: the host''s history '
                          'differs from what it shipped', host_, k
            USING ERRCODE = 'AD001', DETAIL = k::text;
        END IF;
      ELSE
        RAISE EXCEPTION 'host % seq % is missing from the central store below its last '
                        'shipped seq %', host_, k, last_key
          USING ERRCODE = 'AD001', DETAIL = k::text;
      END IF;
      duplicates := duplicates + 1;
      CONTINUE;
    END IF;
    IF p_types[i] = 'ship.held' THEN
      -- a range of host events the host kept (advisor.fleet.selection): it must start right
      -- after the last shipped seq, from the hash the chain has there; its own hash (the
      -- chain's after the range) is the host's word, checked when the range is fetched
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
    ELSIF prev_hash IS NOT NULL THEN  -- NULL: shipped before origins were kept
      h := sha256(prev_hash || convert_to(
             '[' || k || ',' || to_json(p_streams[i])::text || ',' || to_json(p_types[i])::text
             || ',' || p_versions[i] || ',' || p_times[i] || ',' || p_recorded[i] || ','
             || to_json(p_sources[i])::text || ',' || p_source_keys[i] || ']' || E'\n'
             || p_payloads[i], 'UTF8'));
      IF h IS DISTINCT FROM p_hashes[i] THEN
        RAISE EXCEPTION 'host % seq % does not extend the host''s chain as shipped: its hash '
                        'is not the hash of its content after seq %', host_, k, last_key
          USING ERRCODE = 'AD001', DETAIL = k::text;
      END IF;
    END IF;
    -- json, not jsonb: a log line's NUL, escaped, is valid JSON that jsonb refuses
    IF json_typeof(p_payloads[i]::json) IS DISTINCT FROM 'object' THEN
      RAISE EXCEPTION 'host % seq %: the payload is not a JSON object', host_, k
        USING ERRCODE = 'AD001', DETAIL = k::text;
    END IF;
    last_seq := last_seq + 1;
    origin_ := '{"hash":"' || encode(p_hashes[i], 'hex') || '","key":' || p_source_keys[i]
               || ',"recorded_us":' || p_recorded[i] || ',"source":'
               || to_json(p_sources[i])::text || '}';
    chain := sha256(chain || convert_to(
               '[' || last_seq || ',' || to_json(p_streams[i])::text || ','
               || to_json(p_types[i])::text || ',' || p_versions[i] || ',' || p_times[i] || ','
               || recorded || ',' || to_json(src)::text || ',' || k || ']' || E'\n'
               || p_payloads[i] || E'\n' || origin_, 'UTF8'));
    ins_seq := ins_seq || last_seq;
    ins_idx := ins_idx || i;
    ins_hash := ins_hash || chain;
    ins_origin := ins_origin || origin_;
    last_key := k;
    prev_hash := p_hashes[i];
    appended := appended + 1;
  END LOOP;
  IF appended = 0 THEN
    RETURN;
  END IF;
  IF sid IS NULL THEN
    SELECT COALESCE(max(id), 0) + 1 INTO sid FROM sources;
    INSERT INTO sources (id, name) VALUES (sid, src);
  END IF;
  SELECT p.next_from INTO next_from FROM advisor_partitioning p;
  IF last_seq >= next_from THEN
    PERFORM advisor_ensure_partitions(last_seq);
  END IF;
  INSERT INTO events (seq, stream, type, schema_version, event_time_us, recorded_time_us,
                      source_id, idem_key, payload, hash, origin)
    SELECT u.s, p_streams[u.ix], p_types[u.ix], p_versions[u.ix], p_times[u.ix], recorded,
           sid, p_keys[u.ix], p_payloads[u.ix], u.hh, u.oo
    FROM unnest(ins_seq, ins_idx, ins_hash, ins_origin) AS u(s, ix, hh, oo);
END $$
"""

# migration 0009's function, without the kept ranges
PREVIOUS = r"""
CREATE OR REPLACE FUNCTION advisor_ship(
    p_host text, p_keys bigint[], p_streams text[], p_types text[], p_versions integer[],
    p_times bigint[], p_recorded bigint[], p_sources text[], p_source_keys bigint[],
    p_payloads text[], p_hashes bytea[],
    OUT appended integer, OUT duplicates integer, OUT last_key bigint, OUT last_seq bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT
SET plan_cache_mode = force_custom_plan AS $$
DECLARE
  host_ text := advisor_ship_host(p_host);
  src text := 'ship:' || host_;
  n integer := COALESCE(cardinality(p_keys), 0);
  sid integer;
  k bigint;
  prev_hash bytea := decode(repeat('00', 32), 'hex');
  anchor jsonb;
  anchor_seq bigint;
  stored text;
  found_ boolean;
  same boolean;
  chain bytea;
  h bytea;
  origin_ text;
  recorded bigint := (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
  next_from bigint;
  i integer;
  ins_seq bigint[] := '{}';
  ins_idx integer[] := '{}';
  ins_hash bytea[] := '{}';
  ins_origin text[] := '{}';
BEGIN
  IF current_setting('server_encoding') <> 'UTF8' THEN
    RAISE EXCEPTION 'the central store must be a UTF8 database, not %',
                    current_setting('server_encoding');
  END IF;
  IF n > 100000 THEN
    RAISE EXCEPTION 'at most 100,000 events a call, not %', n
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF COALESCE(cardinality(p_streams), 0) <> n OR COALESCE(cardinality(p_types), 0) <> n
     OR COALESCE(cardinality(p_versions), 0) <> n OR COALESCE(cardinality(p_times), 0) <> n
     OR COALESCE(cardinality(p_recorded), 0) <> n OR COALESCE(cardinality(p_sources), 0) <> n
     OR COALESCE(cardinality(p_source_keys), 0) <> n
     OR COALESCE(cardinality(p_payloads), 0) <> n OR COALESCE(cardinality(p_hashes), 0) <> n
  THEN
    RAISE EXCEPTION 'one value per event in every array' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF array_position(p_keys, NULL) IS NOT NULL OR array_position(p_streams, NULL) IS NOT NULL
     OR array_position(p_types, NULL) IS NOT NULL OR array_position(p_versions, NULL) IS NOT NULL
     OR array_position(p_times, NULL) IS NOT NULL OR array_position(p_recorded, NULL) IS NOT NULL
     OR array_position(p_sources, NULL) IS NOT NULL
     OR array_position(p_source_keys, NULL) IS NOT NULL
     OR array_position(p_payloads, NULL) IS NOT NULL OR array_position(p_hashes, NULL) IS NOT NULL
  THEN
    RAISE EXCEPTION 'no value may be NULL' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  PERFORM pg_advisory_xact_lock(107084110721136);
  appended := 0;
  duplicates := 0;
  last_key := 0;
  SELECT id INTO sid FROM sources WHERE name = src;
  IF sid IS NOT NULL THEN
    SELECT e.idem_key, e.origin INTO k, stored FROM events e WHERE e.source_id = sid
      ORDER BY e.idem_key DESC LIMIT 1;
    IF FOUND THEN
      last_key := k;
      prev_hash := CASE WHEN stored IS NULL THEN NULL
                        ELSE decode(stored::jsonb ->> 'hash', 'hex') END;
    END IF;
  END IF;
  -- the host's anchor where its older events were retained (advisor retention)
  SELECT a INTO anchor FROM (
      SELECT e.payload::jsonb -> 'hosts' -> src AS a FROM events e
      WHERE e.type = 'store.retained') r
    WHERE a IS NOT NULL ORDER BY (a ->> 'seq')::bigint DESC LIMIT 1;
  anchor_seq := (anchor ->> 'seq')::bigint;
  IF anchor_seq > last_key THEN
    last_key := anchor_seq;
    prev_hash := decode(anchor ->> 'hash', 'hex');
  END IF;
  SELECT e.seq, e.hash INTO last_seq, chain FROM events e ORDER BY e.seq DESC LIMIT 1;
  IF NOT FOUND THEN
    last_seq := 0;
    chain := decode(repeat('00', 32), 'hex');
  END IF;
  FOR i IN 1 .. n LOOP
    k := p_keys[i];
    IF length(p_hashes[i]) <> 32 THEN
      RAISE EXCEPTION 'host % seq %: a hash is 32 bytes', host_, k
        USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF k <= last_key THEN  -- there already, or it must be refused
      found_ := false;
      IF sid IS NOT NULL THEN
        SELECT e.origin, (e.stream, e.type, e.schema_version, e.event_time_us, e.payload)
                         IS NOT DISTINCT FROM (p_streams[i], p_types[i], p_versions[i],
                                               p_times[i], p_payloads[i])
          INTO stored, same FROM events e WHERE e.source_id = sid AND e.idem_key = k LIMIT 1;
        found_ := FOUND;
      END IF;
      IF found_ THEN
        -- shipped with its origin: the same hash; before origins were kept: the same content
        IF (CASE WHEN stored IS NULL THEN NOT same
                 ELSE decode(stored::jsonb ->> 'hash', 'hex') <> p_hashes[i] END) THEN
          RAISE EXCEPTION 'host % seq % is in the central store with another hash: the host''s '
                          'history differs from what it shipped', host_, k
            USING ERRCODE = 'AD001', DETAIL = k::text;
        END IF;
      ELSIF anchor_seq IS NOT NULL AND k <= anchor_seq THEN
        IF k = anchor_seq AND decode(anchor ->> 'hash', 'hex') <> p_hashes[i] THEN
          RAISE EXCEPTION 'host % seq % was retained with another hash: the host''s history '
                          'differs from what it shipped', host_, k
            USING ERRCODE = 'AD001', DETAIL = k::text;
        END IF;
      ELSE
        RAISE EXCEPTION 'host % seq % is missing from the central store below its last '
                        'shipped seq %', host_, k, last_key
          USING ERRCODE = 'AD001', DETAIL = k::text;
      END IF;
      duplicates := duplicates + 1;
      CONTINUE;
    END IF;
    IF k <> last_key + 1 THEN
      RAISE EXCEPTION 'host % seq % does not follow its last shipped seq %', host_, k, last_key
        USING ERRCODE = 'AD001', DETAIL = k::text;
    END IF;
    IF prev_hash IS NOT NULL THEN  -- NULL: shipped before origins were kept
      h := sha256(prev_hash || convert_to(
             '[' || k || ',' || to_json(p_streams[i])::text || ',' || to_json(p_types[i])::text
             || ',' || p_versions[i] || ',' || p_times[i] || ',' || p_recorded[i] || ','
             || to_json(p_sources[i])::text || ',' || p_source_keys[i] || ']' || E'\n'
             || p_payloads[i], 'UTF8'));
      IF h IS DISTINCT FROM p_hashes[i] THEN
        RAISE EXCEPTION 'host % seq % does not extend the host''s chain as shipped: its hash '
                        'is not the hash of its content after seq %', host_, k, last_key
          USING ERRCODE = 'AD001', DETAIL = k::text;
      END IF;
    END IF;
    -- json, not jsonb: a log line's NUL, escaped, is valid JSON that jsonb refuses
    IF json_typeof(p_payloads[i]::json) IS DISTINCT FROM 'object' THEN
      RAISE EXCEPTION 'host % seq %: the payload is not a JSON object', host_, k
        USING ERRCODE = 'AD001', DETAIL = k::text;
    END IF;
    last_seq := last_seq + 1;
    origin_ := '{"hash":"' || encode(p_hashes[i], 'hex') || '","key":' || p_source_keys[i]
               || ',"recorded_us":' || p_recorded[i] || ',"source":'
               || to_json(p_sources[i])::text || '}';
    chain := sha256(chain || convert_to(
               '[' || last_seq || ',' || to_json(p_streams[i])::text || ','
               || to_json(p_types[i])::text || ',' || p_versions[i] || ',' || p_times[i] || ','
               || recorded || ',' || to_json(src)::text || ',' || k || ']' || E'\n'
               || p_payloads[i] || E'\n' || origin_, 'UTF8'));
    ins_seq := ins_seq || last_seq;
    ins_idx := ins_idx || i;
    ins_hash := ins_hash || chain;
    ins_origin := ins_origin || origin_;
    last_key := k;
    prev_hash := p_hashes[i];
    appended := appended + 1;
  END LOOP;
  IF appended = 0 THEN
    RETURN;
  END IF;
  IF sid IS NULL THEN
    SELECT COALESCE(max(id), 0) + 1 INTO sid FROM sources;
    INSERT INTO sources (id, name) VALUES (sid, src);
  END IF;
  SELECT p.next_from INTO next_from FROM advisor_partitioning p;
  IF last_seq >= next_from THEN
    PERFORM advisor_ensure_partitions(last_seq);
  END IF;
  INSERT INTO events (seq, stream, type, schema_version, event_time_us, recorded_time_us,
                      source_id, idem_key, payload, hash, origin)
    SELECT u.s, p_streams[u.ix], p_types[u.ix], p_versions[u.ix], p_times[u.ix], recorded,
           sid, p_keys[u.ix], p_payloads[u.ix], u.hh, u.oo
    FROM unnest(ins_seq, ins_idx, ins_hash, ins_origin) AS u(s, ix, hh, oo);
END $$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(SHIP)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(PREVIOUS)
