"""How fast the diagnosis path is, against `grep -E` with the rules' own patterns.

    .venv/bin/python bench/classify.py [--lines 1000000] [--journal bench/out/journal.jsonl]

1. Full path (read journald JSON → parse every line → cut runs → rules → model) over the
   journal bench/ingest.py uses (generated if missing), in lines/s.
2. `grep -E -c` with every rule `match` pattern turned into POSIX ERE, over the same file:
   the floor of "look for the patterns", and the ratio between the two.
3. `advisor classify` on a 10,000-line log as a process: wall time including start-up
   (target: under 0.5 s).
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

from journal_files import ensure_journal, head  # noqa: E402

from advisor.diagnosis.classify import diagnose  # noqa: E402
from advisor.diagnosis.model import load_model  # noqa: E402
from advisor.diagnosis.rules import load_rules  # noqa: E402
from advisor.pipeline.inputs import read_log  # noqa: E402

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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--journal", type=Path, default=ROOT / "bench" / "out" / "journal.jsonl")
    args = parser.parse_args()
    journal = ensure_journal(args.journal, args.lines)
    with tempfile.TemporaryDirectory() as tmp:
        sample = head(journal, args.lines, Path(tmp) / "sample.jsonl")
        rules, model = load_rules(), load_model()

        started = time.perf_counter()
        _, lines = read_log(str(sample))
        diagnosis = diagnose(lines, rules, model)
        full = time.perf_counter() - started
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        labels = [v.label for v in diagnosis.verdicts]
        print(
            f"full path: {len(lines):,} lines in {full:.2f} s = {len(lines) / full:,.0f} "
            f"lines/s, {len(labels)} runs, peak RSS {rss_mb:.0f} MB, model "
            f"{'on' if model else 'off'}"
        )
        del lines, diagnosis

        patterns = [p for r in rules.rules for p in r.spec.match]
        ere = [e for e in (to_ere(p) for p in patterns) if e is not None]
        pattern_file = Path(tmp) / "patterns.txt"
        pattern_file.write_text("\n".join(ere) + "\n")
        grep = shutil.which("grep") or "grep"
        started = time.perf_counter()
        done = subprocess.run(
            [grep, "-E", "-c", "-f", str(pattern_file), str(sample)],
            capture_output=True,
            text=True,
            check=False,
        )
        grep_s = time.perf_counter() - started
        print(
            f"grep -E ({len(ere)} of {len(patterns)} patterns): {grep_s:.2f} s = "
            f"{args.lines / grep_s:,.0f} lines/s, {done.stdout.strip()} matching lines"
        )
        print(f"ratio full path / grep: {full / grep_s:.1f}x the time")

        small = head(journal, 10_000, Path(tmp) / "10k.jsonl")
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


if __name__ == "__main__":
    main()
