"""The central store only the server numbers and checks: docs/fleet.md's shipping roles, one
per host, run as they stand, and every attack the earlier grants allowed tried as such a role.

Before migration 0009 the shared shipping role could INSERT into events (one row with
`seq = max + 1000` broke central `verify` for good), write an event under another host's
source with no origin (it passed `verify`), take another host's next key (its real event was
then dropped as a duplicate, `ship` exiting 0), call `advisor_ensure_partitions(9e18)` (the
server ran out of lock memory), and write the projections and checkpoints."""

from __future__ import annotations

import contextlib
import re
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest
from alembic import command
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from advisor.cli.main import cli
from advisor.core.errors import PrerequisiteError, StoreError
from advisor.fleet.ship import ship
from advisor.store import EventStore, open_store
from advisor.store.chain import GENESIS_HASH, event_hash
from advisor.store.engine import make_engine
from advisor.store.integrity.audit import verify
from advisor.store.integrity.heads import HostKey
from advisor.store.integrity.hostchain import central_head_findings, verify_host
from advisor.store.migrate import _config
from tests.conftest import seed_on_host

DOCS = Path(__file__).parents[2] / "docs" / "fleet.md"
DOCS_ROLE, DOCS_HOST = "advisor_ship_gpu_node_07", "gpu-node-07"
DENIED = r"permission denied|must be owner"


def docs_block() -> str:
    block = re.search(
        r"```sql\n(CREATE ROLE advisor_ship_gpu_node_07.*?)```", DOCS.read_text(), re.S
    )
    assert block is not None, "docs/fleet.md has no shipping-role block"
    return block.group(1)


@contextlib.contextmanager
def shipper_role(
    central: EventStore, pg_url: str, host: str = DOCS_HOST, public_key: bytes | None = None
) -> Iterator[str]:
    """docs/fleet.md's block as it stands, for `host` (its role, host, key and the test's
    schema substituted), run by the owner; yields the role's URL; drops the role after."""
    role = f"advisor_ship_{uuid.uuid4().hex[:8]}"
    schema = re.search(r"search_path%3D(\w+)", pg_url)
    assert schema is not None
    sql = (
        docs_block()
        .replace(DOCS_ROLE, role)
        .replace(f"'{DOCS_HOST}'", f"'{host}'")
        .replace("SCHEMA public", f"SCHEMA {schema.group(1)}")
    )
    if public_key is None:
        sql = sql.replace(", public_key)", ")").replace(
            ", decode('HOST_PUBLIC_KEY_HEX', 'hex'))", ")"
        )
    else:
        sql = sql.replace("HOST_PUBLIC_KEY_HEX", public_key.hex())
    with central.begin() as conn:  # all or nothing: roles are transactional too
        for statement in sql.split(";"):
            lines = [line for line in statement.splitlines() if not line.startswith("--")]
            if "".join(lines).strip():
                conn.execute(text("\n".join(lines)))
    try:
        yield pg_url.replace("postgres@", f"{role}@")
    finally:
        with central.begin() as conn:
            conn.execute(text(f'DROP OWNED BY "{role}"'))
            conn.execute(text(f'DROP ROLE IF EXISTS "{role}"'))


def _count(store: EventStore, sql: str) -> int:
    with store.connect() as conn:
        return int(conn.execute(text(sql)).scalar_one())


def _call_ship(store: EventStore, host: str, rows: list[dict[str, object]]) -> None:
    """advisor_ship called by hand, as an attacker holding the role would."""
    cols = (
        "keys",
        "streams",
        "types",
        "versions",
        "times",
        "recorded",
        "sources",
        "source_keys",
        "payloads",
        "hashes",
    )
    with store.begin() as conn:
        conn.execute(
            text(
                "SELECT advisor_ship(:host, CAST(:keys AS bigint[]), CAST(:streams AS text[]), "
                "CAST(:types AS text[]), CAST(:versions AS integer[]), CAST(:times AS bigint[]), "
                "CAST(:recorded AS bigint[]), CAST(:sources AS text[]), "
                "CAST(:source_keys AS bigint[]), CAST(:payloads AS text[]), "
                "CAST(:hashes AS bytea[]))"
            ),
            {"host": host, **{c: [r[c] for r in rows] for c in cols}},
        )


def _row(
    seq: int,
    prev: bytes,
    payload: str = '{"type":"log.recorded"}',
    stream: str = "h/u.service",
    source: str = "journald",
    key: int = 1,
    claimed: bytes | None = None,
) -> dict[str, object]:
    h = event_hash(prev, seq, stream, "log.recorded", 1, 10, 20, source, key, payload.encode())
    return {
        "keys": seq,
        "streams": stream,
        "types": "log.recorded",
        "versions": 1,
        "times": 10,
        "recorded": 20,
        "sources": source,
        "source_keys": key,
        "payloads": payload,
        "hashes": claimed if claimed is not None else h,
    }


def test_the_docs_roles_ship_their_own_host_and_nothing_else(
    tmp_path: Path, pg_url: str, seed_journal: Path, opener: Callable[[str], EventStore]
) -> None:
    central = opener(pg_url)
    a = seed_on_host(tmp_path, seed_journal, "gpu-node-07")
    b = seed_on_host(tmp_path, seed_journal, "gpu-node-08")
    with (
        shipper_role(central, pg_url, "gpu-node-07") as url_a,
        shipper_role(central, pg_url, "gpu-node-08") as url_b,
    ):
        as_a, as_b = open_store(url_a), open_store(url_b)
        try:
            report = ship(a, as_a, "gpu-node-07", batch=20)
            assert (report.shipped, report.folded) == (86, False)  # the owner folds
            assert _count(central, "SELECT count(*) FROM runs") == 0
            top = _count(central, "SELECT max(seq) FROM events")

            # Nothing of the schema is writable by the role, whatever the statement.
            for statement in (
                f"INSERT INTO events SELECT {top + 1000}, 'x', 'log.recorded', 1, 0, 0, 1, "
                "99999, '{}', '\\x00'::bytea, NULL",
                "INSERT INTO sources VALUES (999, 'ship:gpu-node-08')",
                "SELECT advisor_ensure_partitions(9000000000000000000)",
                "UPDATE events SET payload = '{}'",
                "DELETE FROM events",
                "TRUNCATE events",
                "DROP TABLE events_000000000001",
                "ALTER TABLE events DETACH PARTITION events_000000000001",
                "INSERT INTO runs (run_id) VALUES ('x')",
                "UPDATE runs SET lines = 0",
                "DELETE FROM incidents",
                "UPDATE actions SET status = 'approved'",
                "DELETE FROM gpu_samples",
                "INSERT INTO checkpoints VALUES ('projections', '{\"seq\": 0}', 0)",
                "UPDATE checkpoints SET position = '{}'",
                "UPDATE advisor_shippers SET host = 'gpu-node-08'",
                "INSERT INTO advisor_shippers VALUES ('x', 'gpu-node-09', NULL)",
                "INSERT INTO advisor_host_heads SELECT 'gpu-node-07', 1, '\\x00'::bytea, 0, "
                "'\\x00'::bytea, '\\x00'::bytea, '', 0",
                "UPDATE advisor_partitioning SET block = 1",
            ):
                started = time.monotonic()
                with pytest.raises(Exception, match=DENIED), as_a.begin() as conn:
                    conn.execute(text(statement))
                assert time.monotonic() - started < 5, statement

            # Through the function, only for its own host, only what extends its chain.
            with pytest.raises(Exception, match="ships for host gpu-node-07, not gpu-node-08"):
                _call_ship(as_a, "gpu-node-08", [_row(1, GENESIS_HASH)])
            last = list(a.read_raw())[-1]
            forged = _row(87, last.hash, payload='{"type":"log.recorded","message":"x"}')
            with pytest.raises(Exception, match="seq 87 does not extend"):  # wrong hash
                _call_ship(as_a, "gpu-node-07", [{**forged, "hashes": bytes(32)}])
            with pytest.raises(Exception, match="seq 90 does not follow its last shipped seq 86"):
                _call_ship(as_a, "gpu-node-07", [_row(90, last.hash)])
            with pytest.raises(Exception, match="seq 86 is in the central store with another"):
                _call_ship(as_a, "gpu-node-07", [{**_row(86, GENESIS_HASH), "hashes": bytes(32)}])

            # gpu-node-08 ships all of its own events: none was taken by another host.
            other = ship(b, as_b, "gpu-node-08", batch=30)
            assert (other.shipped, other.duplicates) == (86, 0)
        finally:
            as_a.close()
            as_b.close()
        result = CliRunner().invoke(cli, ["fold", "--db", pg_url])  # the owner's fold
        assert result.exit_code == 0 and result.output.startswith("folded "), result.output
        assert _count(central, "SELECT count(*) FROM runs") > 0
        assert verify(central).ok
        for host in ("gpu-node-07", "gpu-node-08"):
            report_h = verify_host(central, f"ship:{host}")
            assert (report_h.ok, report_h.checked, report_h.unchecked) == (True, 86, 0)
    a.close()
    b.close()


def test_a_role_that_is_not_bound_to_a_host_cannot_ship(
    tmp_path: Path, pg_url: str, seed_journal: Path, opener: Callable[[str], EventStore]
) -> None:
    central = opener(pg_url)
    host = seed_on_host(tmp_path, seed_journal, "gpu-node-07")
    with shipper_role(central, pg_url, "gpu-node-07") as url:
        role = url.split("//")[1].split("@")[0]
        with central.begin() as conn:
            conn.execute(text("DELETE FROM advisor_shippers WHERE role = :r"), {"r": role})
        as_role = open_store(url)
        try:
            with pytest.raises(StoreError, match="is not bound to a host"):
                ship(host, as_role, "gpu-node-07")
        finally:
            as_role.close()
    assert _count(central, "SELECT count(*) FROM events") == 0
    host.close()


def test_ensure_partitions_is_bounded(pg_url: str, opener: Callable[[str], EventStore]) -> None:
    """Even for the owner: a call past the last stored seq, or one that would make more
    partitions than a transaction can lock, is refused at once."""
    central = opener(pg_url)
    started = time.monotonic()
    with pytest.raises(Exception, match="more than 1,000,000 seqs past"), central.begin() as conn:
        conn.execute(text("SELECT advisor_ensure_partitions(9000000000000000000)"))
    with central.begin() as conn:
        conn.execute(text("UPDATE advisor_partitioning SET block = 1"))
    with pytest.raises(Exception, match="more than 64 partitions"), central.begin() as conn:
        conn.execute(text("SELECT advisor_ensure_partitions(100)"))
    assert time.monotonic() - started < 5
    with central.begin() as conn:
        assert conn.execute(text("SELECT advisor_ensure_partitions(3)")).scalar_one() == 4
    assert (
        _count(central, "SELECT count(*) FROM pg_inherits WHERE inhparent = 'events'::regclass")
        == 3
    )


OLD_GRANTS = """
GRANT USAGE ON SCHEMA {schema} TO {role};
GRANT SELECT, INSERT ON events, sources TO {role};
GRANT SELECT ON alembic_version TO {role};
REVOKE EXECUTE ON FUNCTION advisor_ensure_partitions(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION advisor_ensure_partitions(bigint) TO {role};
GRANT SELECT, INSERT, UPDATE, DELETE ON runs, incidents, gpu_samples, actions, checkpoints
    TO {role}"""


def test_the_upgrade_takes_the_earlier_grants_away(pg_url: str) -> None:
    """A central store set up by the earlier docs/fleet.md: after migration 0009 its shared
    shipping role can no longer write anything."""
    engine = make_engine(pg_url)
    config = _config()
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0008")
    role = f"old_ship_{uuid.uuid4().hex[:8]}"
    schema = re.search(r"search_path%3D(\w+)", pg_url)
    assert schema is not None
    with engine.begin() as conn:
        conn.execute(text(f"CREATE ROLE {role} LOGIN"))
        for statement in OLD_GRANTS.format(schema=schema.group(1), role=role).split(";"):
            conn.execute(text(statement))
    engine.dispose()
    store = open_store(pg_url)  # upgrades to the head
    old = make_engine(pg_url.replace("postgres@", f"{role}@"))
    try:
        for statement in (
            "INSERT INTO events SELECT 1000, 'x', 'log.recorded', 1, 0, 0, 1, "
            "1, '{}', '\\x00'::bytea, NULL",
            "INSERT INTO sources VALUES (1, 'ship:x')",
            "SELECT advisor_ensure_partitions(10)",
            "DELETE FROM runs",
            "UPDATE checkpoints SET position = '{}'",
        ):
            with pytest.raises(Exception, match=DENIED), old.begin() as conn:
                conn.execute(text(statement))
        with old.connect() as conn:  # still a reader
            assert conn.execute(text("SELECT count(*) FROM events")).scalar_one() == 0
    finally:
        old.dispose()
        with store.begin() as conn:
            conn.execute(text(f'DROP OWNED BY "{role}"'))
            conn.execute(text(f'DROP ROLE "{role}"'))
        store.close()


HOSTILE = st.text(
    st.characters(exclude_characters="\x00", exclude_categories=("Cs",)), max_size=40
) | st.sampled_from(
    [
        '"',
        "\\",
        '\\"',
        "\u2028\u2029",
        "\x1b[31m",
        "\x7f",
        "é😀\ufeff",
        "\t\n\r\b\f\x01",
        "</script>",
        "'; DROP TABLE events; --",
    ]
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(stream=HOSTILE, source=HOSTILE, message=HOSTILE)
def test_the_server_hashes_hostile_strings_as_the_host_does(
    pg_url: str, opener: Callable[[str], EventStore], stream: str, source: str, message: str
) -> None:
    """advisor_ship recomputes the host hash from JSON it builds itself: for any text its
    bytes must be orjson's, or an honest host's events would be refused."""
    central = opener(pg_url)
    with central.connect() as conn:
        for value in (stream, source, message):
            server = conn.execute(
                text("SELECT convert_to(to_json(CAST(:s AS text))::text, 'UTF8')"), {"s": value}
            ).scalar_one()
            assert bytes(server) == orjson.dumps(value)
    host = f"h-{uuid.uuid4().hex[:8]}"
    payload = orjson.dumps({"type": "log.recorded", "message": message}).decode()
    first = _row(1, GENESIS_HASH, payload=payload, stream=stream, source=source, key=7)
    _call_ship(central, host, [first])  # as the owner: refused if the hashes disagreed
    second = _row(
        2,
        first["hashes"],
        payload=payload,
        stream=stream,
        source=source,  # type: ignore[arg-type]
        key=8,
    )
    _call_ship(central, host, [second])
    report = verify_host(central, f"ship:{host}")
    assert (report.ok, report.checked) == (True, 2)


def test_signed_heads_are_stored_with_the_registered_key_and_checked(
    tmp_path: Path, pg_url: str, seed_journal: Path, opener: Callable[[str], EventStore]
) -> None:
    central = opener(pg_url)
    key, other = HostKey.generate(), HostKey.generate()
    host = seed_on_host(tmp_path, seed_journal, "gpu-node-07")
    with shipper_role(central, pg_url, "gpu-node-07", public_key=key.public_key) as url:
        as_role = open_store(url)
        try:
            report = ship(host, as_role, "gpu-node-07", batch=30, key=key, store_label="s")
            assert (report.shipped, report.heads) == (86, 3)
            findings = central_head_findings(central)["gpu-node-07"]
            assert [f.ok for f in findings] == [True], findings
            host.append_prepared(
                [
                    (e.stream, e.type, e.version, e.time_us, "again", e.seq, e.payload.encode())
                    for e in list(host.read_raw())[:5]
                ]
            )
            before = _count(central, "SELECT count(*) FROM events")
            with pytest.raises(PrerequisiteError, match="has another key registered for host"):
                ship(host, as_role, "gpu-node-07", key=other)  # refused before shipping
            assert _count(central, "SELECT count(*) FROM events") == before
        finally:
            as_role.close()
    # The central copy rewritten at a head's seq (the owner, triggers off): the head says so.
    with central.begin() as conn:
        conn.execute(text("ALTER TABLE events DISABLE TRIGGER events_append_only"))
        conn.execute(
            text(
                "UPDATE events SET origin = regexp_replace(origin, "
                "'\"hash\":\"[0-9a-f]+\"', '\"hash\":\"' || repeat('0', 64) || '\"') "
                "WHERE idem_key = 60"
            )
        )
        conn.execute(text("ALTER TABLE events ENABLE TRIGGER events_append_only"))
    findings = central_head_findings(central)["gpu-node-07"]
    assert [(f.ok, f.seq) for f in findings] == [(False, 60)], findings
    host.close()


def test_a_role_without_a_registered_key_is_refused_before_shipping(
    tmp_path: Path, pg_url: str, seed_journal: Path, opener: Callable[[str], EventStore]
) -> None:
    """A NULL key in the binding: ship asks first, ships nothing, and names the statement to
    run — which, run as the owner, lets the next ship through with its heads. (Before, the
    events went and then the first head was refused: `no public key is registered`, exit 1.)"""
    central = opener(pg_url)
    host = seed_on_host(tmp_path, seed_journal, "gpu-node-07")
    key = HostKey.generate()
    with shipper_role(central, pg_url, "gpu-node-07") as url:
        as_role = open_store(url)
        try:
            with pytest.raises(PrerequisiteError) as refused:
                ship(host, as_role, "gpu-node-07", key=key, key_path="/k/store.key")
            message = str(refused.value)
            assert "no public key registered for host gpu-node-07" in message
            assert "this store's key /k/store.key" in message and "nothing shipped" in message
            assert _count(central, "SELECT count(*) FROM events") == 0
            assert ship(host, as_role, "gpu-node-07").shipped == 86  # no key: no heads, no check
            statement = message.split("As the central store's owner run: ")[1].split(" (or")[0]
            assert statement == (
                f"UPDATE advisor_shippers SET public_key = decode('{key.public_key.hex()}', "
                "'hex') WHERE host = 'gpu-node-07';"
            )
            with central.begin() as conn:
                conn.execute(text(statement))
            host.append_prepared(
                [
                    (e.stream, e.type, e.version, e.time_us, "again", e.seq, e.payload.encode())
                    for e in list(host.read_raw())[:5]
                ]
            )
            report = ship(host, as_role, "gpu-node-07", key=key)
            assert (report.shipped, report.heads) == (5, 1)
        finally:
            as_role.close()
    assert verify_host(central, "ship:gpu-node-07").checked == 91
    host.close()


def test_ship_refuses_up_front_from_the_command_line(
    tmp_path: Path, pg_url: str, seed_journal: Path, opener: Callable[[str], EventStore]
) -> None:
    """`advisor ship` from a SQLite host store whose key the central binding does not have:
    one line saying what to run, exit 2, nothing shipped."""
    central = opener(pg_url)
    host = seed_on_host(tmp_path, seed_journal, "gpu-node-07")
    host.close()
    key, registered = HostKey.generate(), HostKey.generate()
    (tmp_path / "store-key").write_bytes(key.to_pem())
    with shipper_role(central, pg_url, "gpu-node-07", public_key=registered.public_key) as url:
        args = ["ship", "--to", url, "--host", "gpu-node-07", "--db", host.url]
        args += ["--key", str(tmp_path / "store-key")]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2, result.output
        assert result.stdout == ""
        (line,) = result.stderr.splitlines()
        assert line.startswith("Error: the central store ") and "has another key" in line
        assert f"decode('{key.public_key.hex()}', 'hex') WHERE host = 'gpu-node-07';" in line
        assert _count(central, "SELECT count(*) FROM events") == 0


def test_ship_key_signs_heads_into_the_central_store(
    tmp_path: Path, pg_url: str, seed_journal: Path, opener: Callable[[str], EventStore]
) -> None:
    """`advisor ship --key PATH` (the owner here: no registration needed for it)."""
    central = opener(pg_url)
    host = seed_on_host(tmp_path, seed_journal, "gpu-node-07")
    host.close()
    key = HostKey.generate()
    (tmp_path / "host-key").write_bytes(key.to_pem())
    result = CliRunner().invoke(
        cli,
        [
            "ship",
            "--to",
            pg_url,
            "--host",
            "gpu-node-07",
            "--key",
            str(tmp_path / "host-key"),
            "--db",
            host.url,
        ],
    )
    assert result.exit_code == 0, result.output
    assert "; 1 signed heads stored" in result.stdout
    with central.connect() as conn:
        stored = conn.execute(text("SELECT seq, public_key, store FROM advisor_host_heads")).one()
    assert (stored[0], bytes(stored[1])) == (86, key.public_key) and stored[2].endswith(".db")
    assert [f.ok for f in central_head_findings(central)["gpu-node-07"]] == [True]


def test_verify_heads_on_the_central_store_checks_every_hosts_shipped_heads(
    tmp_path: Path, pg_url: str, seed_journal: Path, opener: Callable[[str], EventStore]
) -> None:
    central = opener(pg_url)
    host = seed_on_host(tmp_path, seed_journal, "gpu-node-07")
    key = HostKey.generate()
    ship(host, central, "gpu-node-07", batch=40, key=key, store_label="s")
    host.close()
    args = [
        "verify",
        "--heads",
        "--key",
        str(tmp_path / "no-key-here"),
        "--heads-file",
        str(tmp_path / "no-heads"),
        "--db",
        pg_url,
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "host gpu-node-07: 3 signed heads match the chain" in result.stdout
    with central.begin() as conn:  # the owner rewrites a shipped origin, triggers off
        conn.execute(text("ALTER TABLE events DISABLE TRIGGER events_append_only"))
        conn.execute(
            text(
                "UPDATE events SET origin = regexp_replace(origin, "
                "'\"hash\":\"[0-9a-f]+\"', '\"hash\":\"' || repeat('0', 64) || '\"') "
                "WHERE idem_key = 40"
            )
        )
        conn.execute(text("ALTER TABLE events ENABLE TRIGGER events_append_only"))
    result = CliRunner().invoke(cli, [*args[:-2], "--json", "--db", pg_url])
    assert result.exit_code == 3
    found = orjson.loads(result.stdout)["host_heads"]["gpu-node-07"]
    assert [(f["ok"], f["seq"]) for f in found] == [(False, 40)]
