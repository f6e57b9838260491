"""Calibration arithmetic on synthetic predictions whose answer is known: the reliability
diagram's bins, the expected calibration error, the accuracy at or above a threshold; and
`model evaluate --calibration` refused without `--hold-out`."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from advisor.cli.main import cli
from advisor.diagnosis.calibration import at_least, format_reliability, reliability
from advisor.diagnosis.training import calibration_error


def _set(confidence: float, n: int, right: int) -> tuple[list[float], list[bool]]:
    return [confidence] * n, [True] * right + [False] * (n - right)


def test_a_perfectly_calibrated_set_has_no_error() -> None:
    # 10 at 0.9 (9 right), 20 at 0.6 (12 right), 10 at 1.0 (all right)
    sets = [_set(0.9, 10, 9), _set(0.6, 20, 12), _set(1.0, 10, 10)]
    conf = [c for cs, _ in sets for c in cs]
    right = [r for _, rs in sets for r in rs]
    report = reliability(conf, right)
    assert report["ece"] == 0.0 and report["examples"] == 40
    assert [(b["low"], b["high"], b["n"], b["accuracy"]) for b in report["bins"]] == [
        (0.5, 0.6, 20, 0.6),  # a confidence on a bin's upper edge is in that bin
        (0.8, 0.9, 10, 0.9),
        (0.9, 1.0, 10, 1.0),
    ]
    assert report["accuracy"] == pytest.approx(31 / 40, abs=1e-4)


def test_an_overconfident_set_has_the_error_it_should() -> None:
    # 0.95 stated, 50% right; 0.35 stated, 35% right: ECE = (10·0.45 + 20·0) / 30 = 0.15
    a, b = _set(0.95, 10, 5), _set(0.35, 20, 7)
    report = reliability(a[0] + b[0], a[1] + b[1])
    assert report["ece"] == pytest.approx((10 * 0.45) / 30, abs=1e-4)
    top = report["bins"][-1]
    assert top["gap"] == pytest.approx(-0.45) and top["confidence"] == pytest.approx(0.95)
    assert report["ece"] == pytest.approx(calibration_error(a[0] + b[0], a[1] + b[1]), abs=1e-4)
    ninety = at_least(a[0] + b[0], a[1] + b[1], 0.9)
    assert ninety == {"threshold": 0.9, "n": 10, "share": round(10 / 30, 4), "accuracy": 0.5}
    assert at_least([0.1], [True], 0.5)["accuracy"] is None
    text = format_reliability(report)
    assert "ECE 0.1500" in text and "(0.9, 1.0]     10  0.950  0.500  -0.450" in text


def test_confidences_out_of_range_are_refused() -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        reliability([1.5], [True])
    with pytest.raises(ValueError, match="one correctness per confidence"):
        reliability([0.5, 0.6], [True])


def test_calibration_needs_a_hold_out() -> None:
    result = CliRunner().invoke(cli, ["model", "evaluate", "--calibration"])
    assert result.exit_code == 2 and "--calibration needs --hold-out" in result.output
