"""Crash → diagnosis after a long run: does judging a run cost its length?

    .venv/bin/python bench/long_run.py [--lines 100000] [--report]

The generated journal's first N lines (bench/journal_gen.py: one host, three vLLM services
serving requests; none of them ends) are appended to a fresh SQLite store in batches of
2,500, each followed by the pass `advisor watch` runs after a commit (fold, diagnose, plan).
Then one service crashes: a CUDA out-of-memory traceback and systemd's exit and failure lines
for its invocation. The figure is the time of the pass that diagnoses and plans it — the run
it judges holds about a third of the N lines.

It runs twice, each time in a process of its own: with the fold's parsed lines held for the
diagnoser (`diagnosis.held`, the default) and with none held (`held_lines=0`: the run's lines
are read back from the store and parsed again, as before issue 24 item 3). It also prints
what holding costs while the lines come: the CPU of the passes per line.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

try:
    from bench import figures
except ImportError:  # run as a script: python bench/long_run.py
    import figures  # type: ignore[no-redef]

sys.path.append(str(ROOT / "bench"))
from journal_files import ensure_journal  # noqa: E402

from advisor.core.events import NewEvent, validate_batch  # noqa: E402
from advisor.diagnosis.held import HELD_LINES  # noqa: E402
from advisor.pipeline.processing import Processor  # noqa: E402
from advisor.store import open_store  # noqa: E402
from ingest.journal import json_line_record  # noqa: E402

BATCH = 2_500
UNIT = "vllm-llama8b.service"
TARGET_MS = 50.0


def journal_events(path: Path, lines: int) -> Iterator[list[NewEvent]]:
    """The journal's first `lines` entries as events, a batch at a time."""
    with path.open("rb") as f:
        numbered = enumerate(islice(f, lines), 1)
        while batch := list(islice(numbered, BATCH)):
            records = [json_line_record(line, n) for n, line in batch]
            yield validate_batch([r.event for r in records if r.event is not None])


def crash_entries(path: Path, lines: int) -> list[dict[str, str]]:
    """UNIT's CUDA OOM and its end, after the last of the first `lines` entries."""
    last: dict[str, str] | None = None
    newest = 0
    with path.open("rb") as f:
        for line in islice(f, lines):
            entry = orjson.loads(line)
            newest = max(newest, int(entry["__REALTIME_TIMESTAMP"]))
            if entry.get("_SYSTEMD_UNIT") == UNIT:
                last = entry
    if last is None:
        sys.exit(f"the journal's first {lines} lines hold none of {UNIT}")
    own = {k: v for k, v in last.items() if k.startswith("_") and not k.startswith("__")}
    pid1 = {
        "_PID": "1",
        "_TRANSPORT": "journal",
        "SYSLOG_IDENTIFIER": "systemd",
        "UNIT": UNIT,
        "INVOCATION_ID": own["_SYSTEMD_INVOCATION_ID"],
        "_HOSTNAME": own["_HOSTNAME"],
    }
    texts = [
        (own, "ERROR 02-20 22:00:00 [core.py:588] EngineCore encountered a fatal error."),
        (own, "Traceback (most recent call last):"),
        (own, '  File "/opt/vllm/vllm/v1/engine/core.py", line 579, in run_engine_core'),
        (own, "    engine_core.run_busy_loop()"),
        (own, '  File "/opt/vllm/vllm/v1/worker/gpu_model_runner.py", line 1210, in execute_model'),
        (own, "    hidden_states = self.model("),
        (
            own,
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has "
            "a total capacity of 79.19 GiB of which 1.06 GiB is free. Including non-PyTorch "
            "memory, this process has 78.11 GiB memory in use.",
        ),
        (pid1, f"{UNIT}: Main process exited, code=exited, status=1/FAILURE"),
        (pid1, f"{UNIT}: Failed with result 'exit-code'."),
    ]
    return [
        {
            **fields,
            "MESSAGE": text,
            "__REALTIME_TIMESTAMP": str(newest + 1000 * (n + 1)),
            "__CURSOR": f"s=bench;i={0xF00000 + n:x}",
        }
        for n, (fields, text) in enumerate(texts)
    ]


def one_case(path: Path, lines: int, held: int, folder: Path) -> dict[str, float]:
    store = open_store(f"sqlite:///{folder / f'held-{held}.db'}")
    try:
        processor = Processor(store, held_lines=held)
        cpu = 0.0
        for batch in journal_events(path, lines):
            store.append(batch)
            start = time.process_time()
            processor.run(final=False)
            cpu += time.process_time() - start
        crash = [
            json_line_record(orjson.dumps(e), n).event
            for n, e in enumerate(crash_entries(path, lines))
        ]
        store.append(validate_batch([e for e in crash if e is not None]))
        start, start_cpu = time.perf_counter(), time.process_time()
        report = processor.run(final=False)
        wall = time.perf_counter() - start
        crash_cpu = time.process_time() - start_cpu
        judged = dict(processor.diagnoser.judged_from)
        if report.diagnosis_events == 0:
            sys.exit(f"the crash was not diagnosed (held_lines={held}): {report}")
        return {
            "pass_ms": wall * 1000,
            "pass_cpu_ms": crash_cpu * 1000,
            "fold_us_per_line": cpu / lines * 1e6,
            "held": judged.get("held", 0),
            "read": judged.get("read", 0),
        }
    finally:
        store.close()


def case_in_a_process(path: Path, lines: int, held: int) -> dict[str, float]:
    argv = [sys.executable, __file__, "--lines", str(lines), "--case", str(held), str(path)]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    result: dict[str, float] = json.loads(proc.stdout.splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out")
    parser.add_argument("--report", action="store_true")
    parser.add_argument(
        "--case", nargs=2, metavar=("HELD_LINES", "JOURNAL"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.case:  # one case, in this process: its figures as JSON
        with tempfile.TemporaryDirectory() as tmp:
            case = one_case(Path(args.case[1]), args.lines, int(args.case[0]), Path(tmp))
        print(json.dumps(case))
        return 0
    args.workdir.mkdir(parents=True, exist_ok=True)
    path = ensure_journal(args.workdir / "journal.jsonl", args.lines)
    read = case_in_a_process(path, args.lines, 0)
    held = case_in_a_process(path, args.lines, HELD_LINES)
    for name, case in (("lines read back", read), ("lines held", held)):
        print(
            f"{name:>16}: crash pass {case['pass_ms']:8.1f} ms ({case['pass_cpu_ms']:.1f} ms CPU);"
            f" passes while the lines came {case['fold_us_per_line']:.1f} µs of CPU a line;"
            f" runs judged from held lines {case['held']:.0f}, read back {case['read']:.0f}",
            file=sys.stderr,
        )
    if args.report:
        figures.emit(
            [
                figures.Figure(
                    "long_run",
                    f"crash → plan pass after a run of ~{args.lines // 3:,} lines",
                    held["pass_ms"],
                    "ms",
                    f"≤ {TARGET_MS:g} ms",
                    held["pass_ms"] <= TARGET_MS,
                    read["pass_ms"],
                    "the run's lines read back",
                    read["pass_ms"] / held["pass_ms"],
                ),
                figures.Figure(
                    "long_run",
                    "fold, diagnose and plan while the lines come (CPU a line)",
                    held["fold_us_per_line"],
                    "µs",
                    "(what holding costs)",
                    True,
                    read["fold_us_per_line"],
                    "nothing held",
                    read["fold_us_per_line"] / held["fold_us_per_line"],
                ),
            ]
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
