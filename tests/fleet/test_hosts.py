"""The hosts view (`advisor hosts`, the console's hosts page): a host store ships its events
and heartbeats to a central store (SQLite and PostgreSQL), and the central store lists both
hosts — its own and the shipped one — with the GPUs their heartbeats recorded, their open
incidents and GPU faults, the shipped one's ship lag, and which host is silent."""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError
from sqlalchemy import delete, select, text

from advisor.core.events import NewEvent
from advisor.core.heartbeat import AgentHeartbeat, agent_version
from advisor.core.payloads import GpuFault, GpuSampled
from advisor.fleet.ship import ship
from advisor.front import Advisor
from advisor.pipeline.heartbeat import Heartbeat, start_heartbeat
from advisor.pipeline.processing import Processor
from advisor.store import EventStore, open_store
from advisor.store.schema import stream_heads
from advisor.views.fold.projector import Projector
from ingest.gpu_recording import recording_line
from ingest.journal_sources import ingest_json_file
from tests.conftest import advisor_argv, run_advisor
from tests.journal_fixtures import Entry, have_journal_tools, make_journal
from tests.waiting import wait

migration_0013 = importlib.import_module("migrations.versions.0013_fleet_readers")
GOLDEN = (
    Path(__file__).parents[1]
    / "golden/gpu_hardware_fault/xid79-fallen-off-bus-v011-tp2-full-journal.jsonl"
)
SHIPPED, CENTRAL = "gpu-h100-44", "central-01"
HOST = "gpu-node-07"  # the seed journal's
H100 = 80 * 2**30


def _gpu(host: str, index: int, name: str, total: int) -> GpuSampled:
    return GpuSampled(
        origin="nvml",
        host=host,
        index=index,
        name=name,
        uuid=f"GPU-{host}-{index}",
        memory_total_bytes=total,
        memory_used_bytes=0,
        memory_free_bytes=total,
    )


def beat(
    store: EventStore,
    host: str,
    gpus: list[GpuSampled],
    *,
    interval_s: float = 60.0,
    at_s: float | None = None,
) -> AgentHeartbeat:
    """One heartbeat as `advisor watch` records it, its GPUs from a sampler tick."""
    heart = Heartbeat(store, host, interval_s, clock=(lambda: at_s) if at_s else time.time)
    heart.driver = lambda: "550.54.15"
    heart.saw(0, gpus)
    return heart.beat()


def central_with_a_shipped_host(central: EventStore, tmp_path: Path) -> EventStore:
    """The xid79 journal (a GPU that fell off the bus: an open gpu_hardware_fault incident)
    on its host's own store, with two heartbeats, shipped to `central`; the central store's
    own host beats once."""
    local = open_store(f"sqlite:///{tmp_path / 'host.db'}")
    ingest_json_file(local, GOLDEN)
    Processor(local).run(final=True)
    gpus = [_gpu(SHIPPED, i, "NVIDIA H100 80GB HBM3", H100) for i in (0, 1)]
    beat(local, SHIPPED, gpus, at_s=time.time() - 60)
    beat(local, SHIPPED, gpus)
    report = ship(local, central, SHIPPED)
    assert report.shipped > 200 and report.folded
    beat(central, CENTRAL, [_gpu(CENTRAL, 0, "NVIDIA L40S", 48 * 2**30)])
    return local


def test_the_central_store_lists_both_hosts_with_their_gpus(
    store_url: str, tmp_path: Path, opener: Callable[[str], EventStore]
) -> None:
    central = opener(store_url)
    local = central_with_a_shipped_host(central, tmp_path)
    local.close()
    before = time.time()
    hosts = {h.host: h for h in Advisor(central).hosts()}
    assert sorted(hosts) == [CENTRAL, SHIPPED]

    shipped = hosts[SHIPPED]
    assert shipped.agent_version == agent_version() and shipped.interval_s == 60.0
    assert [(g["index"], g["name"], g["memory_total_bytes"]) for g in shipped.gpus] == [
        (0, "NVIDIA H100 80GB HBM3", H100),
        (1, "NVIDIA H100 80GB HBM3", H100),
    ]
    assert {g["driver_version"] for g in shipped.gpus} == {"550.54.15"}
    assert shipped.shipped and shipped.ship_lag_s is not None
    # the newest event shipped is the last heartbeat, recorded on the host moments ago
    assert 0 <= shipped.ship_lag_s < time.time() - before + 30
    assert shipped.open_incidents == 1 and shipped.gpu_faults == 1
    assert shipped.last_heartbeat_us == shipped.last_event_us
    assert not shipped.silent

    own = hosts[CENTRAL]
    assert [g["name"] for g in own.gpus] == ["NVIDIA L40S"]
    assert not own.shipped and own.ship_lag_s is None
    assert (own.open_incidents, own.gpu_faults, own.silent) == (0, 0, False)

    # Three intervals on, without a heartbeat, both are silent; two intervals less one
    # second after the newest, neither is.
    newest = max(h.last_heartbeat_us or 0 for h in hosts.values()) / 1e6
    later = {h.host: h.silent for h in Advisor(central).hosts(now_s=newest + 180)}
    assert later == {CENTRAL: True, SHIPPED: True}
    oldest = min(h.last_heartbeat_us or 0 for h in hosts.values()) / 1e6
    assert not any(h.silent for h in Advisor(central).hosts(now_s=oldest + 119))


def test_advisor_hosts_json_text_and_check(
    pg_url: str, tmp_path: Path, opener: Callable[[str], EventStore]
) -> None:
    central = opener(pg_url)
    central_with_a_shipped_host(central, tmp_path).close()
    done = run_advisor("hosts", "--json", "--check", "--db", pg_url)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [(r["host"], len(r["gpus"]), r["silent"]) for r in rows] == [
        (CENTRAL, 1, False),
        (SHIPPED, 2, False),
    ]
    # A host whose last heartbeat is ten minutes old, at a 60 s interval: silent.
    beat(central, "gpu-node-99", [], at_s=time.time() - 600)
    text = run_advisor("hosts", "--check", "--db", pg_url)
    assert text.returncode == 1, text.stderr
    lines = text.stdout.decode().splitlines()
    assert any(line.startswith("gpu-node-99  SILENT  agent ") for line in lines), lines
    assert any(line.startswith(f"{SHIPPED}  ok  ") for line in lines), lines
    assert "  GPU 1  NVIDIA H100 80GB HBM3  80.0 GiB  driver 550.54.15" in lines
    assert run_advisor("hosts", "--db", pg_url).returncode == 0  # without --check: 0


def test_a_heartbeat_names_bounded_values() -> None:
    with pytest.raises(ValidationError):
        AgentHeartbeat(host="h", agent_version="1", interval_s=0)
    with pytest.raises(ValidationError):
        AgentHeartbeat(host="", agent_version="1", interval_s=60)
    heartbeat = AgentHeartbeat(host="h", agent_version="1", interval_s=60)
    assert heartbeat.gpus == ()


def test_a_host_without_gpus_beats_with_an_empty_list(sqlite_url: str) -> None:
    store = open_store(sqlite_url)
    try:
        heart = Heartbeat(store, "cpu-only", 30.0)
        assert heart.beat().gpus == ()
        (row,) = Advisor(store).hosts()
        assert (row.host, row.gpus, row.interval_s, row.silent) == ("cpu-only", (), 30.0, False)
    finally:
        store.close()


@pytest.mark.skipif(not have_journal_tools(), reason="journalctl and systemd-journal-remote")
def test_watch_beats_with_its_gpus_and_ships_the_beats(
    tmp_path: Path,
    sqlite_url: str,
    pg_url: str,
    opener: Callable[[str], EventStore],
    seed_journal: Path,
) -> None:
    """`advisor watch --gpus-from TWIN --ship-to CENTRAL` on a host with two simulated GPUs:
    its heartbeats list them and reach the central store, whose `advisor hosts` shows them."""
    first = json.loads(seed_journal.read_text().splitlines()[0])
    entry: Entry = [(k, v) for k, v in first.items() if k != "__CURSOR" and isinstance(v, str)]
    journal = make_journal(tmp_path / "live.journal", [entry])
    view = tmp_path / "nvml-view.json"
    gpus = [_gpu("sim", i, "NVIDIA H200", 141 * 2**30) for i in (0, 1)]
    stop = threading.Event()

    def driver() -> None:  # the simulated driver keeps its view fresh, as gpud does
        while True:
            view.write_bytes(recording_line(int(time.time() * 1e6), "sim", gpus))
            if stop.wait(0.2):
                return

    threading.Thread(target=driver, daemon=True).start()
    env = {**os.environ, "ADVISOR_HEARTBEAT_S": "0.5", "ADVISOR_HOST": HOST}
    argv = ("--journal-file", str(journal), "--gpus-from", str(view), "--ship-to", pg_url)
    proc = subprocess.Popen(
        advisor_argv("watch", *argv, "--db", sqlite_url),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait("view", view.exists)
        central = opener(pg_url)

        def shipped_beats() -> bool:
            try:
                rows = Advisor(central).hosts()
            except Exception:  # the shipper has not created the schema yet
                return False
            beats = list(Advisor(central).events(type_="agent.heartbeat"))
            return len(beats) >= 2 and any(r.host == HOST and len(r.gpus) == 2 for r in rows)

        try:
            wait("two heartbeats, with both GPUs, in the central store", shipped_beats, proc, 90)
        except AssertionError as e:
            raise AssertionError(f"{e}: {proc.stderr.read() if proc.stderr else ''}") from e
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        stop.set()
    assert proc.returncode == 0, err
    done = run_advisor("hosts", "--json", "--db", pg_url)
    (row,) = json.loads(done.stdout)
    assert (row["host"], row["shipped"], row["interval_s"]) == (HOST, True, 0.5)
    assert [(g["index"], g["name"]) for g in row["gpus"]] == [
        (0, "NVIDIA H200"),
        (1, "NVIDIA H200"),
    ]


def test_the_first_heartbeat_waits_for_the_gpus_and_a_stop_ends_the_beats(
    sqlite_url: str, opener: Callable[[str], EventStore]
) -> None:
    store = opener(sqlite_url)
    heart = Heartbeat(store, HOST, 5.0)
    stop = threading.Event()
    said: list[str] = []
    thread = start_heartbeat(heart, stop, said.append, gpus=True)
    heart.saw(0, [_gpu(HOST, 0, "NVIDIA H200", 141 * 2**30)])

    def beats() -> list[AgentHeartbeat]:
        found = Advisor(store).events(type_="agent.heartbeat")
        return [e.payload for e in found if isinstance(e.payload, AgentHeartbeat)]

    wait("the first heartbeat", beats)
    stop.set()
    thread.join(timeout=10)
    assert not thread.is_alive() and said == []
    first = beats()[0]
    assert [g.name for g in first.gpus] == ["NVIDIA H200"]
    # without a tick, a stop during the first wait ends it at once
    idle = Heartbeat(store, "idle", 60.0)
    stopped = threading.Event()
    stopped.set()
    started = time.monotonic()
    idle.run(stopped, said.append, gpus=True)
    assert time.monotonic() - started < 5 and {b.host for b in beats()} == {HOST}


def test_a_hosts_gpu_faults_are_its_hardware_fault_events(
    store_url: str, opener: Callable[[str], EventStore]
) -> None:
    """A GPU fault of hardware severity counts on its host even where no incident names it
    (a fault NVML saw between runs); a fault of another severity does not."""
    store = opener(store_url)
    beat(store, CENTRAL, [])

    def fault(key: int, xid: int, severity: str, action: str) -> NewEvent:
        payload = GpuFault(
            origin="nvml", kind="xid", host=CENTRAL, gpu=0, xid=xid, severity=severity,
            action=action,
        )  # fmt: skip
        at = int(time.time() * 1e6)
        return NewEvent.model_validate(
            {"stream": f"{CENTRAL}/gpu0", "time_us": at, "source": "nvml", "key": key,
             "payload": payload}
        )  # fmt: skip

    store.append([fault(1, 79, "hardware", "RESET_GPU"), fault(2, 13, "application", "IGNORE")])
    (own,) = Advisor(store).hosts()
    assert (own.host, own.gpu_faults, own.open_incidents) == (CENTRAL, 1, 0)
    store.append([fault(3, 48, "hardware", "RESET_GPU")])
    assert [h.gpu_faults for h in Advisor(store).hosts()] == [2]


def _heads(store: EventStore) -> list[tuple[object, ...]]:
    with store.connect() as conn:
        return [tuple(r) for r in conn.execute(select(stream_heads).order_by("stream"))]


def test_the_fold_keeps_each_streams_heads_as_the_migration_fills_them(
    store_url: str, tmp_path: Path, opener: Callable[[str], EventStore]
) -> None:
    """`stream_heads` as the fold keeps it (chunk by chunk, a heartbeat on top not folded yet)
    is what migration 0013 computes from the events, and what a rebuild folds; the hosts
    view reads the same before the newest events are folded as after."""
    central = opener(store_url)
    central_with_a_shipped_host(central, tmp_path).close()
    beat(central, SHIPPED, [], at_s=time.time())  # the central store's own record of it
    now = time.time()
    unfolded = Advisor(central).hosts(now_s=now)
    assert Projector(central).catch_up() == 2  # the central store's own two beats
    assert Advisor(central).hosts(now_s=now) == unfolded
    folded = _heads(central)
    streams = {row[0] for row in folded}
    assert f"{SHIPPED}/@agent" in streams and f"{CENTRAL}/@agent" in streams
    by_stream = {row[0]: row for row in folded}
    # the shipped host's agent stream: newest is the central store's own beat, not shipped
    agent = by_stream[f"{SHIPPED}/@agent"]
    assert agent[3] == agent[1] and agent[4] is not None and agent[4] < agent[1]
    assert agent[5] == SHIPPED
    assert by_stream[f"{CENTRAL}/@agent"][4:] == (None, None)

    with central.connect() as conn, conn.begin():
        conn.execute(delete(stream_heads))
        conn.execute(text(migration_0013.FILL))
    assert _heads(central) == folded
    Projector(central).rebuild()
    assert _heads(central) == folded
