"""The fleet: four hosts' stores shipped at once into one central PostgreSQL store, through a
TCP proxy the test cuts mid-ship and restores; no loss, no duplicates, the chain verifies,
and the fleet view sees every host."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from advisor.cli.main import cli
from advisor.core.events import NewEvent
from advisor.fleet.ship import ship
from advisor.store import EventStore, open_store
from advisor.store.integrity.audit import verify
from advisor.store.integrity.hostchain import verify_host
from ingest.journal_sources import ingest_json_file
from tests.conftest import seed_on_host

HOSTS = [f"gpu-node-{n:02d}" for n in range(1, 5)]
PER_HOST = 50_000


class Proxy:
    """A loopback TCP proxy to PostgreSQL that can drop every connection and refuse new
    ones until restored."""

    def __init__(self, target_port: int) -> None:
        self.target = ("127.0.0.1", target_port)
        self.server = socket.socket()
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(64)
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.up = threading.Event()
        self.up.set()
        self.refused = 0  # connections turned away while cut
        self.pairs: list[tuple[socket.socket, socket.socket]] = []
        self.sockets: list[socket.socket] = []
        self.pumps: list[threading.Thread] = []
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            if not self.up.is_set():
                client.close()
                with self.lock:
                    self.refused += 1
                continue
            upstream = socket.create_connection(self.target)
            with self.lock:
                self.pairs.append((client, upstream))
                self.sockets += [client, upstream]
                for a, b in ((client, upstream), (upstream, client)):
                    pump = threading.Thread(target=self._pump, args=(a, b), daemon=True)
                    self.pumps.append(pump)
                    pump.start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        self.up.clear()
        with self.lock:
            for a, b in self.pairs:
                for s in (a, b):
                    with contextlib.suppress(OSError):
                        s.shutdown(socket.SHUT_RDWR)
            self.pairs.clear()

    def restore(self) -> None:
        self.up.set()

    def close(self) -> None:
        self.closed = True
        self.cut()
        self.server.close()
        for pump in self.pumps:
            pump.join(timeout=10)
        for sock in self.sockets:
            sock.close()


@pytest.fixture
def proxy() -> Iterator[Proxy]:
    p = Proxy(5432)
    try:
        yield p
    finally:
        p.close()


def _host_store(tmp_path: Path, host: str, seed: Path) -> EventStore:
    """The seed scenario on `host` (diagnosed there), then request traffic to PER_HOST."""
    store = seed_on_host(tmp_path, seed, host, diagnose=True)
    have = sum(1 for _ in store.read())
    base = 1_771_640_000_000_000
    filler = [
        NewEvent.model_validate(
            {
                "stream": f"{host}/vllm-minimax-m25.service",
                "time_us": base + i * 1000,
                "source": "filler",
                "key": i,
                "payload": {
                    "type": "log.recorded",
                    "origin": "journald",
                    "host": host,
                    "unit": "vllm-minimax-m25.service",
                    "message": f'INFO:     10.0.0.{i % 250}:4{i % 9999} - "POST /v1/completions '
                    'HTTP/1.1" 200 OK',
                },
            }
        )
        for i in range(PER_HOST - have)
    ]
    for start in range(0, len(filler), 10_000):
        store.append(filler[start : start + 10_000])
    return store


@pytest.mark.slow
def test_four_hosts_ship_through_a_cut_connection(
    tmp_path: Path, pg_url: str, proxy: Proxy, seed_journal: Path
) -> None:
    stores = {h: _host_store(tmp_path, h, seed_journal) for h in HOSTS}
    central_url = pg_url.replace(":5432/", f":{proxy.port}/")
    errors: list[BaseException] = []
    reports = {}

    def run(host: str) -> None:
        central = open_store(central_url)
        try:
            reports[host] = ship(stores[host], central, host, batch=2000, give_up_after_s=120)
        except BaseException as e:  # surfaced below
            errors.append(e)
        finally:
            central.close()

    threads = [threading.Thread(target=run, args=(h,)) for h in HOSTS]
    for t in threads:
        t.start()
    central = open_store(pg_url)
    try:
        deadline = time.monotonic() + 120
        while _count(central) < 40_000:  # cut once the ship is well under way
            assert time.monotonic() < deadline
            time.sleep(0.05)
        proxy.cut()
        while proxy.refused == 0:  # a shipper felt the cut: it is reconnecting
            assert time.monotonic() < deadline
            time.sleep(0.05)
        proxy.restore()
        for t in threads:
            t.join(timeout=300)
        assert not errors, errors
        assert sum(r.retries for r in reports.values()) > 0  # the cut was felt
        assert _count(central) == len(HOSTS) * PER_HOST
        with central.connect() as conn:
            distinct = conn.execute(
                text("SELECT count(DISTINCT (source_id, idem_key)) FROM events")
            ).scalar_one()
        assert distinct == len(HOSTS) * PER_HOST
        assert verify(central).ok
        hosts = [verify_host(central, f"ship:{h}") for h in HOSTS]  # each host's own chain
        assert [(h.host, h.ok, h.checked, h.unchecked) for h in hosts] == [
            (h, True, PER_HOST, 0) for h in HOSTS
        ]
        # Shipping again sends nothing new (resumed at the saved position).
        via_proxy = open_store(central_url)
        try:
            again = ship(stores[HOSTS[0]], via_proxy, HOSTS[0])
        finally:
            via_proxy.close()
        assert (again.shipped, again.duplicates) == (0, 0)
        # The fleet view: every host's incidents, addressed as HOST/UNIT.
        stats = json.loads(CliRunner().invoke(cli, ["stats", "--json", "--db", pg_url]).output)
        assert sorted(r["host"] for r in stats["crashes_by_service"]) == HOSTS
        explain = CliRunner().invoke(
            cli,
            ["explain", f"{HOSTS[2]}/vllm-minimax-m25.service", "--format", "json", "--db", pg_url],
        )
        assert json.loads(explain.output)["incident"]["host"] == HOSTS[2]
    finally:
        central.close()
        for store in stores.values():
            store.close()


def _count(store: EventStore) -> int:
    with store.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM events")).scalar_one())


def test_ship_is_idempotent_and_resumable_on_sqlite(
    tmp_path: Path, seed_journal: Path, opener: Callable[[str], EventStore]
) -> None:
    local = opener(f"sqlite:///{tmp_path / 'local.db'}")
    ingest_json_file(local, seed_journal)
    central = opener(f"sqlite:///{tmp_path / 'central.db'}")
    first = ship(local, central, "gpu-node-07", batch=10)
    assert (first.shipped, first.last_seq) == (86, 86)
    ingest_json_file(local, seed_journal)  # nothing new
    assert ship(local, central, "gpu-node-07").shipped == 0
    from advisor.fleet.ship import checkpoint_name

    local.append_prepared(
        [],
        __import__("advisor.store", fromlist=["Checkpoint"]).Checkpoint(
            checkpoint_name(central.url), {"seq": 40}
        ),
    )  # as if the checkpoint had been lost
    again = ship(local, central, "gpu-node-07")  # resumes where the central store stands
    assert (again.shipped, again.duplicates, again.central_seq) == (0, 0, 86)
    assert local.checkpoint(checkpoint_name(central.url)) == {"seq": 86}
    result = CliRunner().invoke(
        cli, ["ship", "--to", central.url, "--host", "gpu-node-07", "--db", local.url]
    )
    assert result.exit_code == 0 and result.output.startswith("shipped 0 events")


def _tamper(store: EventStore, statement: str, **params: object) -> None:
    """What someone with raw database access could do behind the append-only triggers."""
    with store.begin() as conn:
        if store.dialect == "sqlite":
            conn.execute(text("DROP TRIGGER IF EXISTS events_no_update"))
        else:
            conn.execute(text("ALTER TABLE events DISABLE TRIGGER events_append_only"))
        conn.execute(text(statement), params)
        if store.dialect != "sqlite":
            conn.execute(text("ALTER TABLE events ENABLE TRIGGER events_append_only"))


def test_each_hosts_chain_verifies_in_the_central_store(
    tmp_path: Path, seed_journal: Path, store_url: str, opener: Callable[[str], EventStore]
) -> None:
    """The central store re-walks a host's own chain from what was shipped. A host event
    altered before it was shipped is refused at the ship, by its host seq (the central
    store checks each event extends the host's chain); one altered in the central store
    afterwards breaks both chains there."""
    from advisor.core.errors import IntegrityError

    central = opener(store_url)
    hosts = {
        host: seed_on_host(tmp_path, seed_journal, host, diagnose=True)
        for host in ("gpu-node-07", "gpu-node-08")
    }
    _tamper(
        hosts["gpu-node-08"],
        "UPDATE events SET payload = replace(payload, "
        "'1024 dummy requests', '64 dummy requests') WHERE payload LIKE :p",
        p="%1024 dummy requests%",
    )
    tampered = next(
        e.seq for e in hosts["gpu-node-08"].read_raw() if "64 dummy requests" in e.payload
    )
    ship(hosts["gpu-node-07"], central, "gpu-node-07", batch=25)
    with pytest.raises(IntegrityError, match=rf"seq {tampered} does not extend") as refused:
        ship(hosts["gpu-node-08"], central, "gpu-node-08", batch=1)
    assert refused.value.first_bad_seq == tampered
    total = sum(1 for _ in hosts["gpu-node-07"].read_raw())

    result = CliRunner().invoke(cli, ["verify", "--json", "--db", store_url])
    report = json.loads(result.output)
    assert result.exit_code == 0, result.output
    assert [(h["host"], h["ok"], h["checked"]) for h in report["hosts"]] == [
        ("gpu-node-07", True, total),
        ("gpu-node-08", True, tampered - 1),
    ]

    # The origin is part of the central chain: rewriting it there breaks that chain too, and
    # a payload rewritten there breaks the host's chain as well.
    _tamper(
        central,
        "UPDATE events SET origin = replace(origin, :was, :now) WHERE seq = 5",
        was='"recorded_us":',
        now='"recorded_us":1',
    )
    after = json.loads(CliRunner().invoke(cli, ["verify", "--json", "--db", store_url]).output)
    assert after["first_bad_seq"] == 5
    first_host = after["hosts"][0]
    assert (first_host["host"], first_host["ok"], first_host["first_bad_seq"]) == (
        "gpu-node-07",
        False,
        5,
    )
    for store in hosts.values():
        store.close()


def test_an_unreachable_central_store_is_one_store_error_after_the_retries(
    tmp_path: Path,
    pg_url: str,
    proxy: Proxy,
    seed_journal: Path,
    opener: Callable[[str], EventStore],
) -> None:
    """What `watch --ship-to` reports and retries later, whichever step found the central
    store gone; the local position stays where the last committed batch left it."""
    from advisor.core.errors import StoreError
    from advisor.fleet.ship import checkpoint_name

    local = opener(f"sqlite:///{tmp_path / 'local.db'}")
    ingest_json_file(local, seed_journal)
    central = opener(pg_url.replace(":5432/", f":{proxy.port}/"))
    proxy.cut()
    waits: list[float] = []
    with pytest.raises(StoreError, match=r"unreachable|cannot append"):
        ship(local, central, "gpu-node-07", give_up_after_s=5, sleep=waits.append)
    assert waits[:3] == [0.5, 1.0, 2.0] and 1.0 < waits[3] < 1.5  # the rest of the 5 s
    assert sum(waits) <= 5
    assert local.checkpoint(checkpoint_name(central.url)) is None
    proxy.restore()
    assert ship(local, central, "gpu-node-07").shipped == 86


def test_a_host_chain_shipped_partly_before_origins_were_kept_is_checked_from_there(
    tmp_path: Path, seed_journal: Path, store_url: str, opener: Callable[[str], EventStore]
) -> None:
    """A central store upgraded mid-way: the events a host shipped before migration 0005
    carry no origin; its chain is checked from the first event after them, not failed."""
    from advisor.fleet.ship import checkpoint_name
    from advisor.store import Checkpoint

    central = opener(store_url)
    host = opener(f"sqlite:///{tmp_path / 'host.db'}")
    ingest_json_file(host, seed_journal)
    old = list(host.read_raw())[:40]  # as the shipper before 0005 sent them: no origin
    central.append_prepared(
        [
            (e.stream, e.type, e.version, e.time_us, "ship:gpu-node-07", e.seq, e.payload.encode())
            for e in old
        ]
    )
    host.append_prepared([], Checkpoint(checkpoint_name(central.url), {"seq": 40}))
    assert ship(host, central, "gpu-node-07").shipped == 46
    report = verify_host(central, "ship:gpu-node-07")
    assert (report.ok, report.unchecked, report.checked, report.last_seq) == (True, 41, 45, 86)
