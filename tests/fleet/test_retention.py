"""Retention on the central PostgreSQL store: old partitions of events exported to Parquet,
recorded as a store.retained event, detached; the chains still verify from their anchors,
and the migration that partitions a store keeps what it already held."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from alembic import command
from click.testing import CliRunner
from sqlalchemy import text

from advisor.cli.main import cli
from advisor.core.events import validate_batch
from advisor.fleet.retention import partitions
from advisor.fleet.ship import checkpoint_name, ship
from advisor.store import Checkpoint, EventStore, open_store
from advisor.store.engine import make_engine
from advisor.store.integrity.audit import verify
from advisor.store.integrity.hostchain import verify_host
from advisor.store.migrate import _config
from tests.conftest import seed_on_host


def _count(store: EventStore, sql: str) -> int:
    with store.connect() as conn:
        return int(conn.execute(text(sql)).scalar_one())


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_old_partitions_are_exported_recorded_and_detached(
    tmp_path: Path, pg_url: str, seed_journal: Path, opener: Callable[[str], EventStore]
) -> None:
    central = opener(pg_url)
    with central.begin() as conn:  # a fresh store may choose its block size
        conn.execute(text("UPDATE advisor_partitioning SET block = 40"))
    first, second = (
        seed_on_host(tmp_path, seed_journal, "gpu-node-07"),
        seed_on_host(tmp_path, seed_journal, "gpu-node-08"),
    )
    try:
        ship(first, central, "gpu-node-07", batch=30)
        cutoff_us = time.time_ns() // 1000
        time.sleep(0.01)
        ship(second, central, "gpu-node-08", batch=30)
        shipped = _count(central, "SELECT count(*) FROM events")
        assert shipped == 2 * 86
        assert [(p.name, p.below, p.events) for p in partitions(central)] == [
            (f"events_{lo:012d}", lo + 40, min(40, shipped - lo + 1))
            for lo in range(1, shipped + 1, 40)
        ]

        out = tmp_path / "archive"
        code, printed = _invoke(
            "retention",
            "--before",
            f"@{cutoff_us / 1e6:.6f}",
            "--to",
            str(out),
            "--dry-run",
            "--db",
            pg_url,
        )
        assert code == 0 and printed.count("would retain") == 2
        assert _count(central, "SELECT count(*) FROM events") == shipped  # a dry run

        code, printed = _invoke(
            "retention",
            "--before",
            f"@{cutoff_us / 1e6:.6f}",
            "--to",
            str(out),
            "--json",
            "--db",
            pg_url,
        )
        assert code == 0, printed
        retained = json.loads(printed)
        # 1-80 were all recorded before the cutoff; 81-120 mixes both hosts' ships.
        assert [(r["first_seq"], r["last_seq"], r["events"]) for r in retained] == [
            (1, 40, 40),
            (41, 80, 40),
        ]
        assert partitions(central)[0].name == "events_000000000081"
        assert _count(central, "SELECT count(*) FROM events") == shipped - 80 + 2
        assert _count(central, "SELECT count(*) FROM events_000000000001") == 40  # detached

        # The archive answers like the store did for those events.
        code, printed = _invoke(
            "query",
            "--parquet",
            str(out),
            "--json",
            "SELECT min(seq) AS lo, max(seq) AS hi, count(*) AS n, "
            "count(DISTINCT host) AS hosts FROM events",
        )
        assert json.loads(printed) == [{"lo": 1, "hi": 80, "n": 80, "hosts": 1}]

        # Both chains resume at their anchors: the store's at 80, gpu-node-07's at its 80.
        report = verify(central)
        assert report.ok and report.checked == shipped - 80 + 2
        hosts = {h: verify_host(central, f"ship:{h}") for h in ("gpu-node-07", "gpu-node-08")}
        assert {h: (r.ok, r.checked, r.last_seq) for h, r in hosts.items()} == {
            "gpu-node-07": (True, 6, 86),
            "gpu-node-08": (True, 86, 86),
        }
        code, printed = _invoke("verify", "--json", "--db", pg_url)
        assert code == 0 and json.loads(printed)["ok"]

        # A host that lost its position sends nothing again: it resumes where the central
        # store stands (checked against its anchor where the events there were retained).
        first.append([], Checkpoint(checkpoint_name(central.url), {"seq": 0}))
        again = ship(first, central, "gpu-node-07")
        assert (again.shipped, again.duplicates, again.central_seq) == (0, 0, 86)
        # Nothing more is old enough; appending goes on into new partitions.
        code, printed = _invoke(
            "retention", "--before", f"@{cutoff_us / 1e6:.6f}", "--to", str(out), "--db", pg_url
        )
        assert code == 0 and printed.startswith("nothing to retain")
        third = seed_on_host(tmp_path, seed_journal, "gpu-node-09")
        ship(third, central, "gpu-node-09")
        third.close()
        assert verify(central).ok and verify_host(central, "ship:gpu-node-09").ok
    finally:
        first.close()
        second.close()


def test_the_retained_partition_cannot_be_changed_through_the_store(
    pg_url: str, opener: Callable[[str], EventStore]
) -> None:
    """The partitions keep the append-only guard: row triggers reach them through the
    partitioned table, and TRUNCATE is refused on each partition too."""
    store = opener(pg_url)
    store.append(
        validate_batch(
            [
                {
                    "stream": "h/u.service",
                    "time_us": i,
                    "source": "t",
                    "key": i,
                    "payload": {"type": "log.recorded", "origin": "text", "message": "x"},
                }
                for i in range(3)
            ]
        )
    )
    for statement in (
        "UPDATE events SET payload = '{}'",
        "DELETE FROM events",
        "TRUNCATE events",
        "TRUNCATE events_000000000001",
        "UPDATE events_000000000001 SET payload = '{}'",
    ):
        with pytest.raises(Exception, match="append-only"), store.begin() as conn:
            conn.execute(text(statement))
    assert _count(store, "SELECT count(*) FROM events") == 3


def test_partitioning_an_existing_store_keeps_its_events_and_chain(
    pg_url: str, opener: Callable[[str], EventStore]
) -> None:
    """A store written before migration 0006 keeps its events as the first partition."""
    engine = make_engine(pg_url)
    config = _config()
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0005")
    engine.dispose()
    old = open_store(pg_url, upgrade=False)
    old._partitioned_below = 1 << 62  # written as before 0006: no partitions to make
    old.append(
        validate_batch(
            [
                {
                    "stream": "h/u.service",
                    "time_us": i,
                    "source": "t",
                    "key": i,
                    "payload": {"type": "log.recorded", "origin": "text", "message": f"line {i}"},
                }
                for i in range(25)
            ]
        )
    )
    old.close()

    store = opener(pg_url)  # upgrades to the head
    assert [(p.name, p.below, p.events) for p in partitions(store)] == [("events_legacy", 26, 25)]
    store.append(
        validate_batch(
            [
                {
                    "stream": "h/u.service",
                    "time_us": i,
                    "source": "t",
                    "key": i,
                    "payload": {"type": "log.recorded", "origin": "text", "message": f"line {i}"},
                }
                for i in range(20, 40)
            ]
        )
    )  # 20-24 are there already
    assert [(p.name, p.events) for p in partitions(store)] == [
        ("events_legacy", 25),
        ("events_000000000026", 15),
    ]
    report = verify(store)
    assert report.ok and report.checked == 40


def test_retention_refuses_a_sqlite_store(sqlite_url: str, tmp_path: Path) -> None:
    code, printed = _invoke(
        "retention", "--before", "-90d", "--to", str(tmp_path / "out"), "--db", sqlite_url
    )
    assert code != 0 and "central PostgreSQL store" in printed
    assert not (tmp_path / "out").exists()


def test_the_shipping_role_of_the_docs_appends_and_can_change_nothing(
    tmp_path: Path, pg_url: str, seed_journal: Path, opener: Callable[[str], EventStore]
) -> None:
    """docs/fleet.md's role, run as it stands: it ships (the owner's function numbers the
    events and makes the partitions) and is refused every change to events."""
    from tests.fleet.test_central_roles import shipper_role

    central = opener(pg_url)  # created by the owner
    with central.begin() as conn:
        conn.execute(text("UPDATE advisor_partitioning SET block = 50"))
    host = seed_on_host(tmp_path, seed_journal, "gpu-node-07")
    with shipper_role(central, pg_url, "gpu-node-07") as as_role:
        shipper = open_store(as_role)
        try:
            report = ship(host, shipper, "gpu-node-07", batch=20)
            assert report.shipped == 86
            assert len(partitions(central)) == 2  # made by the function, owned by the owner
            for statement in (
                "UPDATE events SET payload = '{}'",
                "DELETE FROM events",
                "TRUNCATE events",
                "DROP TABLE events_000000000001",
                "ALTER TABLE events DETACH PARTITION events_000000000001",
            ):
                with (
                    pytest.raises(Exception, match=r"permission denied|must be owner"),
                    shipper.begin() as conn,
                ):
                    conn.execute(text(statement))
        finally:
            shipper.close()
            host.close()
    assert verify(central).ok and verify_host(central, "ship:gpu-node-07").checked == 86
