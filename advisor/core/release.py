"""When a killed run's GPU memory counts as released: the thresholds that the history the
recommender reads (`wait_gpu_free`) and the fleet's statistics (`advisor stats`) share."""

from __future__ import annotations

from typing import Final

# A GPU the run used: NVML named the run's unit among its processes during the run, or (for
# samples without processes, as from nvidia-smi CSV) it was above 10% of its memory.
USED: Final = 0.10
FREE: Final = 0.05  # released: under 5% again
HORIZON_US: Final = 300_000_000  # look up to 5 minutes past the run's end
QUANTILE: Final = 0.95  # the recommender waits for this percentile (nearest rank)
