"""When a killed run's GPU memory counts as released: the thresholds that the history the
recommender reads (`wait_gpu_free`) and the fleet's statistics (`advisor stats`) share."""

from __future__ import annotations

from typing import Final

USED: Final = 0.10  # a GPU the run used: above 10% of its memory during the run
FREE: Final = 0.05  # released: under 5% again
HORIZON_US: Final = 300_000_000  # look up to 5 minutes past the run's end
QUANTILE: Final = 0.95  # the recommender waits for this percentile (nearest rank)
