"""The HTML post-mortem's cost: `advisor explain SERVICE --format html --out FILE` as a
process, its wall time and the size of the file it writes.

    .venv/bin/python bench/explain_html.py [--runs 5] [--db URL --service UNIT] [--report]

Without `--db` it ingests the seed scenario (tests/fixtures: its journal and nvidia-smi CSV,
eight GPUs) into a fresh SQLite store in a temporary folder; with `--db` it times that store
(say one `advisor demo --yes --db URL` left, whose incident also has actions). The floor is
the same command writing the text post-mortem (`--format text`): what the charts and the
page add is the difference. Targets: at most 1 s and 1.5 MB, one self-contained file.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from figures import Figure, emit  # noqa: E402

SEED = ROOT / "tests" / "fixtures" / "seed-minimax-m25"
UNIT = "vllm-minimax-m25.service"
LIMIT_S = 1.0
LIMIT_BYTES = 1_500_000


def advisor(*args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "advisor", *args],
        cwd=ROOT,
        check=True,
        text=True,
        stdout=subprocess.DEVNULL,
    )


def seed_store(folder: Path) -> str:
    """A SQLite store holding the seed scenario with its GPU samples."""
    url = f"sqlite:///{folder / 'events.db'}"
    advisor("ingest", "journal", "--file", f"{SEED}.journal.jsonl", "--db", url)
    advisor("ingest", "nvidia-smi", f"{SEED}.nvidia-smi.csv", "--host", "gpu-node-07", "--db", url)
    return url


def timed(runs: int, *args: str) -> float:
    """The median wall time of `runs` runs of `advisor ARGS`, after one to warm the caches."""
    advisor(*args)
    took = []
    for _ in range(runs):
        start = time.perf_counter()
        advisor(*args)
        took.append(time.perf_counter() - start)
    return statistics.median(took)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5, help="timed runs of each command")
    p.add_argument("--db", help="a store to time (default: the seed scenario, ingested)")
    p.add_argument("--service", default=UNIT, help="the service to explain")
    p.add_argument("--report", action="store_true", help="end with bench/report.py's line")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-explain-") as tmp:
        folder = Path(tmp)
        url = args.db or seed_store(folder)
        page = folder / "post-mortem.html"
        html_s = timed(
            args.runs, "explain", args.service, "--format", "html", "--out", str(page), "--db", url
        )
        text_s = timed(args.runs, "explain", args.service, "--db", url)
        size = page.stat().st_size
    print(
        f"explain --format html: {html_s:.2f} s (median of {args.runs}), {size:,} bytes; "
        f"the text post-mortem: {text_s:.2f} s",
        file=sys.stderr,
    )
    if args.report:
        emit(
            [
                Figure(
                    "explain_html",
                    "explain --format html",
                    round(html_s, 3),
                    "s",
                    f"≤ {LIMIT_S:g} s",
                    html_s <= LIMIT_S,
                    round(text_s, 3),
                    "explain (text)",
                    round(text_s / html_s, 2),
                ),
                Figure(
                    "explain_html",
                    "the HTML file",
                    round(size / 1e6, 2),
                    "MB",
                    f"≤ {LIMIT_BYTES / 1e6:g} MB",
                    size <= LIMIT_BYTES,
                ),
            ]
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
