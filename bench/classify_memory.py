"""Memory and speed of `advisor classify` on a large journal, streaming against the old path.

    .venv/bin/python bench/classify_memory.py [--lines 300000] [--journal FILE]
        [--floor-lines 50000] [--keep] [--report]

1. `advisor classify FILE --json` as a process (the streaming path) on `--lines` lines of a
   generated `journalctl -o json` journal (bench/journal_gen.py: three vLLM services serving
   requests for hours, with crashes and restarts): lines/s and peak RSS.
2. The old path — `read_log` (the whole file) → `diagnose` → `to_contract` — as a process on
   `--floor-lines` lines (it holds every line: about 3.7 KB of memory each), and the
   streaming path on the same lines: both figures, and whether their JSON is byte-identical.

With `--report`, `grep -E` (as bench/classify.py runs it) over the same `--lines` lines too,
and the figures last as one `REPORT` line (bench/figures.py): the streaming path's lines/s
(target ≥ 150,000), against grep -E's (target ≥ 0.5×), its peak RSS (target ≤ 256 MB).

Peak RSS is each child's own `ru_maxrss` (os.wait4). The journal is generated under a
temporary folder unless `--journal` names one (generated there if missing or too short);
with `--keep` a generated journal is left in place. The 10,000,000-line figure:

    .venv/bin/python bench/classify_memory.py --lines 10000000 --journal /tmp/j10m.jsonl
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from journal_files import ensure_journal, head

ROOT = Path(__file__).resolve().parents[1]
OLD_PATH = """
import sys
import orjson
from advisor.diagnosis.classify import diagnose
from advisor.diagnosis.model import load_model
from advisor.diagnosis.rules import load_rules
from advisor.pipeline.inputs import read_log
from advisor.reports.contract import to_contract
fmt, lines = read_log(sys.argv[1])
result = to_contract(diagnose(lines, load_rules(), load_model()), fmt)
sys.stdout.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() + "\\n")
"""


@dataclass(frozen=True)
class Measured:
    lines: int
    seconds: float
    peak_mb: float
    output: bytes

    def line(self, what: str) -> str:
        return (
            f"{what}: {self.lines:,} lines in {self.seconds:.1f} s = "
            f"{self.lines / self.seconds:,.0f} lines/s, peak RSS {self.peak_mb:.0f} MB"
        )


def measure(args: list[str], lines: int) -> Measured:
    """Run a child; its wall time, its own peak RSS and its standard output."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(args, stdout=out, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(args)} exited {proc.returncode}")
        out.seek(0)
        output = out.read()
    return Measured(lines, seconds, usage.ru_maxrss / 1024, output)


def classify(path: Path, lines: int) -> Measured:
    return measure([sys.executable, "-m", "advisor", "classify", str(path), "--json"], lines)


def old_path(path: Path, lines: int) -> Measured:
    return measure([sys.executable, "-c", OLD_PATH, str(path)], lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lines", type=int, default=300_000)
    parser.add_argument("--journal", type=Path, default=None)
    parser.add_argument("--floor-lines", type=int, default=50_000)
    parser.add_argument("--keep", action="store_true", help="keep a generated journal")
    parser.add_argument("--report", action="store_true", help="print the figures last")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        journal_path = args.journal or (ROOT / "bench/out/journal.jsonl" if args.keep else None)
        journal = ensure_journal(journal_path or tmp / "journal.jsonl", args.lines)
        sample = head(journal, args.lines, tmp / "sample.jsonl")
        streamed = classify(sample, args.lines)
        print(streamed.line("advisor classify (streaming)"))

        small = head(journal, args.floor_lines, tmp / "small.jsonl")
        old = old_path(small, args.floor_lines)
        new = classify(small, args.floor_lines)
        print(old.line("old path (read_log + diagnose)"))
        print(new.line("advisor classify (streaming)"))
        same = "byte-identical" if old.output == new.output else "DIFFERENT"
        print(f"classify --json of the {args.floor_lines:,} lines, old and streaming: {same}")
        if args.report:
            from classify import grep_floor, report  # bench/classify.py

            grep_s, given, total, _ = grep_floor(sample, tmp)
            grep_lines_s = args.lines / grep_s
            print(f"grep -E ({given} of {total} patterns): {grep_lines_s:,.0f} lines/s")
            report("classify_memory", args.lines / streamed.seconds, grep_lines_s, streamed.peak_mb)


if __name__ == "__main__":
    main()
