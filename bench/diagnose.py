"""How fast `advisor diagnose` folds a store's events into runs and incidents and classifies
the ended runs, on SQLite and (with --pg) PostgreSQL.

    .venv/bin/python bench/diagnose.py --events 100000
    .venv/bin/python bench/diagnose.py --events 200000 --report \
        --pg postgresql+psycopg://postgres@127.0.0.1:5432/bench_diag

The first N lines of the generated journal (bench/journal_gen.py, made once) are stored with
`advisor ingest journal --no-diagnose`, once per size and kept (SQLite: a base database file;
PostgreSQL: the database --pg names, which must be empty or hold exactly those N events).
Each timed run diagnoses a fresh copy of that store (a file copy; `CREATE DATABASE … TEMPLATE`
on PostgreSQL, so --pg's user needs CREATEDB) as a process, `advisor diagnose --db URL`, wall
time including start-up; the start-up alone (diagnose on a store with nothing left to do) is
printed too, and the figure without it.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy import create_engine, make_url, text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

try:
    from bench import figures
except ImportError:  # run as a script: python bench/diagnose.py
    import figures  # type: ignore[no-redef]

from journal_files import ensure_journal, head  # noqa: E402

TARGET_SQLITE = 200_000  # events/s
TARGET_PG = 50_000


def advisor(*args: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds) `advisor ARGS` took as a process (it must succeed). The
    CPU time (user + system, its children's included) says more than the wall time on a
    machine others share."""
    exe = Path(sys.prefix) / "bin" / "advisor"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "advisor"]
    before = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.run([*cmd, *args], capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    cpu = _children_cpu() - before
    if proc.returncode != 0:
        sys.exit(f"advisor {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return seconds, cpu


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def journal_of(workdir: Path, events: int) -> Path:
    full = ensure_journal(workdir / "journal.jsonl", events)
    return head(full, events, workdir / f"journal-{events}.jsonl")


def sqlite_base(workdir: Path, journal: Path, events: int) -> Path:
    base = workdir / f"diagnose-{events}.db"
    if not base.exists():
        print(f"storing {events:,} events into {base} ...", file=sys.stderr)
        tmp = base.with_suffix(".tmp")
        tmp.unlink(missing_ok=True)
        advisor(
            "ingest", "journal", "--file", str(journal), "--no-diagnose", "--db", f"sqlite:///{tmp}"
        )
        tmp.rename(base)
    return base


Timing = tuple[tuple[float, float], tuple[float, float]]  # (diagnose, start-up): (wall, CPU)


def time_sqlite(base: Path, workdir: Path) -> Timing:
    """`advisor diagnose` on a copy of `base`, and its start-up (diagnose with nothing to do)."""
    work = workdir / "diagnose-work.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{work}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(base, work)
    url = f"sqlite:///{work}"
    seconds = advisor("diagnose", "--db", url)
    idle = advisor("diagnose", "--db", url)
    return seconds, idle


def pg_admin(url: str, *statements: str) -> None:
    engine = create_engine(make_url(url).set(database="postgres"), isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        for statement in statements:
            conn.execute(text(statement))
    engine.dispose()


def pg_events(url: str) -> int:
    engine = create_engine(url)
    with engine.connect() as conn:
        found = conn.execute(text("SELECT to_regclass('events') IS NOT NULL")).scalar()
        n = int(conn.execute(text("SELECT count(*) FROM events")).scalar() or 0) if found else 0
    engine.dispose()
    return n


def time_pg(url: str, journal: Path, events: int) -> Timing:
    held = pg_events(url)
    if held == 0:
        print(f"storing {events:,} events into {url} ...", file=sys.stderr)
        advisor("ingest", "journal", "--file", str(journal), "--no-diagnose", "--db", url)
    elif held != events:
        sys.exit(f"{url} holds {held:,} events, not {events:,}: give --pg an empty database")
    base = make_url(url)
    work = base.set(database=f"{base.database}_work")
    pg_admin(
        url,
        f'DROP DATABASE IF EXISTS "{work.database}"',
        f'CREATE DATABASE "{work.database}" TEMPLATE "{base.database}"',
    )
    work_url = work.render_as_string(hide_password=False)
    seconds = advisor("diagnose", "--db", work_url)
    idle = advisor("diagnose", "--db", work_url)
    pg_admin(url, f'DROP DATABASE IF EXISTS "{work.database}"')
    return seconds, idle


def line(name: str, events: int, timing: Timing) -> tuple[float, float]:
    """Print the figures of one store; (events/s, events/s of CPU time)."""
    (seconds, cpu), (idle, idle_cpu) = timing
    rate = events / seconds
    print(
        f"advisor diagnose {name} (fold {events:,} events, classify the ended runs): "
        f"{seconds:.2f} s = {rate:,.0f} events/s (CPU {cpu:.2f} s = {events / cpu:,.0f} "
        f"events/s); start-up {idle:.2f} s (CPU {idle_cpu:.2f} s), without it "
        f"{events / max(seconds - idle, 1e-9):,.0f} events/s"
    )
    return rate, events / cpu


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out")
    parser.add_argument("--pg", help="PostgreSQL URL of a scratch database for the store")
    parser.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only")
    parser.add_argument("--report", action="store_true", help="print the figures for report.py")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    journal = journal_of(args.workdir, args.events)
    rows: list[figures.Figure] = []
    if not args.no_sqlite:
        timing = time_sqlite(sqlite_base(args.workdir, journal, args.events), args.workdir)
        rows += _figures("SQLite", line("SQLite", args.events, timing), TARGET_SQLITE)
    if args.pg:
        timing = time_pg(args.pg, journal, args.events)
        rows += _figures("PostgreSQL", line("PostgreSQL", args.events, timing), TARGET_PG)
    if args.report:
        figures.emit(rows)


def _figures(store: str, rates: tuple[float, float], target: int) -> list[figures.Figure]:
    """Wall time's events/s, and CPU time's (what the target means on a machine others share
    too)."""
    return [
        figures.Figure(
            bench="diagnose",
            name=f"advisor diagnose, {store}{kind}",
            value=round(rate),
            unit="events/s",
            target=f"≥ {target:,} events/s",
            met=rate >= target,
        )
        for kind, rate in zip(("", " (CPU time)"), rates, strict=True)
    ]


if __name__ == "__main__":
    main()
