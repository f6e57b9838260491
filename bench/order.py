"""Order independence, measured: the same journal ingested in order, newer half first, and by
four concurrent ``advisor ingest journal`` processes of consecutive slices (the newest started
first), each on a fresh store; the runs, incidents and proposed actions each way.

    python bench/order.py                                   # the seed scenario, SQLite
    python bench/order.py --db postgresql+psycopg://postgres@127.0.0.1:5432/test
    python bench/order.py --journal J.jsonl --json          # another journal
    python bench/order.py --lines 300000                    # a journal_gen journal

With PostgreSQL each store is a fresh schema of that database, dropped afterwards. Counts:
`runs` rows; incidents open or resolved (`superseded`: ids named on partial data that are no
incident of the whole); `action.proposed` events, and those of open or resolved incidents.
"""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys
import time
import uuid

ROOT = pathlib.Path(__file__).resolve().parent.parent
if sys.path and pathlib.Path(sys.path[0]).resolve() == ROOT / "bench":
    sys.path[0] = str(ROOT)  # run as a script: bench/ingest.py would shadow `ingest`

import orjson  # noqa: E402
from sqlalchemy import create_engine, text  # noqa: E402

from advisor.store import open_store  # noqa: E402
from advisor.views.read.reading import read_rows  # noqa: E402
from bench import journal_gen  # noqa: E402

SEED = ROOT / "tests" / "fixtures" / "seed-minimax-m25.journal.jsonl"


def ingest(path: pathlib.Path, url: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "advisor", "ingest", "journal", "--file", str(path), "--db", url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def wait(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"advisor ingest failed: {err.decode().strip()}")


def counts(url: str) -> dict[str, int]:
    with open_store(url) as store:
        incidents = read_rows(store, "incidents")
        current = {i["incident_id"] for i in incidents if i["status"] != "superseded"}
        actions = read_rows(store, "actions")
        return {
            "runs": len(read_rows(store, "runs")),
            "incidents": len(current),
            "superseded": len(incidents) - len(current),
            "proposed": len(actions),
            "proposed_current": sum(1 for a in actions if a["incident_id"] in current),
        }


class Stores:
    """Fresh stores: SQLite files in `work`, or schemas of one PostgreSQL database."""

    def __init__(self, base: str | None, work: pathlib.Path) -> None:
        self.base, self.work, self.schemas = base, work, []  # type: list[str]

    def new(self, name: str) -> str:
        if self.base is None:
            path = self.work / f"{name}.db"
            path.unlink(missing_ok=True)
            url = f"sqlite:///{path}"
        else:
            schema = f"order_{name}_{uuid.uuid4().hex[:8]}"
            engine = create_engine(self.base)
            with engine.begin() as conn:
                conn.execute(text(f'CREATE SCHEMA "{schema}"'))
            engine.dispose()
            self.schemas.append(schema)
            sep = "&" if "?" in self.base else "?"
            url = f"{self.base}{sep}options=-csearch_path%3D{schema}"
        open_store(url).close()  # created before the ingesters start
        return url

    def drop(self) -> None:
        if self.base is None or not self.schemas:
            return
        engine = create_engine(self.base)
        with engine.begin() as conn:
            for schema in self.schemas:
                conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        engine.dispose()


def slices(lines: list[bytes], parts: int, work: pathlib.Path, name: str) -> list[pathlib.Path]:
    size = -(-len(lines) // parts)
    paths = []
    for i in range(parts):
        path = work / f"{name}{i}.jsonl"
        path.write_bytes(b"".join(lines[i * size : (i + 1) * size]))
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--journal", type=pathlib.Path, default=SEED)
    parser.add_argument("--lines", type=int, help="generate a journal_gen journal of N lines")
    parser.add_argument("--db", help="a PostgreSQL URL (default: SQLite files)")
    parser.add_argument("--workdir", type=pathlib.Path, default=ROOT / "bench" / "out" / "order")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    work = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    journal = args.journal
    if args.lines:
        journal = work / f"journal-{args.lines}.jsonl"
        if not journal.exists():
            journal_gen.write_journal(journal, args.lines)
    lines = journal.read_bytes().splitlines(keepends=True)
    stores = Stores(args.db, work)
    figures: dict[str, dict[str, float]] = {}
    try:
        url = stores.new("in_order")
        start = time.perf_counter()
        wait([ingest(journal, url)])
        figures["in order"] = {**counts(url), "seconds": round(time.perf_counter() - start, 1)}

        url = stores.new("newer_half_first")
        first, second = slices(lines, 2, work, "half")
        start = time.perf_counter()
        wait([ingest(second, url)])
        wait([ingest(first, url)])
        figures["newer half first"] = {
            **counts(url),
            "seconds": round(time.perf_counter() - start, 1),
        }

        url = stores.new("concurrent")
        parts = slices(lines, 4, work, "quarter")
        start = time.perf_counter()
        procs = []
        for path in reversed(parts):
            procs.append(ingest(path, url))
            time.sleep(0.05)
        wait(procs)
        figures["4 concurrent slices"] = {
            **counts(url),
            "seconds": round(time.perf_counter() - start, 1),
        }
    finally:
        stores.drop()
    if args.json:
        print(
            orjson.dumps(
                {
                    "journal": str(journal),
                    "lines": len(lines),
                    "engine": "postgresql" if args.db else "sqlite",
                    "figures": figures,
                }
            ).decode()
        )
        return 0
    print(f"{journal} ({len(lines):,} lines), {'PostgreSQL' if args.db else 'SQLite'}")
    print(
        f"{'':22} {'runs':>7} {'incidents':>9} {'superseded':>10} {'proposed':>8} "
        f"{'of current':>10} {'s':>6}"
    )
    for name, f in figures.items():
        print(
            f"{name:22} {f['runs']:>7} {f['incidents']:>9} {f['superseded']:>10} "
            f"{f['proposed']:>8} {f['proposed_current']:>10} {f['seconds']:>6}"
        )
    same = len({(f["runs"], f["incidents"], f["proposed_current"]) for f in figures.values()})
    return 0 if same == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
