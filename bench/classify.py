"""How fast the diagnosis path is, against `grep -E` with the rules' own patterns.

    .venv/bin/python bench/classify.py [--lines 1000000] [--journal bench/out/journal.jsonl]
        [--report]

1. Full path as `advisor classify` runs it (read journald JSON a line at a time → parse
   every line → cut runs → rules → model → the report's contract; `open_log` and
   `diagnose_stream`) over the journal bench/ingest.py uses (generated if missing), in
   lines/s, and the process's peak RSS.
2. `grep -E -c` with every rule `match` pattern turned into POSIX ERE, over the same file:
   the floor of "look for the patterns", and the ratio between the two.
3. `advisor classify` on a 10,000-line log as a process: wall time including start-up
   (target: under 0.5 s).

With `--report`, the figures last, as one `REPORT` line (bench/figures.py): lines/s
(target ≥ 150,000), lines/s against grep -E's (target ≥ 0.5×), peak RSS (target ≤ 256 MB).
"""

from __future__ import annotations

import argparse
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from figures import Figure, emit  # noqa: E402
from journal_files import count_lines, ensure_journal, head  # noqa: E402

from advisor.diagnosis.model import load_model  # noqa: E402
from advisor.diagnosis.rules import load_rules  # noqa: E402
from advisor.diagnosis.stream import diagnose_stream  # noqa: E402
from advisor.pipeline.inputs import open_log  # noqa: E402
from advisor.reports.contract import to_contract  # noqa: E402

LINES_TARGET = 150_000
GREP_RATIO_TARGET = 0.5
RSS_TARGET_MB = 256

_ERE = [
    (re.compile(r"\(\?P<\w+>"), "("),
    (re.compile(r"\(\?:"), "("),
    (re.compile(r"\\d"), "[0-9]"),
    (re.compile(r"\\w"), "[[:alnum:]_]"),
    (re.compile(r"\\s"), "[[:space:]]"),
]


def to_ere(pattern: str) -> str | None:
    """A Python pattern as POSIX ERE, or None when it uses what ERE lacks (lookarounds)."""
    if "(?=" in pattern or "(?!" in pattern or "(?<" in pattern.replace("(?P<", ""):
        return None
    for rx, repl in _ERE:
        pattern = rx.sub(repl, pattern)
    return pattern


def report(bench: str, lines_s: float, grep_lines_s: float, rss_mb: float) -> None:
    """The figures as bench/report.py reads them."""
    ratio = lines_s / grep_lines_s
    emit(
        [
            Figure(
                bench,
                "classify",
                round(lines_s),
                "lines/s",
                f"≥ {LINES_TARGET:,} lines/s",
                lines_s >= LINES_TARGET,
            ),
            Figure(
                bench,
                "classify against grep -E",
                round(lines_s),
                "lines/s",
                f"≥ {GREP_RATIO_TARGET}× grep -E",
                ratio >= GREP_RATIO_TARGET,
                floor=round(grep_lines_s),
                floor_name="grep -E",
                ratio=round(ratio, 3),
            ),
            Figure(
                bench,
                "classify peak RSS",
                round(rss_mb),
                "MB",
                f"≤ {RSS_TARGET_MB} MB",
                rss_mb <= RSS_TARGET_MB,
            ),
        ]
    )


def full_path(sample: Path) -> tuple[float, int]:
    """(seconds, runs) of `advisor classify`'s path over `sample`, in this process."""
    rules, model = load_rules(), load_model()
    started = time.perf_counter()
    fmt, lines = open_log(str(sample))
    diagnosis = diagnose_stream(lines, rules, model)
    to_contract(diagnosis, fmt)
    return time.perf_counter() - started, len(diagnosis.verdicts)


def grep_floor(sample: Path, tmp: Path) -> tuple[float, int, int, str]:
    """(seconds, patterns given, patterns in all, matching lines) of `grep -E -c`."""
    patterns = [p for r in load_rules().rules for p in r.spec.match]
    ere = [e for e in (to_ere(p) for p in patterns) if e is not None]
    pattern_file = tmp / "patterns.txt"
    pattern_file.write_text("\n".join(ere) + "\n")
    grep = shutil.which("grep") or "grep"
    started = time.perf_counter()
    done = subprocess.run(
        [grep, "-E", "-c", "-f", str(pattern_file), str(sample)],
        capture_output=True,
        text=True,
        check=False,
    )
    return time.perf_counter() - started, len(ere), len(patterns), done.stdout.strip()


def start_up(journal: Path, tmp: Path) -> None:
    small = head(journal, 10_000, tmp / "10k.jsonl")
    advisor = [sys.executable, "-m", "advisor", "classify", str(small), "--json"]
    subprocess.run(advisor, capture_output=True, check=True)  # warm the page cache
    walls = []
    for _ in range(5):
        started = time.perf_counter()
        subprocess.run(advisor, capture_output=True, check=True)
        walls.append(time.perf_counter() - started)
    print(
        f"advisor classify, 10,000 lines: best {min(walls):.3f} s, median "
        f"{sorted(walls)[2]:.3f} s wall including start-up (target < 0.5 s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--journal", type=Path, default=ROOT / "bench" / "out" / "journal.jsonl")
    parser.add_argument("--report", action="store_true", help="print the figures last")
    args = parser.parse_args()
    journal = ensure_journal(args.journal, args.lines)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        sample = head(journal, args.lines, tmp / "sample.jsonl")
        n = count_lines(sample)
        full, runs = full_path(sample)
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"full path: {n:,} lines in {full:.2f} s = {n / full:,.0f} lines/s, {runs} runs, "
            f"peak RSS {rss_mb:.0f} MB"
        )
        grep_s, given, total, matching = grep_floor(sample, tmp)
        print(
            f"grep -E ({given} of {total} patterns): {grep_s:.2f} s = "
            f"{n / grep_s:,.0f} lines/s, {matching} matching lines"
        )
        print(f"ratio full path / grep: {full / grep_s:.1f}x the time")
        start_up(journal, tmp)
    if args.report:
        report("classify", n / full, n / grep_s, rss_mb)


if __name__ == "__main__":
    main()
