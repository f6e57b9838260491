"""A simulated fleet shipping to one central PostgreSQL: lag, central load, and the host's
cost per line.

    .venv/bin/python bench/fleet.py [--hosts 10,100,1000] [--seconds 90] [--report]

Two parts, on a fresh database of the local PostgreSQL each time (`--url`; dropped after):

1. **The host's cost per line.** One host's store of the generated journal
   (bench/journal_gen.py: three vLLM services serving requests, with start-ups, crashes and
   the kernel's lines; `--journal-lines`) shipped once with `advisor ship --lines all` (every
   event, as before issue 27: the floor) and once with `--lines fleet` (the default), each to
   a fresh central store. Figures: the shipper's CPU per host line, the rows and bytes the
   central store keeps, and the ratio of the two costs (target ≥ 10×).

2. **The fleet.** N simulated hosts, each its own SQLite store, ship concurrently to one
   central store, as `watch --ship-to` does: every `--interval` seconds (staggered), a host
   appends what it logged since its last round — request and throughput lines at `--rate`
   lines/s, one line in 500 not routine (a warning), a crash now and then (`--crash-every`: a
   traceback, systemd's lines, a start-up of 120 lines), `--gpus` GPU samples every
   `--gpu-every` seconds, a heartbeat a minute — then ships with the fleet selection and a
   signed head, through `advisor_ship`, as the owner (one connection per worker process,
   as a pooler in front of the central store would give). The central store's owner folds
   every 30 s in a process of its own (`deploy/advisor-central-fold.timer`). Figures: ship
   lag p50 / p99 (the central commit after a round minus the time on its host of each event
   that ships as it is: warnings, crashes, start-ups, heartbeats; a kept line reaches the
   central store only as a range, within a minute), the worst host's p99, what a round
   takes, central events/s,
   central CPU (every PostgreSQL process) and disk per host-day, the central fold's CPU per
   host-day, the hosts' shipping CPU per line, and how far the workers kept to the schedule.

3. **One server's ceiling** (`--ceiling SECONDS`, 30 by default; 0: none): two processes
   ship rounds back to back for 2,000 hosts, each round a range of 20 kept events and a
   heartbeat, with no host-side work: the rounds a second the central store takes, and so
   the hosts it takes at a round every `--interval` seconds.

One machine drives the whole fleet, so the per-host rates are scaled down with N (state them
when quoting); the per-host and per-line costs are what extrapolate. Target: p99 ≤ 10 s.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import psutil
from sqlalchemy import create_engine, text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

try:
    from bench import figures
except ImportError:  # run as a script: python bench/fleet.py
    import figures  # type: ignore[no-redef]

sys.path.append(str(ROOT / "bench"))
from journal_files import ensure_journal  # noqa: E402

from advisor.core.events import Prepared  # noqa: E402
from advisor.fleet.selection import Selection  # noqa: E402
from advisor.fleet.ship import ship  # noqa: E402
from advisor.store import EventStore, open_store  # noqa: E402
from advisor.store.chain import GENESIS_HASH, RawEvent, event_hash  # noqa: E402
from advisor.store.glance import Glance  # noqa: E402
from advisor.store.integrity.central import Position, writer_for  # noqa: E402
from advisor.store.integrity.heads import HostKey  # noqa: E402
from advisor.views.fold.projector import Projector  # noqa: E402
from ingest.journal_sources import ingest_json_file  # noqa: E402

DAY_S = 86_400
FOLD_EVERY_S = 30.0
LAG_TARGET_S = 10.0
COST_RATIO_TARGET = 10.0
UNIT = "vllm-llama70b.service"
ACCESS = 'INFO:     10.20.{a}.{b}:{p} - "POST /v1/chat/completions HTTP/1.1" 200 OK'
THROUGHPUT = (
    "INFO 12-05 21:00:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: {x:.1f} "
    "tokens/s, Avg generation throughput: {y:.1f} tokens/s, Running: {n} reqs, Waiting: 0 reqs"
)
UNUSUAL = "WARNING 12-05 21:00:{s:02d} [scheduler.py:1560] Sequence group {n} is preempted"
TRACEBACK = [
    "ERROR 12-05 21:00:00 [core.py:586] EngineCore encountered a fatal error.",
    "Traceback (most recent call last):",
    *[
        f'  File "/opt/vllm/lib/python3.12/site-packages/vllm/v1/engine/core.py", line {n}'
        for n in range(500, 520)
    ],
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
]
START_UP = [
    f"INFO 12-05 21:00:00 [gpu_model_runner.py:{n}] Loading weights, step {n}" for n in range(120)
]


# -- 1. the host's cost per line --------------------------------------------------------------


def fresh_database(base: str, name: str) -> str:
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return base.rsplit("/", 1)[0] + "/" + name


def _drop_database(base: str, name: str) -> None:
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def _size(url: str) -> tuple[int, int]:
    """(events, bytes) the central database holds."""
    engine = create_engine(url)
    with engine.connect() as conn:
        n = int(conn.execute(text("SELECT count(*) FROM events")).scalar_one())
        size = int(conn.execute(text("SELECT pg_database_size(current_database())")).scalar_one())
    engine.dispose()
    return n, size


def host_cost(base: str, work: Path, journal_lines: int) -> dict[str, Any]:
    journal = ensure_journal(work / "journal.jsonl", journal_lines)
    host_url = f"sqlite:///{work / 'host.db'}"
    with open_store(host_url) as host:
        ingest_json_file(host, journal)
        lines = sum(1 for _ in host.read_raw())
    out: dict[str, Any] = {"lines": lines}
    for mode in ("all", "fleet"):
        name = f"advisor_fleet_bench_{mode}"
        url = fresh_database(base, name)
        try:
            with open_store(url) as central, open_store(host_url) as host:
                empty = _size(url)
                started = time.process_time()
                report = ship(
                    host,
                    central,
                    "bench-host",
                    fold=False,
                    selection=Selection() if mode == "fleet" else None,
                )
                cpu = time.process_time() - started
            rows, size = _size(url)
            out[mode] = {
                "cpu_us_per_line": cpu / lines * 1e6,
                "central_rows": rows - empty[0],
                "central_bytes": size - empty[1],
                "held": report.held,
            }
        finally:
            _drop_database(base, name)
    return out


# -- 2. the fleet -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Fleet:
    hosts: int
    seconds: float
    interval_s: float
    rate: float  # lines a second a host logs
    gpus: int
    gpu_every_s: float
    crash_every_s: float
    workers: int


def _line(stream: str, t_us: int, host: str, message: str, key: int) -> Prepared:
    payload = {
        "host": host,
        "message": message,
        "origin": "journald",
        "priority": 6,
        "transport": "stdout",
        "type": "log.recorded",
        "unit": UNIT,
    }
    return (
        stream,
        "log.recorded",
        1,
        t_us,
        "journald",
        key,
        orjson.dumps(payload, option=orjson.OPT_SORT_KEYS),
    )


class SimHost:
    """What one host logs between two rounds, as the store's prepared events."""

    def __init__(self, name: str, fleet: Fleet, rng: random.Random) -> None:
        self.name, self.fleet, self.rng = name, fleet, rng
        self.stream = f"{name}/{UNIT}"
        self.key = 0
        self.next_gpu = 0.0
        self.next_beat = 0.0
        self.pids = [rng.randrange(1000, 99999)]

    def _key(self) -> int:
        self.key += 1
        return self.key

    def since(self, start: float, end: float) -> tuple[list[Prepared], list[float]]:
        """What the host logged from `start` to `end`, in time order, and the times of the
        events among them that ship as they are (not routine lines, not GPU samples: the
        lag is theirs)."""
        f, rng = self.fleet, self.rng
        out: list[Prepared] = []
        shipped: list[float] = []
        n = int((end - start) * f.rate + rng.random())
        for t in sorted(rng.uniform(start, end) for _ in range(n)):
            roll = rng.random()
            if roll < 0.002:
                message = UNUSUAL.format(s=int(t) % 60, n=rng.randrange(10**6))
                shipped.append(t)
            elif roll < 0.08:
                message = THROUGHPUT.format(
                    s=int(t) % 60,
                    x=rng.uniform(100, 900),
                    y=rng.uniform(50, 99),
                    n=rng.randrange(64),
                )
            else:
                message = ACCESS.format(
                    a=rng.randrange(256), b=rng.randrange(256), p=rng.randrange(1024, 65535)
                )
            out.append(_line(self.stream, int(t * 1e6), self.name, message, self._key()))
        if rng.random() < (end - start) / f.crash_every_s:
            t = int(rng.uniform(start, end) * 1e6)
            for m in [
                *TRACEBACK,
                f"{UNIT}: Main process exited, code=exited, status=1/FAILURE",
                f"{UNIT}: Failed with result 'exit-code'.",
                f"Started {UNIT}.",
                *START_UP,
            ]:
                out.append(_line(self.stream, t, self.name, m, self._key()))
                shipped.append(t / 1e6)
            self.pids = [rng.randrange(1000, 99999)]
        self.next_gpu = max(self.next_gpu, start)
        while self.next_gpu <= end:
            for g in range(f.gpus):
                out.append(self._sample(g, int(self.next_gpu * 1e6)))
            self.next_gpu += f.gpu_every_s
        if self.next_beat == 0.0:  # the agent started at some point of the last minute
            self.next_beat = start + rng.uniform(0, 60.0)
        while self.next_beat <= end:
            beat_at = self.next_beat
            self.next_beat += 60.0
            beat = {
                "agent_version": "bench",
                "host": self.name,
                "interval_s": 60.0,
                "type": "agent.heartbeat",
            }
            out.append(
                (
                    f"{self.name}/@agent",
                    "agent.heartbeat",
                    1,
                    int(beat_at * 1e6),
                    "agent",
                    self._key(),
                    orjson.dumps(beat, option=orjson.OPT_SORT_KEYS),
                )
            )
            shipped.append(beat_at)
        out.sort(key=lambda e: e[3])
        return out, shipped

    def _sample(self, index: int, t_us: int) -> Prepared:
        payload = {
            "host": self.name,
            "index": index,
            "memory_free_bytes": 2 << 30,
            "memory_total_bytes": 80 << 30,
            "memory_used_bytes": 78 << 30,
            "origin": "nvml",
            "processes": [{"pid": p} for p in self.pids],
            "type": "gpu.sampled",
            "utilization_gpu_pct": self.rng.randrange(100),
        }
        return (
            f"{self.name}/gpu{index}",
            "gpu.sampled",
            1,
            t_us,
            "nvml",
            self._key(),
            orjson.dumps(payload, option=orjson.OPT_SORT_KEYS),
        )


def _worker(
    fleet: Fleet,
    index: int,
    central_url: str,
    template: Path,
    work: Path,
    start_at: float,
    out: Any,
) -> None:
    rng = random.Random(index)
    names = [f"host-{i:04d}" for i in range(index, fleet.hosts, fleet.workers)]
    stores: dict[str, EventStore] = {}
    for name in names:
        path = work / f"{name}.db"
        shutil.copyfile(template, path)
        stores[name] = open_store(f"sqlite:///{path}")
    sims = {n: SimHost(n, fleet, random.Random(f"{index}/{n}")) for n in names}
    keys = {n: HostKey.generate() for n in names}
    selections = {n: Selection() for n in names}
    central = open_store(central_url)
    # each host's first round at a random point of the first interval (staggered)
    due = {n: start_at + rng.uniform(0, fleet.interval_s) for n in names}
    last = {n: start_at for n in names}
    lags: list[float] = []
    per_host: dict[str, list[float]] = {n: [] for n in names}
    late: list[float] = []
    walls: list[float] = []  # each round's wall time: what the central store takes
    ship_cpu = 0.0
    lines = 0
    rounds = 0
    end = start_at + fleet.seconds
    while True:
        name = min(due, key=due.__getitem__)
        when = due[name]
        if when >= end:
            break
        wait = when - time.time()
        if wait > 0:
            time.sleep(wait)
        late.append(max(0.0, time.time() - when))
        now = time.time()
        logged, shipping = sims[name].since(last[name], now)
        last[name] = now
        if logged:
            stores[name].append_prepared(logged)
        started, wall_started = time.thread_time(), time.time()
        ship(
            stores[name],
            central,
            name,
            key=keys[name],
            selection=selections[name],
            fold=False,
            give_up_after_s=None,
        )
        ship_cpu += time.thread_time() - started
        committed = time.time()
        walls.append(committed - wall_started)
        lines += len(logged)
        rounds += 1
        round_lags = [committed - t for t in shipping]
        lags += round_lags
        per_host[name] += round_lags
        due[name] = when + fleet.interval_s
    central.close()
    for s in stores.values():
        s.close()
    host_p99 = [_pct(v, 99) for v in per_host.values() if v]
    out.put(
        {
            "lags": lags,
            "host_p99": host_p99,
            "late": late,
            "walls": walls,
            "ship_cpu": ship_cpu,
            "lines": lines,
            "rounds": rounds,
        }
    )


def _folder(central_url: str, stop: Any, out: Any) -> None:
    central = open_store(central_url)
    cpu = 0.0
    while not stop.wait(FOLD_EVERY_S):
        started = time.process_time()
        Projector(central).catch_up()
        cpu += time.process_time() - started
    central.close()
    out.put({"fold_cpu": cpu})


def _postgres_cpu() -> float:
    total = 0.0
    for p in psutil.process_iter(["name"]):
        if p.info["name"] in ("postgres", "postmaster"):
            try:
                t = p.cpu_times()
            except psutil.Error:
                continue
            total += t.user + t.system + t.children_user + t.children_system
    return total


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q / 100))]


def run_fleet(base: str, work: Path, fleet: Fleet) -> dict[str, Any]:
    name = f"advisor_fleet_bench_{fleet.hosts}"
    url = fresh_database(base, name)
    try:
        template = work / "template.db"
        open_store(f"sqlite:///{template}").close()
        open_store(url).close()
        ctx = mp.get_context("spawn")
        out = ctx.Queue()
        start_at = time.time() + 5.0 + fleet.hosts * 0.02  # the workers open their stores
        procs = [
            ctx.Process(target=_worker, args=(fleet, i, url, template, work, start_at, out))
            for i in range(fleet.workers)
        ]
        stop = ctx.Event()
        folder = ctx.Process(target=_folder, args=(url, stop, out))
        for p in procs:
            p.start()
        while time.time() < start_at:
            time.sleep(0.05)
        events0, bytes0 = _size(url)
        cpu0 = _postgres_cpu()
        folder.start()
        results = [out.get() for _ in procs]
        elapsed = time.time() - start_at
        cpu1 = _postgres_cpu()
        events1, bytes1 = _size(url)
        stop.set()
        fold = out.get()
        for p in [*procs, folder]:
            p.join()
    finally:
        _drop_database(base, name)
    lags = [x for r in results for x in r["lags"]]
    host_days = fleet.hosts * elapsed / DAY_S
    lines = sum(r["lines"] for r in results)
    late = [x for r in results for x in r["late"]]
    return {
        "hosts": fleet.hosts,
        "seconds": elapsed,
        "rate": fleet.rate,
        "lines": lines,
        "rounds": sum(r["rounds"] for r in results),
        "lag_p50": _pct(lags, 50),
        "lag_p99": _pct(lags, 99),
        "worst_host_p99": max(x for r in results for x in r["host_p99"]),
        "late_p99": _pct(late, 99),
        "round_p50": _pct([x for r in results for x in r["walls"]], 50),
        "round_p99": _pct([x for r in results for x in r["walls"]], 99),
        "central_events_s": (events1 - events0) / elapsed,
        "central_cpu_s_per_host_day": (cpu1 - cpu0) / host_days,
        "central_cpu_share": (cpu1 - cpu0) / elapsed,
        "central_bytes_per_host_day": (bytes1 - bytes0) / host_days,
        "fold_cpu_s_per_host_day": fold["fold_cpu"] / host_days,
        "ship_cpu_us_per_line": sum(r["ship_cpu"] for r in results) / max(lines, 1) * 1e6,
        "ship_cpu_ms_per_round": sum(r["ship_cpu"] for r in results)
        / max(1, sum(r["rounds"] for r in results))
        * 1e3,
    }


# -- 3. one server's ceiling -------------------------------------------------------------------


ROUTINE = orjson.dumps(ACCESS.format(a=1, b=2, p=3)).decode()[1:-1]  # as the store holds it


def _hammer(
    url: str, index: int, workers: int, hosts: int, seconds: float, start_at: float, out: Any
) -> None:
    """Ship rounds back to back for this worker's share of `hosts`: each round a range of
    20 kept events and a heartbeat, as a serving host's round is, through `advisor_ship`."""
    names = [f"ceiling-{i:05d}" for i in range(index, hosts, workers)]
    central = open_store(url)
    writer = writer_for(central)
    rng = random.Random(index)
    at = {n: Position(0, GENESIS_HASH) for n in names}
    calls: list[float] = []
    while time.time() < start_at:
        time.sleep(0.01)
    end = start_at + seconds
    i = 0
    while time.time() < end:
        name = names[i % len(names)]
        i += 1
        pos = at[name]
        kept = [
            Glance(pos.seq + k, f"{name}/{UNIT}", "log.recorded", 1, 1, b"", ROUTINE, False)
            for k in range(1, 21)
        ]
        kept[-1] = kept[-1]._replace(hash=rng.randbytes(32))  # the range's closing hash
        selection = Selection(held_every_s=0)
        assert selection.pick(kept, name, pos.hash or GENESIS_HASH, lambda _: []) == []
        (held,) = selection.due(name, 0, flush=True)
        beat = orjson.dumps(
            {"agent_version": "bench", "host": name, "interval_s": 60.0, "type": "agent.heartbeat"},
            option=orjson.OPT_SORT_KEYS,
        )
        seq, t_us = held.seq + 1, time.time_ns() // 1000
        source, key = "agent", seq
        h = event_hash(
            held.hash, seq, f"{name}/@agent", "agent.heartbeat", 1, t_us, t_us, source, key, beat
        )
        event = RawEvent(
            seq,
            f"{name}/@agent",
            "agent.heartbeat",
            1,
            t_us,
            t_us,
            source,
            key,
            beat.decode(),
            h,
            None,
        )
        started = time.perf_counter()
        writer.ship(name, [held, event], pos)
        calls.append(time.perf_counter() - started)
        at[name] = Position(seq, h)
    central.close()
    out.put(calls)


def ceiling(base: str, hosts: int, seconds: float, workers: int) -> dict[str, float]:
    name = "advisor_fleet_bench_ceiling"
    url = fresh_database(base, name)
    try:
        open_store(url).close()
        ctx = mp.get_context("spawn")
        out = ctx.Queue()
        start_at = time.time() + 3.0
        procs = [
            ctx.Process(target=_hammer, args=(url, i, workers, hosts, seconds, start_at, out))
            for i in range(workers)
        ]
        for p in procs:
            p.start()
        calls = [x for _ in procs for x in out.get()]
        for p in procs:
            p.join()
    finally:
        _drop_database(base, name)
    return {"rounds_s": len(calls) / seconds, "p50": _pct(calls, 50), "p99": _pct(calls, 99)}


def add_url(parser: argparse.ArgumentParser) -> None:
    """`--url`: the PostgreSQL server a bench makes its databases on."""
    parser.add_argument(
        "--url",
        default=os.environ.get(
            "ADVISOR_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
        ),
        help="a database of the PostgreSQL server to use (the bench makes its own beside it)",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_url(parser)
    parser.add_argument("--hosts", default="10,100,1000")
    parser.add_argument("--seconds", type=float, default=90.0)
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument(
        "--rate", default="20,4,0.5", help="lines/s a host logs, one per --hosts value"
    )
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument(
        "--gpu-every",
        default="1,5,30",
        help="seconds between a host's GPU samples, one per --hosts value",
    )
    parser.add_argument("--crash-every", type=float, default=1800.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--journal-lines", type=int, default=100_000)
    parser.add_argument("--skip-host-cost", action="store_true")
    parser.add_argument(
        "--ceiling",
        type=float,
        default=30.0,
        help="seconds of rounds back to back (0: none): one server's ceiling",
    )
    parser.add_argument("--report", action="store_true")
    args = parser.parse_args()
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    rows: list[figures.Figure] = []
    with tempfile.TemporaryDirectory(prefix="advisor-fleet-") as tmp:
        work = Path(tmp)
        if not args.skip_host_cost:
            cost = host_cost(args.url, work, args.journal_lines)
            before, after = cost["all"], cost["fleet"]
            ratio = before["cpu_us_per_line"] / after["cpu_us_per_line"]
            print(
                f"host cost, {cost['lines']:,} journal events of one host "
                f"({after['held']:,} kept as routine):"
            )
            for mode in ("all", "fleet"):
                c = cost[mode]
                print(
                    f"  --lines {mode:5}: {c['cpu_us_per_line']:6.1f} µs of shipper CPU a "
                    f"line; central store: {c['central_rows']:,} rows, "
                    f"{c['central_bytes'] / 2**20:,.1f} MiB"
                )
            print(f"  the fleet selection costs 1/{ratio:.1f} of shipping every event")
            rows.append(
                figures.Figure(
                    "fleet",
                    "host shipping CPU per line",
                    round(after["cpu_us_per_line"], 2),
                    "µs",
                    f"≤ 1/{COST_RATIO_TARGET:.0f} of --lines all",
                    ratio >= COST_RATIO_TARGET,
                    floor=round(before["cpu_us_per_line"], 2),
                    floor_name="advisor ship --lines all",
                    ratio=round(ratio, 1),
                )
            )
        sizes = [int(x) for x in args.hosts.split(",") if x]
        rates = [float(x) for x in args.rate.split(",")]
        gpu_every = [float(x) for x in args.gpu_every.split(",")]
        for i, n in enumerate(sizes):
            fleet = Fleet(
                n,
                args.seconds,
                args.interval,
                rates[min(i, len(rates) - 1)],
                args.gpus,
                gpu_every[min(i, len(gpu_every) - 1)],
                args.crash_every,
                args.workers,
            )
            folder = work / f"fleet-{n}"
            folder.mkdir()
            r = run_fleet(args.url, folder, fleet)
            print(
                f"{n:5} hosts × {fleet.rate:g} lines/s + {fleet.gpus} GPUs / "
                f"{fleet.gpu_every_s:g} s, rounds every {fleet.interval_s:g} s, "
                f"{r['seconds']:.0f} s: lag p50 {r['lag_p50']:.2f} s, p99 {r['lag_p99']:.2f} s "
                f"(worst host {r['worst_host_p99']:.2f} s; a round takes "
                f"{r['round_p50'] * 1e3:.0f} ms, p99 {r['round_p99'] * 1e3:.0f} ms; the "
                f"simulator started rounds late by {r['late_p99']:.2f} s, p99); "
                f"central {r['central_events_s']:,.0f} events/s, "
                f"PostgreSQL {r['central_cpu_share']:.2f} cores = "
                f"{r['central_cpu_s_per_host_day']:,.0f} CPU-s and "
                f"{r['central_bytes_per_host_day'] / 2**20:,.1f} MiB a host-day, fold "
                f"{r['fold_cpu_s_per_host_day']:,.0f} CPU-s a host-day; hosts "
                f"{r['ship_cpu_us_per_line']:.1f} µs a line, "
                f"{r['ship_cpu_ms_per_round']:.1f} ms a round"
            )
            rows.append(
                figures.Figure(
                    "fleet",
                    f"ship lag p99, {n} hosts",
                    round(r["lag_p99"], 2),
                    "s",
                    f"≤ {LAG_TARGET_S:g} s",
                    r["lag_p99"] <= LAG_TARGET_S,
                )
            )
        if args.ceiling > 0:
            top = ceiling(args.url, 2000, args.ceiling, args.workers)
            print(
                f"one server's ceiling: {args.workers} processes shipping rounds back to back "
                f"(a range of 20 kept events and a heartbeat, 2,000 hosts): "
                f"{top['rounds_s']:,.0f} rounds/s, a round {top['p50'] * 1e3:.1f} ms p50, "
                f"{top['p99'] * 1e3:.1f} ms p99 — {top['rounds_s'] * args.interval:,.0f} "
                f"hosts at a round every {args.interval:g} s, or more (the processes that ship "
                f"share the cores with PostgreSQL)"
            )
    if args.report:
        figures.emit(rows)


if __name__ == "__main__":
    main()
