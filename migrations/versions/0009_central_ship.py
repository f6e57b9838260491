"""PostgreSQL: a central store that only the server numbers and checks

Shippers no longer write the central schema. Each shipping role is bound to one host in
`advisor_shippers` (managed by the owner) and appends through `advisor_ship(...)`, a
SECURITY DEFINER function of the owner that

- takes the host from the calling role's binding (`session_user`), never from the caller
  (an unbound caller must already be able to INSERT into events: the owner's own path);
- takes the appender's advisory lock, so central seqs stay linear with every other writer;
- recomputes each event's host hash, sha256(previous host hash + the host envelope as JSON
  + payload), exactly as `advisor.store.store.event_hash` does (PostgreSQL's `to_json(text)`
  writes strings byte for byte as orjson does), and refuses an event that does not extend
  the host's last shipped hash or does not follow its last shipped seq;
- takes an event already there (same host seq) as a duplicate only if its hash is the one
  stored; another hash under an existing host seq is refused, naming the host seq;
- assigns the central seq, the recorded time, the origin and the central hash itself, and
  creates the partitions those seqs need (never more).

`advisor_ship_head(...)` stores a host's signed chain head in `advisor_host_heads`
(append-only), refused unless it is made with the public key registered for the host and
names a shipped event with that hash. `advisor_ensure_partitions` is bounded (at most
1,000,000 seqs past the last stored one, 64 partitions a call) and no longer executable by
anyone but the owner; roles that held EXECUTE on it (the shipping roles of the earlier
docs/fleet.md) lose it and every write privilege on this schema's tables. Refusals raise
SQLSTATE AD001 (the chain: an integrity error) or 42501 (the role: a privilege error).

SQLite stores (the hosts') are not changed.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

APPEND_LOCK_ID = 0x616476_617070  # advisor.store.store.APPEND_LOCK_ID
MAX_BATCH = 100_000  # events in one advisor_ship call
PARTITION_AHEAD = 1_000_000  # seqs advisor_ensure_partitions may create past the last
PARTITIONS_PER_CALL = 64  # each CREATE TABLE holds locks until the commit

SHIP_SIGNATURE = (
    "text, bigint[], text[], text[], integer[], bigint[], bigint[], text[], "
    "bigint[], text[], bytea[]"
)
HEAD_SIGNATURE = "text, bigint, bytea, bigint, bytea, bytea, text"

TABLES = """
CREATE TABLE advisor_shippers (
    role name PRIMARY KEY,
    host text NOT NULL UNIQUE CHECK (host <> ''),
    public_key bytea CHECK (public_key IS NULL OR length(public_key) = 32)
);
CREATE TABLE advisor_host_heads (
    host text NOT NULL,
    seq bigint NOT NULL,
    hash bytea NOT NULL,
    time_us bigint NOT NULL,
    public_key bytea NOT NULL,
    signature bytea NOT NULL,
    store text NOT NULL,  -- the host's name for its store, signed with the rest
    received_us bigint NOT NULL,
    PRIMARY KEY (host, seq)
);
CREATE TRIGGER advisor_host_heads_append_only BEFORE UPDATE OR DELETE ON advisor_host_heads
    FOR EACH ROW EXECUTE FUNCTION advisor_refuse_change();
CREATE TRIGGER advisor_host_heads_no_truncate BEFORE TRUNCATE ON advisor_host_heads
    FOR EACH STATEMENT EXECUTE FUNCTION advisor_refuse_change();
"""

ENSURE_PARTITIONS = f"""
CREATE OR REPLACE FUNCTION advisor_ensure_partitions(last_seq bigint)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
  lo bigint;
  size bigint;
  top bigint;
  name text;
BEGIN
  SELECT next_from, block INTO lo, size FROM advisor_partitioning FOR UPDATE;
  SELECT GREATEST(COALESCE(max(seq), 0), lo - 1) INTO top FROM events;
  IF last_seq > top + {PARTITION_AHEAD} THEN
    RAISE EXCEPTION 'advisor_ensure_partitions(%): more than {PARTITION_AHEAD:,} seqs past '
                    'the last stored one (%)', last_seq, top
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF lo <= last_seq AND (last_seq - lo) / size >= {PARTITIONS_PER_CALL} THEN
    RAISE EXCEPTION 'advisor_ensure_partitions(%): more than {PARTITIONS_PER_CALL} partitions '
                    'of % seqs in one call', last_seq, size
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  WHILE lo <= last_seq LOOP
    name := format('events_%s', lpad(lo::text, 12, '0'));
    EXECUTE format('CREATE TABLE %I PARTITION OF events FOR VALUES FROM (%s) TO (%s)',
                   name, lo, lo + size);
    EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON %I FOR EACH STATEMENT '
                   'EXECUTE FUNCTION advisor_refuse_change()', name || '_no_truncate', name);
    lo := lo + size;
  END LOOP;
  UPDATE advisor_partitioning SET next_from = lo;
  RETURN lo;
END $$
"""

# The host the calling role ships for: its binding; an unbound caller that may INSERT into
# events itself (the owner) names the host.
SHIP_HOST = """
CREATE FUNCTION advisor_ship_host(p_host text) RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
  bound text;
BEGIN
  SELECT host INTO bound FROM advisor_shippers WHERE role = session_user;
  IF bound IS NOT NULL THEN
    IF p_host IS DISTINCT FROM bound THEN
      RAISE EXCEPTION 'role % ships for host %, not %', session_user, bound, p_host
        USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN bound;
  END IF;
  IF NOT has_table_privilege(session_user, 'events', 'INSERT') THEN
    RAISE EXCEPTION 'role % is not bound to a host in advisor_shippers: it cannot ship',
                    session_user USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF p_host IS NULL OR p_host = '' THEN
    RAISE EXCEPTION 'no host named' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  RETURN p_host;
END $$
"""

# The JSON array the chain hashes: orjson.dumps([seq, stream, type, version, time_us,
# recorded_us, source, key]); to_json(text) escapes exactly as orjson does.
SHIP = f"""
CREATE FUNCTION advisor_ship(
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
  ins_seq bigint[] := '{{}}';
  ins_idx integer[] := '{{}}';
  ins_hash bytea[] := '{{}}';
  ins_origin text[] := '{{}}';
BEGIN
  IF current_setting('server_encoding') <> 'UTF8' THEN
    RAISE EXCEPTION 'the central store must be a UTF8 database, not %',
                    current_setting('server_encoding');
  END IF;
  IF n > {MAX_BATCH} THEN
    RAISE EXCEPTION 'at most {MAX_BATCH:,} events a call, not %', n
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
  PERFORM pg_advisory_xact_lock({APPEND_LOCK_ID});
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
             || to_json(p_sources[i])::text || ',' || p_source_keys[i] || ']' || E'\\n'
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
    origin_ := '{{"hash":"' || encode(p_hashes[i], 'hex') || '","key":' || p_source_keys[i]
               || ',"recorded_us":' || p_recorded[i] || ',"source":'
               || to_json(p_sources[i])::text || '}}';
    chain := sha256(chain || convert_to(
               '[' || last_seq || ',' || to_json(p_streams[i])::text || ','
               || to_json(p_types[i])::text || ',' || p_versions[i] || ',' || p_times[i] || ','
               || recorded || ',' || to_json(src)::text || ',' || k || ']' || E'\\n'
               || p_payloads[i] || E'\\n' || origin_, 'UTF8'));
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

SHIP_HEAD = """
CREATE FUNCTION advisor_ship_head(p_host text, p_seq bigint, p_hash bytea, p_time_us bigint,
                                  p_public_key bytea, p_signature bytea, p_store text)
RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
  host_ text := advisor_ship_host(p_host);
  bound boolean;
  registered bytea;
  stored text;
BEGIN
  IF length(p_hash) IS DISTINCT FROM 32 OR length(p_public_key) IS DISTINCT FROM 32
     OR length(p_signature) IS DISTINCT FROM 64 OR p_seq IS NULL OR p_time_us IS NULL
     OR p_store IS NULL THEN
    RAISE EXCEPTION 'a signed head has a 32-byte hash and key and a 64-byte signature'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  bound := EXISTS (SELECT 1 FROM advisor_shippers WHERE role = session_user);
  SELECT public_key INTO registered FROM advisor_shippers WHERE host = host_;
  IF registered IS NULL AND bound THEN
    RAISE EXCEPTION 'no public key is registered for host % (advisor_shippers.public_key): '
                    'its signed heads are refused', host_ USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF registered IS NOT NULL AND registered <> p_public_key THEN
    RAISE EXCEPTION 'the head of host % is signed with another key than the one registered '
                    'for it', host_ USING ERRCODE = 'insufficient_privilege';
  END IF;
  SELECT e.origin INTO stored FROM events e JOIN sources s ON s.id = e.source_id
    WHERE s.name = 'ship:' || host_ AND e.idem_key = p_seq LIMIT 1;
  IF stored IS NULL OR decode(stored::jsonb ->> 'hash', 'hex') <> p_hash THEN
    RAISE EXCEPTION 'a head of host % names seq %, which the central store does not hold with '
                    'that hash', host_, p_seq
      USING ERRCODE = 'AD001', DETAIL = p_seq::text;
  END IF;
  INSERT INTO advisor_host_heads VALUES (host_, p_seq, p_hash, p_time_us, p_public_key,
      p_signature, p_store, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint)
    ON CONFLICT (host, seq) DO NOTHING;
  RETURN FOUND;
END $$
"""

# The roles the earlier docs/fleet.md made shippers held EXECUTE on advisor_ensure_partitions
# (nothing else needed it): they lose it, and every write on this schema's tables.
REVOKE_OLD_SHIPPERS = """
DO $$
DECLARE
  r record;
  t record;
BEGIN
  FOR r IN SELECT DISTINCT g.rolname FROM pg_proc p
             CROSS JOIN LATERAL aclexplode(p.proacl) a
             JOIN pg_roles g ON g.oid = a.grantee
           WHERE p.oid = 'advisor_ensure_partitions(bigint)'::regprocedure
             AND a.grantee <> p.proowner LOOP
    FOR t IN SELECT c.relname FROM pg_class c
               WHERE c.relnamespace = current_schema()::regnamespace
                 AND c.relkind IN ('r', 'p') LOOP
      EXECUTE format('REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON %I FROM %I',
                     t.relname, r.rolname);
    END LOOP;
    EXECUTE format('REVOKE ALL ON FUNCTION advisor_ensure_partitions(bigint) FROM %I',
                   r.rolname);
  END LOOP;
END $$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(TABLES)
    op.execute(REVOKE_OLD_SHIPPERS)
    op.execute(ENSURE_PARTITIONS)
    op.execute("REVOKE ALL ON FUNCTION advisor_ensure_partitions(bigint) FROM PUBLIC")
    op.execute(SHIP_HOST)
    op.execute(SHIP)
    op.execute(SHIP_HEAD)
    op.execute("REVOKE ALL ON FUNCTION advisor_ship_host(text) FROM PUBLIC")
    op.execute(f"REVOKE ALL ON FUNCTION advisor_ship({SHIP_SIGNATURE}) FROM PUBLIC")
    op.execute(f"REVOKE ALL ON FUNCTION advisor_ship_head({HEAD_SIGNATURE}) FROM PUBLIC")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(f"DROP FUNCTION advisor_ship_head({HEAD_SIGNATURE})")
    op.execute(f"DROP FUNCTION advisor_ship({SHIP_SIGNATURE})")
    op.execute("DROP FUNCTION advisor_ship_host(text)")
    op.execute("DROP TABLE advisor_host_heads")
    op.execute("DROP TABLE advisor_shippers")
