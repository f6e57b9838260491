"""Where `bench/analytics.py`'s PostgreSQL build goes: its events made, validated, appended
(this process's CPU and the server backend's, read from /proc), then folded and diagnosed.

    .venv/bin/python bench/build_split.py --events 100000 \
        --pg postgresql+psycopg://postgres@127.0.0.1:5432/postgres [--no-fold]

Creates (and drops first) the database `bench_build_split` on that server (CREATEDB needed);
the server must run on this machine for its CPU to be read. Figures are per 1,000,000 events.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from itertools import islice
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import psycopg  # noqa: E402
from analytics import _events  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from advisor.core.events import prepare_events  # noqa: E402
from advisor.pipeline.processing import Processor  # noqa: E402
from advisor.store import open_store  # noqa: E402

DATABASE = "bench_build_split"


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def server_cpu(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--pg", required=True, help="a server URL (its database is not used)")
    parser.add_argument("--no-fold", action="store_true")
    args = parser.parse_args()
    admin_url = make_url(args.pg).set(drivername="postgresql")
    with psycopg.connect(admin_url.render_as_string(hide_password=False), autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        c.execute(f"CREATE DATABASE {DATABASE}")
        store = open_store(make_url(args.pg).set(database=DATABASE).render_as_string(False))
        per = 1_000_000 / args.events

        def backends() -> list[int]:
            query = "SELECT pid FROM pg_stat_activity WHERE datname = %s"
            return [pid for (pid,) in c.execute(query, (DATABASE,))]

        t0, c0 = time.perf_counter(), cpu()
        source, batches, left = _events(20), [], args.events
        while left > 0:
            batches.append(list(islice(source, min(5000, left))))
            left -= len(batches[-1])
        t1, c1 = time.perf_counter(), cpu()
        prepared = [prepare_events(batch) for batch in batches]
        t2, c2 = time.perf_counter(), cpu()
        s2 = server_cpu(backends())
        for batch in prepared:
            store.append_prepared(batch)
        t3, c3, s3 = time.perf_counter(), cpu(), server_cpu(backends())
        print(f"per 1M events ({args.events:,} built), seconds of wall / this process's CPU:")
        print(f"  make the events (bench)  {per * (t1 - t0):6.1f} / {per * (c1 - c0):5.1f}")
        print(f"  validate (prepare)       {per * (t2 - t1):6.1f} / {per * (c2 - c1):5.1f}")
        print(
            f"  append                   {per * (t3 - t2):6.1f} / {per * (c3 - c2):5.1f}"
            f"   (server CPU {per * (s3 - s2):.1f})"
        )
        if not args.no_fold:
            Processor(store).run(final=True)
            t4, c4 = time.perf_counter(), cpu()
            print(f"  fold and diagnose        {per * (t4 - t3):6.1f} / {per * (c4 - c3):5.1f}")
        store.close()
        c.execute(f"DROP DATABASE IF EXISTS {DATABASE}")


if __name__ == "__main__":
    main()
