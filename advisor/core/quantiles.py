"""Percentiles by nearest rank: the smallest value with at least that share of the values at
or below it (DuckDB's `quantile_disc` picks the same one)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Final

P95: Final = 0.95


def nearest_rank(values: Iterable[float], q: float) -> float:
    """The `q` percentile (0 < q <= 1) of the values by nearest rank; ValueError without
    values."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values to take a percentile of")
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


def p95(values: Iterable[float]) -> float | None:
    """The 95th percentile by nearest rank; None without values."""
    ordered = list(values)
    return nearest_rank(ordered, P95) if ordered else None
