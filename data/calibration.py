"""The reliability diagram of docs/calibration.md: `advisor model evaluate --hold-out shapes
--calibration --json` written as Markdown tables (one per label source: rules and model
combined, the model alone), with the accuracy at or above each threshold.

    .venv/bin/python data/calibration.py > /tmp/calibration.md          # runs the evaluation
    .venv/bin/python data/calibration.py --report saved.json            # a saved --json

The evaluation trains one model per log shape left out (a couple of minutes).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def evaluation(report: Path | None, hold_out: str) -> dict[str, Any]:
    """The hold-out report with calibration: from `report`, else evaluated now."""
    if report is not None:
        data: dict[str, Any] = json.loads(report.read_text())
    else:
        argv = [sys.executable, "-m", "advisor", "model", "evaluate", "--hold-out", hold_out]
        done = subprocess.run(
            [*argv, "--calibration", "--json"], cwd=ROOT, check=True, capture_output=True
        )
        data = json.loads(done.stdout)
    hold: dict[str, Any] = data["hold_out"]
    return hold


def table(diagram: dict[str, Any]) -> list[str]:
    """One reliability diagram as a Markdown table, a bar of # per 5 % of accuracy."""
    out = [
        "| confidence | n | mean confidence | accuracy | gap | accuracy, drawn |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for b in diagram["bins"]:
        bar = "#" * round(b["accuracy"] * 20)
        out.append(
            f"| ({b['low']:.1f}, {b['high']:.1f}] | {b['n']} | {b['confidence']:.3f} "
            f"| {b['accuracy']:.3f} | {b['gap']:+.3f} | `{bar or '·'}` |"
        )
    out += ["", "| confidence at least | n | share | accuracy |", "|---:|---:|---:|---:|"]
    for t in diagram["at_least"]:
        acc = "–" if t["accuracy"] is None else f"{t['accuracy']:.3f}"
        out.append(f"| {t['threshold']:.2f} | {t['n']} | {t['share']:.1%} | {acc} |")
    return out


def markdown(report: dict[str, Any]) -> str:
    lines: list[str] = []
    for name, diagram in report["calibration"].items():
        lines += [
            f"### {name.replace('_', ' ')}: {diagram['examples']} predictions, accuracy "
            f"{diagram['accuracy']:.3f}, mean confidence {diagram['mean_confidence']:.3f}, "
            f"ECE {diagram['ece']:.4f}",
            "",
            *table(diagram),
            "",
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", type=Path, help="a saved `evaluate ... --json` output")
    parser.add_argument("--hold-out", default="shapes", choices=("versions", "shapes", "engines"))
    args = parser.parse_args()
    sys.stdout.write(markdown(evaluation(args.report, args.hold_out)))


if __name__ == "__main__":
    main()
