"""Ship checks what the central store holds instead of trusting its own bookmark, gives up on
a server that never answers, and under `watch --ship-to` never stops silently.

Before: a central store restored from an older backup was never refilled ("shipped 0", its
`verify` passing with the events missing); local history rewritten after shipping went
unnoticed ("already there", exit 0: duplicates were matched by key, not hash); `ship
--give-up-after 5` hung forever on a server that accepts TCP and never answers; and the
`watch --ship-to` thread died silently on anything but a StoreError."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import text

import advisor.fleet.ship
from advisor.cli.main import cli
from advisor.core.errors import IntegrityError
from advisor.fleet.ship import ShipReport, ship, ship_forever
from advisor.pipeline.sdnotify import Notifier
from advisor.store import EventStore
from advisor.store.chain import GENESIS_HASH, event_hash
from advisor.store.integrity.audit import verify
from advisor.store.integrity.central import DirectWriter, Position
from advisor.store.integrity.hostchain import verify_host
from tests.conftest import advisor_argv, run_advisor, seed_on_host
from tests.journal_fixtures import Entry, have_journal_tools, make_journal

HOST = "gpu-node-07"


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def _without_guards(store: EventStore, statements: list[tuple[str, dict[str, object]]]) -> None:
    """What someone with raw database access could do behind the append-only guards."""
    with store.begin() as conn:
        if store.dialect == "sqlite":
            triggers = conn.execute(
                text(
                    "SELECT name, sql FROM sqlite_master WHERE "
                    "type = 'trigger' AND tbl_name = 'events'"
                )
            ).all()
            for name, _ in triggers:
                conn.execute(text(f'DROP TRIGGER "{name}"'))
        else:
            conn.execute(text("ALTER TABLE events DISABLE TRIGGER USER"))
        for statement, params in statements:
            conn.execute(text(statement), params)
        if store.dialect == "sqlite":
            for _, sql in triggers:
                conn.execute(text(sql))
        else:
            conn.execute(text("ALTER TABLE events ENABLE TRIGGER USER"))


def _count(store: EventStore) -> int:
    with store.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM events")).scalar_one())


def _rewrite_and_rechain(store: EventStore, from_seq: int) -> None:
    """Alter event `from_seq` and re-chain every event after it: the store still verifies."""
    events = list(store.read_raw())
    prev = events[from_seq - 2].hash if from_seq > 1 else GENESIS_HASH
    changes: list[tuple[str, dict[str, object]]] = []
    for e in events[from_seq - 1 :]:
        payload = (
            e.payload.replace('"message":"', '"message":"(edited) ', 1)
            if e.seq == from_seq
            else e.payload
        )
        h = event_hash(
            prev,
            e.seq,
            e.stream,
            e.type,
            e.version,
            e.time_us,
            e.recorded_us,
            e.source,
            e.key,
            payload.encode(),
        )
        changes.append(
            (
                "UPDATE events SET payload = :p, hash = :h WHERE seq = :s",
                {"p": payload, "h": h, "s": e.seq},
            )
        )
        prev = h
    _without_guards(store, changes)
    assert verify(store).ok


def test_a_central_store_restored_from_an_older_backup_is_refilled(
    tmp_path: Path, seed_journal: Path, store_url: str, opener: Callable[[str], EventStore]
) -> None:
    central = opener(store_url)
    local = seed_on_host(tmp_path, seed_journal, HOST)
    try:
        assert ship(local, central, HOST, batch=25).shipped == 86
        # The central store comes back from a backup taken when it held 40 of this host's.
        _without_guards(central, [("DELETE FROM events WHERE idem_key > 40", {})])
        assert verify(central).ok and verify_host(central, f"ship:{HOST}").checked == 40
        code, out, err = _invoke("ship", "--to", store_url, "--host", HOST, "--db", local.url)
        assert code == 0, err
        assert out.startswith("shipped 46 events (0 already there")
        assert "only up to its seq 40, 46 behind the local position: refilled" in err
        report = verify_host(central, f"ship:{HOST}")
        assert (report.ok, report.checked, report.last_seq) == (True, 86, 86)
        assert verify(central).ok
    finally:
        local.close()


def test_local_history_rewritten_after_shipping_is_a_loud_error(
    tmp_path: Path, seed_journal: Path, store_url: str, opener: Callable[[str], EventStore]
) -> None:
    central = opener(store_url)
    local = seed_on_host(tmp_path, seed_journal, HOST)
    try:
        ship(local, central, HOST, batch=25)
        _rewrite_and_rechain(local, 30)
        local.append_prepared(
            [
                (e.stream, e.type, e.version, e.time_us, "later", e.seq, e.payload.encode())
                for e in list(local.read_raw())[:3]
            ]
        )
        before = _count(central)
        code, out, err = _invoke("ship", "--to", store_url, "--host", HOST, "--db", local.url)
        assert code == 3, (out, err)
        assert err.count("\n") == 1 and err.startswith(
            f"Error: host {HOST}: its event 30 is not the one it shipped"
        )
        assert _count(central) == before  # nothing shipped
    finally:
        local.close()


def test_a_central_store_ahead_of_this_store_is_refused(
    tmp_path: Path, seed_journal: Path, store_url: str, opener: Callable[[str], EventStore]
) -> None:
    """Another (or a wiped and re-ingested) store shipping under the same host name."""
    central = opener(store_url)
    (tmp_path / "a").mkdir()
    first = seed_on_host(tmp_path / "a", seed_journal, HOST)
    ship(first, central, HOST)
    first.close()
    other = opener(f"sqlite:///{tmp_path / 'other.db'}")
    other.append_prepared(
        [
            (e.stream, e.type, e.version, e.time_us, e.source, e.key, e.payload.encode())
            for e in list(central.read_raw())[:10]
        ]
    )
    with pytest.raises(
        IntegrityError, match="holds its events up to its seq 86, but this store ends at seq 10"
    ) as refused:
        ship(other, central, HOST)
    assert refused.value.first_bad_seq == 11


def test_an_event_already_there_is_a_duplicate_only_with_the_same_hash(
    tmp_path: Path, seed_journal: Path, sqlite_url: str, opener: Callable[[str], EventStore]
) -> None:
    """Two shippers of one host racing (or one resending after a lost reply) find the
    events there: the same hash is a duplicate, another hash the error, by host seq. (The
    PostgreSQL function makes the same check: tests/fleet/test_central_roles.py.)"""
    central = opener(sqlite_url)
    local = seed_on_host(tmp_path, seed_journal, HOST)
    try:
        ship(local, central, HOST)
        chunk = list(local.read_raw())[:20]
        writer = DirectWriter(central)
        assert writer.ship(HOST, chunk, Position(86, chunk[-1].hash)) == (0, 20)
        _rewrite_and_rechain(local, 12)
        with pytest.raises(
            IntegrityError, match="seq 12 is in the central store with another hash"
        ) as refused:
            writer.ship(HOST, list(local.read_raw())[:20], Position(86, chunk[-1].hash))
        assert refused.value.first_bad_seq == 12
    finally:
        local.close()


@pytest.fixture
def half_open() -> Iterator[int]:
    """A TCP server that accepts every connection and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    server.settimeout(0.2)
    held: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        while not done.is_set():
            try:
                held.append(server.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        done.set()
        thread.join(timeout=5)
        server.close()
        for sock in held:
            sock.close()


def test_ship_gives_up_on_a_server_that_never_answers(
    tmp_path: Path, seed_journal: Path, half_open: int
) -> None:
    local = seed_on_host(tmp_path, seed_journal, HOST)
    local.close()
    started = time.monotonic()
    proc = run_advisor(
        "ship",
        "--to",
        f"postgresql+psycopg://postgres@127.0.0.1:{half_open}/db",
        "--give-up-after",
        "5",
        "--host",
        HOST,
        "--db",
        local.url,
        timeout=60,
    )
    elapsed = time.monotonic() - started
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    assert err.count("\n") == 1 and "is unreachable (gave up after 5 s)" in err, err
    assert "connection timeout expired" in err
    assert elapsed < 15, elapsed  # 5 s of trying (one connect timeout) and the start


def test_ship_forever_reports_every_failure_and_keeps_shipping(
    tmp_path: Path, seed_journal: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = seed_on_host(tmp_path, seed_journal, HOST)
    real, calls = advisor.fleet.ship.ship, []

    def flaky(*args: object, **kwargs: object) -> ShipReport:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("a bug in a dependency")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(advisor.fleet.ship, "ship", flaky)
    stop = threading.Event()
    errors: list[str] = []
    shipped: list[ShipReport] = []
    thread = threading.Thread(
        target=ship_forever,
        args=(local, f"sqlite:///{tmp_path / 'central.db'}", HOST, stop),
        kwargs={"interval_s": 0.1, "on_error": errors.append, "on_shipped": shipped.append},
    )
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not shipped:
            assert thread.is_alive(), errors
            assert time.monotonic() < deadline, errors
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(timeout=30)
        local.close()
    assert errors == ["unexpected RuntimeError: a bug in a dependency"]
    assert shipped[0].shipped == 86


def _notify_socket(tmp_path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "notify.sock"))
    sock.settimeout(30)
    return sock


def test_a_shipper_thread_that_ends_is_reported(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sqlite_url: str,
    opener: Callable[[str], EventStore],
) -> None:
    from advisor.pipeline.daemon import start_shipper

    def dies(*_args: object, **_kwargs: object) -> None:
        raise SystemExit("the interpreter is going")

    monkeypatch.setattr(advisor.fleet.ship, "ship_forever", dies)
    died: list[str] = []
    with _notify_socket(tmp_path) as sock:
        notifier = Notifier({"NOTIFY_SOCKET": str(tmp_path / "notify.sock")})
        thread = start_shipper(
            opener(sqlite_url),
            "sqlite:///central.db",
            threading.Event(),
            notifier,
            died,
            host="gpu-host",
            say=lambda _line: None,
        )
        thread.join(timeout=10)
        assert sock.recv(4096).startswith(
            b"STATUS=shipping to sqlite:///central.db stopped: SystemExit"
        )
    assert died == ["SystemExit: the interpreter is going"]


def _fields(obj: dict[str, object]) -> Entry:
    return [
        (name, value)
        for name, value in obj.items()
        if name != "__CURSOR" and isinstance(value, str)
    ]


@pytest.mark.skipif(
    not have_journal_tools(), reason="journalctl and systemd-journal-remote are needed"
)
def test_watch_ship_to_says_when_shipping_fails_and_goes_on(
    tmp_path: Path, sqlite_url: str, seed_journal: Path, half_open: int
) -> None:
    entries = [_fields(json.loads(line)) for line in seed_journal.read_text().splitlines()]
    journal = make_journal(tmp_path / "live.journal", entries)
    central = f"postgresql+psycopg://postgres@127.0.0.1:{half_open}/db"
    with _notify_socket(tmp_path) as sock:
        env = {**os.environ, "NOTIFY_SOCKET": str(tmp_path / "notify.sock")}
        proc = subprocess.Popen(
            advisor_argv(
                "watch",
                "--journal-file",
                str(journal),
                "--no-gpu",
                "--ship-to",
                central,
                "--db",
                sqlite_url,
            ),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            messages = []
            deadline = time.monotonic() + 40
            while not any(b"failed" in m for m in messages):
                assert time.monotonic() < deadline, messages
                messages.append(sock.recv(4096))
            status = next(m for m in messages if b"failed" in m)
            assert status.startswith(b"STATUS=shipping to " + central.encode() + b" failed: ")
            assert b"unreachable" in status
            assert proc.poll() is None  # the host goes on
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert b"shipping: the central store" in err


def test_ship_key_must_exist(tmp_path: Path, sqlite_url: str) -> None:
    code, _, err = _invoke(
        "ship",
        "--to",
        f"sqlite:///{tmp_path / 'c.db'}",
        "--key",
        str(tmp_path / "missing-key"),
        "--db",
        sqlite_url,
    )
    assert code == 4 and err.startswith("Error: --key ") and "no such file" in err


def test_an_event_without_origin_after_a_hosts_chain_started_fails_its_verify(
    tmp_path: Path, seed_journal: Path, store_url: str, opener: Callable[[str], EventStore]
) -> None:
    """Written under a host's source by someone other than its shipper (the earlier grants
    let any shipping role do it): only a prefix shipped before origins were kept goes
    unchecked; one after the chain started is named."""
    central = opener(store_url)
    local = seed_on_host(tmp_path, seed_journal, HOST)
    try:
        ship(local, central, HOST)
        e = next(local.read_raw())
        central.append_prepared(
            [
                (
                    e.stream,
                    e.type,
                    e.version,
                    e.time_us,
                    f"ship:{HOST}",
                    87,
                    b'{"type":"log.recorded","origin":"text","message":"x"}',
                )
            ]
        )
        report = verify_host(central, f"ship:{HOST}")
        assert (report.ok, report.first_bad_seq, report.checked) == (False, 87, 86)
        assert "not shipped by the host" in (report.reason or "")
    finally:
        local.close()
