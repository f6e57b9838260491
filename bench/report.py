"""Every speed benchmark at one chosen size, and one table of what they measured: figure,
target, the floor it is measured against in the same run, the ratio, and whether it holds.

    .venv/bin/python bench/report.py                       # 300,000 lines, the 5-minute soak
    .venv/bin/python bench/report.py --lines 1000000 --soak-seconds 7200 --pg URL
    .venv/bin/python bench/report.py --only ingest classify --markdown

Each benchmark runs as its own process with `--report` (its own output goes to stderr as it
comes); the figures it prints last (bench/figures.py) make the table. Exit status: 0 when
every target holds, 1 when one is missed, 2 when a benchmark failed to run.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from figures import Figure, parse  # noqa: E402


@dataclass(frozen=True)
class Bench:
    name: str
    argv: tuple[str, ...]  # formatted with the options: {lines}, {crashes}, {incidents}…
    pg_argv: tuple[str, ...] = ()  # added with --pg ({pg}: a database of the bench's own)
    pg_fresh: bool = False  # that database dropped and made again before each run


BENCHES = (
    Bench("ingest", ("bench/ingest.py", "--lines", "{lines}")),
    Bench("diagnose", ("bench/diagnose.py", "--events", "{lines}"), ("--pg", "{pg}")),
    Bench("classify", ("bench/classify.py", "--lines", "{lines}")),
    Bench("classify_memory", ("bench/classify_memory.py", "--lines", "{lines}")),
    Bench("latency", ("bench/latency.py", "--crashes", "{crashes}")),
    Bench("long_run", ("bench/long_run.py", "--lines", "{lines}")),
    Bench(
        "soak",
        ("bench/soak.py", "--duration", "{soak_seconds}", "--rate", "2000"),
    ),
    Bench("idle", ("bench/soak.py", "--duration", "{idle_seconds}", "--rate", "200")),
    Bench(
        "analytics", ("bench/analytics.py", "--events", "{lines}"), ("--pg", "{pg}"), pg_fresh=True
    ),
    Bench("console", ("bench/console.py", "--incidents", "{incidents}", "--repeat", "10")),
    Bench("explain_html", ("bench/explain_html.py",)),
    Bench("startup", ("bench/startup.py",)),
    Bench("fleet", ("bench/fleet.py", "--seconds", "60"), ("--url", "{pg}")),
    Bench("central_scale", ("bench/central_scale.py", "--repeat", "3"), ("--db", "{pg}")),
    Bench("fetch", ("bench/fetch.py",), ("--url", "{pg}")),
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lines", type=int, default=300_000, help="journal lines / store events")
    p.add_argument("--crashes", type=int, default=30, help="crashes timed by latency.py")
    p.add_argument("--soak-seconds", type=int, default=300, help="watch at 2,000 lines/s")
    p.add_argument("--idle-seconds", type=int, default=120, help="watch at 200 lines/s")
    p.add_argument("--incidents", type=int, default=2000, help="the console's store")
    p.add_argument(
        "--pg",
        help="also PostgreSQL: a server URL; each benchmark gets a database of its own there "
        "(bench_report_NAME, made if missing: the user needs CREATEDB)",
    )
    p.add_argument("--only", nargs="+", choices=[b.name for b in BENCHES], metavar="NAME")
    p.add_argument("--markdown", action="store_true", help="the table in Markdown")
    return p.parse_args(argv)


def pg_database(server: str, bench: Bench) -> str:
    """The URL of `bench`'s own database on `server`, made (or made afresh) for this run."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"bench_report_{bench.name}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            if bench.pg_fresh:
                conn.execute(text(f"DROP DATABASE IF EXISTS {name}"))
            found = conn.execute(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name})
            if found.first() is None:
                conn.execute(text(f"CREATE DATABASE {name}"))
    finally:
        admin.dispose()
    return make_url(server).set(database=name).render_as_string(hide_password=False)


def command(bench: Bench, args: argparse.Namespace) -> list[str]:
    values = {
        "lines": args.lines,
        "crashes": args.crashes,
        "soak_seconds": args.soak_seconds,
        "idle_seconds": args.idle_seconds,
        "incidents": args.incidents,
        "pg": pg_database(args.pg, bench) if args.pg and bench.pg_argv else None,
    }
    argv = [*bench.argv, *(bench.pg_argv if args.pg else ())]
    return [sys.executable, *(a.format(**values) for a in argv), "--report"]


def run(bench: Bench, args: argparse.Namespace) -> tuple[list[Figure], str | None]:
    """The benchmark's figures, or why there are none. Its output is passed on to stderr."""
    argv = command(bench, args)
    print(f"== {bench.name}: {' '.join(argv[1:])}", file=sys.stderr, flush=True)
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if not line.startswith("REPORT "):
            sys.stderr.write(line)
    if proc.wait() != 0 and not parse("".join(lines)):
        return [], f"exit {proc.returncode}"
    figures = parse("".join(lines))
    return figures, None if figures else "printed no figures"


def _number(value: float | None, unit: str = "") -> str:
    if value is None:
        return ""
    text = f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}"
    return f"{text} {unit}".strip()


def table(figures: list[Figure], failures: dict[str, str], markdown: bool) -> str:
    head = ("bench", "figure", "value", "target", "floor", "ratio", "met")
    rows = [
        (
            f.bench,
            f.name,
            _number(f.value, f.unit),
            f.target,
            f"{_number(f.floor)} {f.floor_name or ''}".strip(),
            "" if f.ratio is None else f"{f.ratio:.2f}×",
            "yes" if f.met else "NO",
        )
        for f in figures
    ]
    rows += [(name, "(did not run)", why, "", "", "", "NO") for name, why in failures.items()]
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(out + ["| " + " | ".join(r) + " |" for r in rows])
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in (head, *rows)
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    figures: list[Figure] = []
    failures: dict[str, str] = {}
    for bench in BENCHES:
        if args.only and bench.name not in args.only:
            continue
        got, failure = run(bench, args)
        figures += got
        if failure is not None:
            failures[bench.name] = failure
    print(table(figures, failures, args.markdown))
    if failures:
        return 2
    return 0 if all(f.met for f in figures) else 1


if __name__ == "__main__":
    sys.exit(main())
