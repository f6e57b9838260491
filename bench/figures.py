"""The rows bench/report.py gathers: each benchmark run with `--report` prints its figures as
one JSON line, last on stdout, prefixed `REPORT `; report.py runs the benchmarks and prints
one table of them.

A row is a measured figure, its target, and the floor it is measured against in the same run
(DuckDB's `read_json`, `grep -E`, `journalctl -o export`…) where the target is a ratio to one.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

PREFIX = "REPORT "


@dataclass(frozen=True)
class Figure:
    """`value` in `unit`; `target` as text ("≥ 1.0× DuckDB", "≤ 200 MB"); `met` whether the
    target holds; `floor` and `ratio` (value / floor, or floor / value for times) where the
    target is measured against another program in the same run."""

    bench: str
    name: str
    value: float
    unit: str
    target: str
    met: bool
    floor: float | None = None
    floor_name: str | None = None
    ratio: float | None = None


def emit(figures: list[Figure]) -> None:
    """Print the report line (call last, after the benchmark's own human-readable output)."""
    print(PREFIX + json.dumps([asdict(f) for f in figures]), flush=True)


def parse(stdout: str) -> list[Figure]:
    """The figures of one benchmark's output (its last `REPORT ` line); none if it has none."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(PREFIX):
            return [Figure(**row) for row in json.loads(line[len(PREFIX) :])]
    return []
