"""The central store at fleet scale: how the console, `stats`, `hosts` and `explain` answer on
a central PostgreSQL holding a thousand hosts' month.

    .venv/bin/python bench/central_scale.py [--hosts 1000] [--days 30] [--repeat 5] [--reuse]
        [--db postgresql+psycopg://postgres@127.0.0.1:5432/postgres] [--workdir DIR] [--report]

1. **One host-day, through the real pipeline.** A host's SQLite store gets a day of what an
   inference host logs — two vLLM services serving (routine request lines), a crash in the
   sampler warm-up now and then (restarted, healthy again), 8 GPUs sampled, the agent's
   heartbeats — is diagnosed and planned by the host (`Processor`), shipped with the fleet's
   selection (`advisor.fleet.ship`, `Selection`) to a central template database, and folded
   there: the central events and projections one host-day leaves.
2. **A thousand hosts' month, from it.** A fresh central store (`advisor db upgrade`) is
   filled in SQL from that host-day, once per host and day: host names, ids, seqs and times
   rewritten, everything else as the pipeline wrote it, the events in the order a central
   store receives them (day by day, the hosts interleaved), through the partitions the
   appender would have made. The copies' hashes are the template's: the store is for timing
   readers, `advisor verify` would refuse it.
3. **The readers, timed** as a user meets them: `advisor stats`, `hosts`, `explain` as
   processes (`--json`), and `advisor serve`'s pages over HTTP (the incident list, an
   incident, the fleet, the hosts, an event), each first request (which renders the page)
   and the median of the ones after it.

The density of a generated host-day is lower than a real one's (the template's events per
host-day are printed beside the ~24,000 the fleet bench measured): what the readers touch
grows with hosts, services, runs and incidents, which are full size here, and with the
partitions' count, which `--block` keeps to what a full-density month would make.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "bench"))

import console  # noqa: E402
import figures  # noqa: E402
from bench_events import journal_event  # noqa: E402
from fleet import ACCESS, fresh_database  # noqa: E402

from advisor.core.events import NewEvent  # noqa: E402
from advisor.fleet.selection import Selection  # noqa: E402
from advisor.fleet.ship import ship  # noqa: E402
from advisor.pipeline.processing import Processor  # noqa: E402
from advisor.store import open_store  # noqa: E402

DAY_US = 86_400 * 1_000_000
FULL_DENSITY = 24_000  # central events a host-day at the fleet's resolution (bench/fleet.py)
PARTITION_BLOCK = 10_000_000  # a partition's seqs in a central store (migration 0006)
# a reader's first answer: a command as a process (Python's start-up included), a page
TARGET_MS = {"advisor": 3_000, "console": 2_000}
TEMPLATE_HOST = "tmplhost"
UNITS = ("vllm-llama70b.service", "vllm-qwen32b.service")


def _event(stream: str, t: int, source: str, key: int, payload: dict[str, Any]) -> NewEvent:
    return NewEvent.model_validate(
        {"stream": stream, "time_us": t, "source": source, "key": key, "payload": payload}
    )


def host_day(start_us: int, args: argparse.Namespace) -> list[NewEvent]:
    """What the template host logs in one day from `start_us`, in time order."""
    rng = random.Random(7)
    out: list[NewEvent] = []
    key = 0
    for unit in UNITS:
        for t in sorted(rng.randrange(DAY_US) for _ in range(int(args.lines_per_s * 86_400))):
            key += 1
            message = ACCESS.format(
                a=rng.randrange(256), b=rng.randrange(256), p=rng.randrange(1024, 65535)
            )
            out.append(journal_event(TEMPLATE_HOST, unit, start_us + t, key, message, False))
    every = DAY_US // args.crashes
    for n in range(args.crashes):
        key += 100
        at = start_us + n * every + every // 2
        out.extend(console.crash_cycle(TEMPLATE_HOST, UNITS[n % len(UNITS)], at, key))
    pid = 4242
    for t in range(0, DAY_US, args.gpu_every_s * 1_000_000):
        for gpu in range(8):
            key += 1
            payload = {
                "type": "gpu.sampled",
                "origin": "nvml",
                "host": TEMPLATE_HOST,
                "index": gpu,
                "memory_total_bytes": 80 << 30,
                "memory_used_bytes": (60 << 30) + rng.randrange(16 << 30),
                "memory_free_bytes": 4 << 30,
                "utilization_gpu_pct": rng.randrange(100),
                "processes": [{"pid": pid, "used_bytes": 60 << 30, "unit": UNITS[gpu // 4]}],
            }
            out.append(_event(f"{TEMPLATE_HOST}/gpu{gpu}", start_us + t, "nvml", key, payload))
    for t in range(0, DAY_US, args.beat_every_s * 1_000_000):
        key += 1
        beat = {
            "type": "agent.heartbeat",
            "host": TEMPLATE_HOST,
            "agent_version": "bench",
            "interval_s": float(args.beat_every_s),
        }
        out.append(_event(f"{TEMPLATE_HOST}/@agent", start_us + t + 1, "agent", key, beat))
    out.sort(key=lambda e: e.time_us)
    return out


def build_template(url: str, work: Path, start_us: int, args: argparse.Namespace) -> None:
    """One host-day through the host's pipeline and the fleet's shipping into `url`."""
    path = work / "template-host.db"
    path.unlink(missing_ok=True)
    host_url = f"sqlite:///{path}"
    with open_store(host_url) as host, open_store(url) as central:
        events = host_day(start_us, args)
        for i in range(0, len(events), 5000):
            host.append(events[i : i + 5000])
        Processor(host).run(final=True)
        selection = Selection(gpu_every_s=args.gpu_every_s, held_every_s=args.beat_every_s)
        ship(host, central, TEMPLATE_HOST, selection=selection)


# -- 2. a thousand hosts' month, in SQL ------------------------------------------------------

PROJECTIONS = ("runs", "incidents", "actions", "gpu_samples", "run_labels")
COPIED = ("events", *PROJECTIONS, "checkpoints")
KEY_COLUMNS = ("first_key", "last_key")  # a stream-order key: 19 digits of time_us first


def _copy_template(tmpl_url: str, url: str) -> None:
    """The template's tables into schema `tmpl` of the store at `url`."""
    import psycopg

    dsn = lambda u: u.replace("postgresql+psycopg://", "postgresql://")  # noqa: E731
    with psycopg.connect(dsn(tmpl_url)) as src, psycopg.connect(dsn(url)) as dst:
        dst.execute("DROP SCHEMA IF EXISTS tmpl CASCADE")
        dst.execute("CREATE SCHEMA tmpl")
        for table in COPIED:
            dst.execute(f"CREATE TABLE tmpl.{table} (LIKE public.{table})")
            with (
                src.cursor().copy(f"COPY (SELECT * FROM {table}) TO STDOUT") as out,
                dst.cursor().copy(f"COPY tmpl.{table} FROM STDIN") as into,
            ):
                for data in out:
                    into.write(data)


def _columns(conn: Any, table: str) -> list[tuple[str, str]]:
    return [
        (str(name), str(kind))
        for name, kind in conn.execute(
            text(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_schema = 'public' AND table_name = :t ORDER BY ordinal_position"
            ),
            {"t": table},
        )
    ]


def _rewritten(table: str, column: str, kind: str) -> str:
    """The SQL expression that makes host `h`'s copy of day `:d` of a template column."""
    ref = f"t.{column}"
    if kind == "bigint" and (column == "seq" or column.endswith("_seq")):
        return f"tmpl.seqmap({ref}, :d, h.h)"
    if kind == "bigint" and column.endswith("_us"):
        return f"{ref} + :shift"
    if column in KEY_COLUMNS:
        return f"lpad((left({ref}, 19)::bigint + :shift)::text, 19, '0') || substr({ref}, 20)"
    if kind == "text":
        return f"replace(replace({ref}, '{TEMPLATE_HOST}', h.name), :tdate, :ddate)"
    return ref


def _events_day(conn: Any) -> str:
    cols = [c for c, _ in _columns(conn, "events")]
    exprs = {c: _rewritten("events", c, k) for c, k in _columns(conn, "events")}
    exprs["recorded_time_us"] = "t.event_time_us + :shift + 2000000 + h.h * 1000"
    exprs["source_id"] = "h.source_id"
    exprs["idem_key"] = "t.idem_key + :d * 1000000"
    exprs["hash"] = "t.hash"
    select = ", ".join(exprs[c] for c in cols)
    return (
        f"INSERT INTO events ({', '.join(cols)}) SELECT {select} "
        "FROM tmpl.events t CROSS JOIN tmpl.hosts h ORDER BY 1"
    )


# One host in a hundred has its newest incident still open, its plan waiting for approval.
OPEN_SOME = """
UPDATE incidents SET status = 'open', resolved_us = NULL, resolved_run_id = NULL
WHERE incident_id IN (
    SELECT DISTINCT ON (host) incident_id FROM incidents
    WHERE status = 'resolved' AND right(host, 2) = '00' ORDER BY host, opened_us DESC)"""


def generate(url: str, hosts: int, days: int, block: int, start_us: int) -> dict[str, Any]:
    """Host `h`'s copy of the template on each day: see the module's text."""
    engine = create_engine(url)
    with engine.begin() as conn:
        n = int(conn.execute(text("SELECT count(*) FROM tmpl.events")).scalar_one())
        order = [
            int(s)
            for (s,) in conn.execute(
                text("SELECT seq FROM tmpl.events ORDER BY event_time_us, seq")
            )
        ]
        position = {seq: i for i, seq in enumerate(order)}
        array = ",".join(str(position.get(s, 0)) for s in range(max(order) + 1))
        conn.execute(
            text(
                "CREATE FUNCTION tmpl.seqmap(s bigint, d int, h int) RETURNS bigint "
                "LANGUAGE sql IMMUTABLE AS "
                f"$$ SELECT ((d::bigint * {n} + (ARRAY[{array}]::int[])[s + 1]) * {hosts}"
                " + h + 1) $$"
            )
        )
        conn.execute(
            text(
                "CREATE TABLE tmpl.hosts AS SELECT h, format('gpu-node-%s', lpad(h::text, 4, "
                "'0')) AS name, 1000 + h AS source_id FROM generate_series(0, :n - 1) h"
            ),
            {"n": hosts},
        )
        conn.execute(text("INSERT INTO sources SELECT source_id, 'ship:' || name FROM tmpl.hosts"))
        conn.execute(text("UPDATE advisor_partitioning SET block = :b"), {"b": block})
        events_sql = _events_day(conn)
        projection_sql = {}
        for table in PROJECTIONS:
            cols = _columns(conn, table)
            select = ", ".join(_rewritten(table, c, k) for c, k in cols)
            projection_sql[table] = (
                f"INSERT INTO {table} ({', '.join(c for c, _ in cols)}) SELECT {select} "
                f"FROM tmpl.{table} t CROSS JOIN tmpl.hosts h"
            )
        tdate = time.strftime("%Y-%m-%dT", time.gmtime(start_us / 1e6))
    started = time.perf_counter()
    for d in range(days):
        day_start = start_us + d * DAY_US
        values = {
            "d": d,
            "shift": d * DAY_US,
            "tdate": tdate,
            "ddate": time.strftime("%Y-%m-%dT", time.gmtime(day_start / 1e6)),
        }
        with engine.begin() as conn:
            last = (d + 1) * n * hosts
            for upto in range(d * n * hosts + 900_000, last + 900_000, 900_000):
                conn.execute(text("SELECT advisor_ensure_partitions(:s)"), {"s": min(upto, last)})
            conn.execute(text(events_sql), values)
            for sql in projection_sql.values():
                conn.execute(text(sql), values)
        print(f"  day {d + 1}/{days}: {time.perf_counter() - started:.0f} s", flush=True)
    with engine.begin() as conn:
        conn.execute(text(OPEN_SOME))
        conn.execute(
            text(
                "INSERT INTO checkpoints (name, n, position, updated_time_us) SELECT name, n, "
                "jsonb_set(position::jsonb, '{seq}', to_jsonb((SELECT max(seq) FROM events)))"
                "::text, updated_time_us FROM tmpl.checkpoints WHERE name = 'projections'"
            )
        )
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE"))
        size = int(conn.execute(text("SELECT pg_database_size(current_database())")).scalar_one())
        rows = int(conn.execute(text("SELECT max(seq) FROM events")).scalar_one())
    engine.dispose()
    return {
        "events": rows,
        "bytes": size,
        "template_events": n,
        "seconds": time.perf_counter() - started,
    }


# -- 3. the readers ----------------------------------------------------------------------------


def _cli(url: str, *argv: str) -> float:
    """Seconds `advisor ARGV --db URL` takes as a process (it must succeed)."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "advisor", *argv, "--db", url],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def readers(url: str, repeat: int) -> dict[str, tuple[float, float]]:
    """(first, median of the next `repeat`) seconds of each reader a user meets."""
    engine = create_engine(url)
    with engine.connect() as conn:
        incident = conn.execute(
            text(
                "SELECT incident_id FROM incidents WHERE status = 'resolved' "
                "ORDER BY opened_seq DESC LIMIT 1"
            )
        ).scalar_one()
        seq = int(conn.execute(text("SELECT max(seq) / 2 FROM events")).scalar_one())
    engine.dispose()
    host, unit = incident.split("@")[0].split("/")
    commands = {
        "advisor stats --json": ("stats", "--json"),
        "advisor stats --since -7d --json": ("stats", "--since", "-7d", "--json"),
        "advisor hosts --json": ("hosts", "--json"),
        "advisor explain HOST/UNIT --json": ("explain", f"{host}/{unit}", "--json"),
        "advisor incidents --json": ("incidents", "--json"),
    }
    out: dict[str, tuple[float, float]] = {}
    for name, argv in commands.items():
        first = _cli(url, *argv)
        rest = [_cli(url, *argv) for _ in range(repeat)]
        out[name] = (first, statistics.median(rest))
        print(f"  {name:<36} {first:6.2f} s, then {out[name][1]:6.2f} s", flush=True)
    proc, base = console._start(url)
    try:
        quoted = urllib.parse.quote(incident, safe="")
        for name, path in (
            ("console /", "/"),
            ("console /incident/ID", f"/incident/{quoted}"),
            ("console /fleet", "/fleet"),
            ("console /hosts", "/hosts"),
            ("console /event/SEQ", f"/event/{seq}"),
        ):
            out[name] = console._time(name, base + path, repeat)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--lines-per-s", type=float, default=0.05)
    parser.add_argument("--crashes", type=int, default=4, help="crashes a host-day")
    parser.add_argument("--gpu-every-s", type=int, default=1800)
    parser.add_argument("--beat-every-s", type=int, default=600)
    parser.add_argument(
        "--block",
        type=int,
        help="seqs a partition (default: as many "
        "partitions as a month at 24,000 events a host-day would make)",
    )
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--reuse", action="store_true", help="time the store already generated")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--report", action="store_true")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="central-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    base = args.db
    name = f"advisor_scale_{args.hosts}x{args.days}"  # --reuse: the store these made
    url = base.rsplit("/", 1)[0] + "/" + name
    if not args.reuse:
        tmpl = fresh_database(base, "advisor_scale_template")
        start_us = (int(time.time()) // 86_400 - args.days) * DAY_US
        started = time.perf_counter()
        build_template(tmpl, work, start_us, args)
        print(f"template host-day: {time.perf_counter() - started:.1f} s", flush=True)
        url = fresh_database(base, name)
        open_store(url).close()
        _copy_template(tmpl, url)
        n = _count(url, "tmpl.events")
        full = FULL_DENSITY * args.hosts * args.days
        block = args.block or max(10_000, n * args.hosts * args.days * PARTITION_BLOCK // full)
        made = generate(url, args.hosts, args.days, block, start_us)
        print(
            f"generated: {made['events']:,} events ({n} a host-day; a real host-day ~"
            f"{FULL_DENSITY:,}), {made['bytes'] / 2**30:.1f} GiB, block {block:,} "
            f"({_partitions(url)} partitions), {made['seconds']:.0f} s",
            flush=True,
        )
    for table in ("runs", "incidents", "actions", "gpu_samples"):
        print(f"  {table}: {_count(url, table):,} rows")
    times = readers(url, args.repeat)
    if args.report:
        figures.emit(
            [
                figures.Figure(
                    "central_scale",
                    f"{name}, first ({args.hosts:,} hosts × {args.days} days)",
                    round(first * 1000),
                    "ms",
                    f"≤ {TARGET_MS[name.split()[0]]:,} ms",
                    first * 1000 <= TARGET_MS[name.split()[0]],
                )
                for name, (first, _) in times.items()
            ]
        )


def _partitions(url: str) -> int:
    return _count(url, "pg_inherits WHERE inhparent = 'events'::regclass")


def _count(url: str, table: str) -> int:
    engine = create_engine(url)
    with engine.connect() as conn:
        n = int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())
    engine.dispose()
    return n


if __name__ == "__main__":
    main()
