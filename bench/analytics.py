"""Analytics speed: `advisor stats` and typical `advisor query` statements on a big store.

    .venv/bin/python bench/analytics.py [--events 10000000] [--hosts 20] [--pg URL] [--workdir DIR]

Builds a store of N events through the store API (many hosts and services: request lines,
runs that crash with a sampler OOM and restart, healthy runs, GPU samples), folds it into the
projections with the diagnoser, exports it to Parquet, then times `stats` and three queries
on SQLite in place, on PostgreSQL in place (with --pg), and on the Parquet export; each time
is printed with its ratio to the same SQL run directly in DuckDB over the Parquet files (the
floor). Targets: stats under 2 s on the export and under 10 s in place.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import duckdb  # noqa: E402
from bench_events import journal_event  # noqa: E402
from figures import Figure, emit  # noqa: E402

from advisor.core.events import NewEvent  # noqa: E402
from advisor.pipeline.processing import Processor  # noqa: E402
from advisor.reports.analytics import connect_parquet, connect_store, export_parquet, stats  # noqa: E402
from advisor.reports.apart import enter_apart  # noqa: E402
from advisor.store import EventStore, open_store  # noqa: E402
from advisor.store.engine import redact  # noqa: E402
from advisor.store.integrity.retained import last_seq  # noqa: E402

QUERIES = {
    "crash lines per host": "SELECT host, count(*) FROM log_lines WHERE message LIKE "
    "'%out of memory%' GROUP BY host ORDER BY host",
    "events per type and day": "SELECT type, date_trunc('day', time) AS day, count(*) "
    "FROM events GROUP BY ALL ORDER BY ALL",
    "peak GPU per host": "SELECT host, max(used_bytes) FROM gpu_samples GROUP BY host "
    "ORDER BY host",
}
T0 = 1_780_000_000_000_000


def _events(hosts: int) -> Iterator[NewEvent]:
    """Request traffic with a crash-and-restart every so often, and GPU samples."""
    i = 0
    while True:
        host = f"node-{i % hosts:03d}"
        unit = f"vllm-{i % 3}.service"
        t = T0 + i * 10_000
        stream = f"{host}/{unit}"
        if i % 4999 == 0:  # prime to the host and unit counts: crashes land everywhere
            for n, (by_systemd, message) in enumerate(
                (
                    (True, f"Started {unit} - bench."),
                    (
                        False,
                        "(Worker_TP0 pid=7) ERROR 12-01 10:00:00 [multiproc_executor.py:"
                        "671] RuntimeError: CUDA out of memory occurred when warming up "
                        "sampler with 1024 dummy requests.",
                    ),
                    (True, f"{unit}: Main process exited, code=exited, status=1/FAILURE"),
                    (True, f"{unit}: Failed with result 'exit-code'."),
                    (True, f"{unit}: Scheduled restart job, restart counter is at 1."),
                    (True, f"Started {unit} - bench."),
                    (False, "INFO:     Application startup complete."),
                )
            ):
                yield journal_event(host, unit, t + n * 1000, i * 10 + n, message, by_systemd)
        elif i % 10 == 0:
            yield NewEvent.model_validate(
                {
                    "stream": f"{host}/gpu{i % 8}",
                    "time_us": t,
                    "source": "bench-gpu",
                    "key": i,
                    "payload": {
                        "type": "gpu.sampled",
                        "origin": "nvml",
                        "host": host,
                        "index": i % 8,
                        "memory_total_bytes": 96 << 30,
                        "memory_used_bytes": (i % 96) << 30,
                        "memory_free_bytes": (96 - i % 96) << 30,
                    },
                }
            )
        else:
            yield NewEvent.model_validate(
                {
                    "stream": stream,
                    "time_us": t,
                    "source": "bench",
                    "key": i * 10,
                    "payload": {
                        "type": "log.recorded",
                        "origin": "journald",
                        "host": host,
                        "unit": unit,
                        "message": f'INFO:     10.0.0.1:{i % 60000} - "POST /v1/completions '
                        'HTTP/1.1" 200 OK',
                    },
                }
            )
        i += 1


def build(store: EventStore, hosts: int, total: int) -> float:
    started = time.perf_counter()
    source = _events(hosts)
    left = total
    while left > 0:
        batch = list(islice(source, min(5000, left)))
        store.append(batch)
        left -= len(batch)
        if (total - left) % 1_000_000 == 0:
            print(
                f"  {total - left:,} events appended, {time.perf_counter() - started:.0f} s",
                file=sys.stderr,
                flush=True,
            )
    appended = time.perf_counter()
    Processor(store).run(final=True)
    print(
        f"  folded and diagnosed in {time.perf_counter() - appended:.0f} s",
        file=sys.stderr,
        flush=True,
    )
    return time.perf_counter() - started


def timed(fn: object) -> float:
    started = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--pg", help="also a PostgreSQL store at this URL (a fresh schema)")
    parser.add_argument(
        "--workdir",
        type=Path,
        help="keep the SQLite store here (default: a temporary folder, removed); "
        "stores already built to --events are timed again, not rebuilt",
    )
    parser.add_argument("--report", action="store_true", help="end with bench/report.py's line")
    args = parser.parse_args()
    report: list[Figure] = []
    tmp = args.workdir or Path(tempfile.mkdtemp(prefix="advisor-analytics-"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        stores = {"sqlite": f"sqlite:///{tmp / 'bench.db'}"}
        if args.pg:
            stores["postgresql"] = args.pg
        for name, url in stores.items():
            store = open_store(url)
            held = last_seq(store)
            if held >= args.events:
                print(f"{name}: reusing the {held:,} events already there", flush=True)
            elif held:
                raise SystemExit(
                    f"{redact(url)} holds {held:,} events, fewer than --events: "
                    "start from an empty store"
                )
            else:
                took = build(store, args.hosts, args.events)
                print(f"{name}: built {args.events:,} events and projections in {took:.0f} s")
                report.append(build_figure(name, args.events, took))
            store.close()
        # Every store is closed, and none is opened again through sqlite3: DuckDB may read
        # the SQLite one in this process (advisor.reports.apart), timing DuckDB's own work.
        enter_apart()
        export = tmp / "export"
        shutil.rmtree(export, ignore_errors=True)
        started = time.perf_counter()
        export_parquet(stores["sqlite"], export)
        print(f"exported to Parquet in {time.perf_counter() - started:.0f} s", flush=True)
        floor = duckdb.connect()
        floor.execute(
            f"CREATE VIEW events AS SELECT * FROM read_parquet('{export}/events/**/*"
            ".parquet', hive_partitioning = true)"
        )
        for view in ("runs", "incidents", "actions", "gpu_samples"):
            floor.execute(
                f"CREATE VIEW {view} AS SELECT * FROM read_parquet('{export}/{view}.parquet')"
            )
        floor.execute(
            "CREATE VIEW log_lines AS SELECT seq, host, time, json_extract_string("
            "payload, '$.message') AS message FROM events WHERE type = "
            "'log.recorded'"
        )
        floors = {
            q: timed(lambda sql=sql: floor.execute(sql).fetchall()) for q, sql in QUERIES.items()
        }
        targets = [("parquet", lambda: connect_parquet(export))] + [
            (name, lambda url=url: connect_store(url)) for name, url in stores.items()
        ]
        for name, connect in targets:
            conn = connect()
            took = timed(lambda conn=conn: stats(conn))
            target = 2.0 if name == "parquet" else 10.0
            met = took < target
            limit = f"< {target:.0f} s"
            report.append(Figure("analytics", f"stats on {name}", took, "s", limit, met))
            print(
                f"{name:<10} stats {took:6.2f} s (target < {target:.0f} s: "
                f"{'met' if took < target else 'MISSED'})"
            )
            for q, sql in QUERIES.items():
                t = timed(lambda conn=conn, sql=sql: conn.query(sql))
                print(
                    f"{name:<10} {q:<24} {t:6.2f} s  ({t / max(floors[q], 1e-6):5.1f}× "
                    f"DuckDB on Parquet, {floors[q]:.2f} s)"
                )
            conn.close()
    finally:
        if args.workdir is None:
            shutil.rmtree(tmp, ignore_errors=True)
    if args.report:
        emit(report)
    return 0


def build_figure(name: str, events: int, seconds: float) -> Figure:
    """The build's time per million events; the target (PostgreSQL only): 10,000,000 events
    stored, folded and diagnosed in under 300 s."""
    per_million = seconds / events * 1_000_000
    return Figure(
        "analytics",
        f"{name} build (append, fold, diagnose)",
        per_million,
        "s per 1M events",
        "<= 30 s per 1M (10M in 300 s)" if name == "postgresql" else "(none)",
        per_million <= 30 or name != "postgresql",
    )


if __name__ == "__main__":
    sys.exit(main())
