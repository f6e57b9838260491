"""Crash consistency: SIGKILL `advisor ingest`, `diagnose` and `ship` at random moments and
check that what survives is exactly what a run without kills leaves.

    .venv/bin/python bench/crash_consistency.py --lines 300000 --kills 30 \\
        [--pg postgresql+psycopg://postgres@127.0.0.1:5432/test] [--workdir DIR]

For each engine (SQLite, and PostgreSQL with --pg: a fresh schema of its own):

1. ingest: `advisor ingest journal --file` on a generated journal (bench/journal_gen.py), killed
   with SIGKILL after a random 0.35–1 s (the interpreter starts in about 0.3 s), started
   again, until it finishes; then every journal cursor must be stored exactly once (events =
   lines, one per idempotency key) and `advisor verify` must pass.
2. diagnose: `advisor diagnose` (the ingest ran with --no-diagnose) killed the same way until
   it finishes; the projections must equal those of a clean `rebuild` + `diagnose` of a copy
   (runs, incidents) and `verify` must pass.
3. ship (SQLite host → the PostgreSQL store, with --pg): `advisor ship --to` killed until it
   finishes; every host event must be in the central store once, and central `verify` (store
   chain and the host's own chain) must pass.

It prints one line per phase: kills, lines or events, duplicates, verify result.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from sqlalchemy import create_engine, text

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.journal_gen import write_journal

ADVISOR = [sys.executable, "-m", "advisor"]


def killed_until_done(
    argv: list[str], kills: int, rng: random.Random, env: dict[str, str]
) -> tuple[int, float]:
    """Run `argv` again and again, SIGKILLing it after a random delay, `kills` times at most;
    then let it finish. Returns (kills made, seconds)."""
    made, start = 0, time.monotonic()
    while True:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        if made < kills:
            try:
                proc.wait(timeout=rng.uniform(0.35, 1.0))
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                made += 1
                continue
        else:
            proc.wait()
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(
                f"{' '.join(argv[2:4])} failed (exit {proc.returncode}): "
                f"{err.decode().strip()[-500:]}"
            )
        return made, time.monotonic() - start


def advisor(*args: str, env: dict[str, str]) -> str:
    done = subprocess.run([*ADVISOR, *args], capture_output=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"advisor {' '.join(args[:2])} failed: {done.stderr.decode()[-500:]}")
    return done.stdout.decode()


def counts(url: str) -> tuple[int, int, int]:
    """(log events, distinct (source, key), all events)."""
    engine = create_engine(url)
    with engine.connect() as conn:
        logs = conn.execute(text("SELECT count(*) FROM events WHERE type = 'log.recorded'"))
        distinct = conn.execute(
            text("SELECT count(*) FROM (SELECT DISTINCT source_id, idem_key FROM events) k")
        )
        total = conn.execute(text("SELECT count(*) FROM events"))
        result = (int(logs.scalar_one()), int(distinct.scalar_one()), int(total.scalar_one()))
    engine.dispose()
    return result


def projection_rows(url: str) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    engine = create_engine(url)
    with engine.connect() as conn:
        runs = [
            tuple(r)
            for r in conn.execute(
                text("SELECT run_id, lines, label, incident_id FROM runs ORDER BY run_id")
            )
        ]
        incidents = [
            tuple(r)
            for r in conn.execute(
                text("SELECT incident_id, runs, status, label FROM incidents ORDER BY incident_id")
            )
        ]
    engine.dispose()
    return runs, incidents


def fresh_schema(base: str) -> str:
    schema = f"crash_{uuid.uuid4().hex[:8]}"
    engine = create_engine(base)
    with engine.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    engine.dispose()
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options=-csearch_path%3D{schema}"


def run_engine(
    name: str,
    url: str,
    journal: Path,
    lines: int,
    kills: int,
    rng: random.Random,
    env: dict[str, str],
) -> None:
    made, seconds = killed_until_done(
        [*ADVISOR, "ingest", "journal", "--file", str(journal), "--no-diagnose", "--db", url],
        kills,
        rng,
        env,
    )
    logs, distinct, total = counts(url)
    verify = advisor("verify", "--db", url, env=env).strip()
    print(
        f"{name} ingest: {made} kills over {lines} lines in {seconds:.0f} s; "
        f"{logs} log events, {total - distinct} duplicates; {verify}"
    )
    if logs != lines or distinct != total:
        raise SystemExit(
            f"{name}: {lines} lines gave {logs} log events and {total - distinct} duplicates"
        )

    made, seconds = killed_until_done([*ADVISOR, "diagnose", "--db", url], kills // 2, rng, env)
    killed = projection_rows(url)
    advisor("rebuild", "--db", url, env=env)
    advisor("diagnose", "--db", url, env=env)
    clean = projection_rows(url)
    verify = advisor("verify", "--db", url, env=env).strip()
    same = "the same as" if killed == clean else "DIFFERENT from"
    print(
        f"{name} diagnose: {made} kills in {seconds:.0f} s; {len(killed[0])} runs, "
        f"{len(killed[1])} incidents, {same} an uninterrupted rebuild; {verify}"
    )
    if killed != clean:
        raise SystemExit(f"{name}: diagnosis after kills differs from a clean one")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=300_000)
    ap.add_argument("--kills", type=int, default=30)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--pg", help="PostgreSQL base URL (a fresh schema is made in it)")
    ap.add_argument("--workdir", type=Path)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="advisor-crash-"))
    work.mkdir(parents=True, exist_ok=True)
    journal = work / "journal.jsonl"
    if not journal.exists():
        write_journal(journal, args.lines, seed=args.seed, hosts=args.hosts)
    # The host key and its heads file in the work folder, not /etc/advisor or ~/.config.
    env = {**os.environ, "ADVISOR_DB": "", "ADVISOR_KEY": str(work / "host-key")}
    sqlite = f"sqlite:///{work / f'host-{uuid.uuid4().hex[:6]}.db'}"
    run_engine("SQLite", sqlite, journal, args.lines, args.kills, rng, env)
    if args.pg:
        central = fresh_schema(args.pg)
        run_engine("PostgreSQL", fresh_schema(args.pg), journal, args.lines, args.kills, rng, env)
        advisor("db", "upgrade", "--db", central, env=env)
        made, seconds = killed_until_done(
            [*ADVISOR, "ship", "--to", central, "--host", "bench-host", "--db", sqlite],
            args.kills,
            rng,
            env,
        )
        _, _, host_total = counts(sqlite)
        _, distinct, total = counts(central)
        verify = advisor("verify", "--db", central, env=env).strip().replace("\n", "; ")
        print(
            f"ship: {made} kills in {seconds:.0f} s; {total} of {host_total} host events "
            f"central, {total - distinct} duplicates; {verify}"
        )
        if total != host_total or distinct != total:
            raise SystemExit("ship: the central store does not hold each host event once")


if __name__ == "__main__":
    main()
