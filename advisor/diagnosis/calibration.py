"""Calibration: does a diagnosis at confidence 0.9 hold about nine times in ten?

`reliability` bins predictions by their stated confidence and, per bin, sets the mean
confidence beside the observed accuracy (a reliability diagram), with the expected
calibration error (ECE: the bins' gaps weighted by their size) and the accuracy of what is
said at least as confidently as each threshold. `advisor model evaluate --hold-out shapes
--calibration` reports it for the label rules and model combine into, on predictions of
examples whose whole group the model never saw (docs/calibration.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final

__all__ = ["BINS", "THRESHOLDS", "at_least", "format_reliability", "reliability"]

BINS: Final = 10
THRESHOLDS: Final = (0.5, 0.7, 0.8, 0.9)


def _bin_of(confidence: float, bins: int) -> int:
    """Bin b holds (b/bins, (b+1)/bins]; bin 0 also holds 0 (as `training.calibration_error`)."""
    if not 0.0 <= confidence <= 1.0:
        raise ValueError(f"a confidence is between 0 and 1, not {confidence}")
    return max(0, min(bins - 1, math.ceil(round(confidence * bins, 9)) - 1))


def at_least(
    confidences: Sequence[float], correct: Sequence[bool], threshold: float
) -> dict[str, Any]:
    """Of the predictions at `threshold` or above: how many (n, share) and how many right."""
    kept = [ok for c, ok in zip(confidences, correct, strict=True) if c >= threshold]
    return {
        "threshold": threshold,
        "n": len(kept),
        "share": round(len(kept) / len(correct), 4) if correct else 0.0,
        "accuracy": round(sum(kept) / len(kept), 4) if kept else None,
    }


def reliability(
    confidences: Sequence[float],
    correct: Sequence[bool],
    bins: int = BINS,
    thresholds: Sequence[float] = THRESHOLDS,
) -> dict[str, Any]:
    """The reliability diagram of predictions stated at `confidences` that were `correct`:
    per non-empty bin (low, high], n, mean confidence, accuracy and their gap; the ECE; the
    accuracy at or above each of `thresholds`."""
    if len(confidences) != len(correct):
        raise ValueError("one correctness per confidence")
    members: list[list[int]] = [[] for _ in range(bins)]
    for i, c in enumerate(confidences):
        members[_bin_of(c, bins)].append(i)
    rows, gap_sum = [], 0.0
    for b, idx in enumerate(members):
        if not idx:
            continue
        mean_conf = sum(confidences[i] for i in idx) / len(idx)
        accuracy = sum(correct[i] for i in idx) / len(idx)
        gap_sum += len(idx) * abs(accuracy - mean_conf)
        rows.append(
            {
                "low": round(b / bins, 4),
                "high": round((b + 1) / bins, 4),
                "n": len(idx),
                "confidence": round(mean_conf, 4),
                "accuracy": round(accuracy, 4),
                "gap": round(accuracy - mean_conf, 4),
            }
        )
    n = len(confidences)
    return {
        "examples": n,
        "accuracy": round(sum(correct) / n, 4) if n else None,
        "mean_confidence": round(sum(confidences) / n, 4) if n else None,
        "ece": round(gap_sum / n, 4) if n else 0.0,
        "bins": rows,
        "at_least": [at_least(confidences, correct, t) for t in thresholds],
    }


def format_reliability(report: dict[str, Any], title: str = "calibration") -> str:
    """The reliability diagram as a text table, with a bar of the accuracy per bin."""
    lines = [
        f"{title}: {report['examples']} predictions, accuracy {report['accuracy']}, "
        f"mean confidence {report['mean_confidence']}, ECE {report['ece']:.4f}",
        f"  {'confidence':<12} {'n':>5} {'mean':>6} {'acc':>6} {'gap':>7}  accuracy",
    ]
    for r in report["bins"]:
        bar = "#" * round(r["accuracy"] * 20)
        lines.append(
            f"  ({r['low']:.1f}, {r['high']:.1f}]  {r['n']:>5} {r['confidence']:>6.3f} "
            f"{r['accuracy']:>6.3f} {r['gap']:>+7.3f}  {bar}"
        )
    for t in report["at_least"]:
        acc = "-" if t["accuracy"] is None else f"{t['accuracy']:.3f}"
        lines.append(
            f"  confidence >= {t['threshold']:.2f}: {t['n']} ({t['share']:.1%}), accuracy {acc}"
        )
    return "\n".join(lines)
