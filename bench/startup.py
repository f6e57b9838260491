"""Start-up of the `advisor` command line, each case as a process, best of `--runs`, against
a bare `python -c pass` timed in the same run (the floor: what any Python program pays).

    .venv/bin/python bench/startup.py [--runs 10] [--lines 200] [--report]

Each case prints its best wall time and its least CPU time (user + system, the steadier
figure when other work shares the machine), each against the floor's.

1. `advisor --help` (`python -m advisor`, and the installed console script where there is
   one): target ≤ 5× the floor.
2. The slowest `advisor CMD --help` of a few commands (each imports its own module only):
   target ≤ 5× the floor.
3. `advisor classify` of the first `--lines` lines of a generated journal
   (bench/journal_gen.py): target ≤ 10× the floor.

With `--report`, the figures last as one `REPORT` line (bench/figures.py); the ratio is, as for
every time there, floor / value (a target of ≤ 5× the floor's time is a ratio ≥ 0.20). What a
command imports: `python -X importtime -m advisor --help` (tests/cli/test_startup.py keeps the
heavy libraries out of every `--help`).
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from figures import Figure, emit
from journal_files import ensure_journal, head

ROOT = Path(__file__).resolve().parents[1]
HELP_TARGET = 5.0  # × python -c pass
CLASSIFY_TARGET = 10.0
COMMAND_HELPS = (
    ("explain", "--help"),
    ("serve", "--help"),
    ("ingest", "journal", "--help"),
    ("classify", "--help"),
    ("query", "--help"),
    ("watch", "--help"),
)
FLOOR = "python -c pass"


def best_of(argv: Sequence[str], runs: int) -> tuple[float, float]:
    """The shortest wall time and the least CPU time (user + system) of `runs` runs of
    `argv`, in seconds (output discarded): on a busy machine the CPU time is the steadier."""
    times, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, cwd=ROOT, check=True)
        times.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return min(times), min(cpu)


def advisor(*args: str) -> list[str]:
    return [sys.executable, "-m", "advisor", *args]


def console_script() -> Path | None:
    """The `advisor` script installed beside this Python, if any."""
    script = Path(sys.executable).parent / "advisor"
    return script if script.exists() else None


def figure(name: str, seconds: float, floor: float, target: float) -> Figure:
    """A start-up time against the floor: met when it is at most `target` times the floor."""
    ratio = floor / seconds
    return Figure(
        "startup",
        name,
        round(seconds * 1000, 1),
        "ms",
        f"≤ {target:g}× {FLOOR} (ratio ≥ {1 / target:.2f})",
        ratio >= 1 / target,
        floor=round(floor * 1000, 1),
        floor_name=f"ms {FLOOR}",
        ratio=round(ratio, 3),
    )


def measure(runs: int, journal: Path) -> list[Figure]:
    """Every case, printed as it is measured."""
    floor, floor_cpu = best_of([sys.executable, "-c", "pass"], runs)
    print(f"{FLOOR}: {floor * 1000:.1f} ms (CPU {floor_cpu * 1000:.1f} ms)")
    cases = {"advisor --help": advisor("--help")}
    script = console_script()
    if script is not None:
        cases["advisor --help (console script)"] = [str(script), "--help"]
    for args in COMMAND_HELPS:
        cases[f"advisor {' '.join(args)}"] = advisor(*args)
    cases["advisor classify"] = advisor("classify", str(journal))
    both = {name: best_of(argv, runs) for name, argv in cases.items()}
    times = {name: wall for name, (wall, _) in both.items()}
    for name, (seconds, cpu) in both.items():
        print(
            f"{name}: {seconds * 1000:.1f} ms = {seconds / floor:.1f}× {FLOOR}"
            f" (CPU {cpu * 1000:.1f} ms = {cpu / floor_cpu:.1f}×)"
        )
    roots = [n for n in times if n.startswith("advisor --help")]
    slowest = max(
        (n for n in times if n.endswith(" --help") and n not in roots), key=times.__getitem__
    )
    out = [figure(n, times[n], floor, HELP_TARGET) for n in roots]
    out.append(figure(f"{slowest} (slowest CMD --help)", times[slowest], floor, HELP_TARGET))
    classify = times["advisor classify"]
    out.append(figure("advisor classify (small journal)", classify, floor, CLASSIFY_TARGET))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10, help="runs of each case (best kept)")
    parser.add_argument("--lines", type=int, default=200, help="journal lines for classify")
    parser.add_argument("--report", action="store_true", help="print the figures last")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        journal = head(ensure_journal(tmp / "journal.jsonl", args.lines), args.lines, tmp / "j")
        figures = measure(args.runs, journal)
    if args.report:
        emit(figures)


if __name__ == "__main__":
    main()
