"""Sampling on a fixed schedule (``sampling_loop``) and the cost of one sample
(``measure_sample_cost``), for any sampler: NVML's (``ingest.nvml``) or the simulator's twin.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from advisor.core.payloads import GpuSampled
from advisor.core.quantiles import P95, nearest_rank
from advisor.core.sampler import SamplerLike


def sampling_loop(
    sampler: SamplerLike,
    interval_s: float,
    *,
    count: int | None = None,
    duration_s: float | None = None,
    stop: threading.Event | None = None,
    on_tick: Callable[[int, list[GpuSampled]], None],
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Sample every ``interval_s`` seconds on a fixed schedule; return the number of ticks.

    Tick k is due at ``start + k * interval_s`` (no drift). When a tick overruns past later
    slots, those slots are skipped and the loop waits for the next slot still ahead. Stops after
    ``count`` ticks, when the next slot would be at or past ``duration_s`` from the start, or as
    soon as ``stop`` is set (also while waiting). Errors from the sampler or ``on_tick`` propagate.
    """
    if not (isinstance(interval_s, int | float) and math.isfinite(interval_s) and interval_s > 0):
        raise ValueError("interval_s must be a positive finite number")
    if count is not None and count < 0:
        raise ValueError("count must be >= 0")
    if duration_s is not None and (math.isnan(duration_s) or duration_s < 0):
        raise ValueError("duration_s must be >= 0")
    event = stop if stop is not None else threading.Event()
    start = clock()
    slot = 0
    ticks = 0
    while True:
        if count is not None and ticks >= count:
            break
        due = slot * interval_s
        if duration_s is not None and due >= duration_s:
            break
        if event.is_set():
            break
        delay = start + due - clock()
        if delay > 0:
            if event.wait(delay):
                break
            continue  # re-check: a wait may end early, and count/duration/stop still apply
        time_us, samples = sampler.sample()
        on_tick(time_us, samples)
        ticks += 1
        elapsed = clock() - start
        slot = max(slot + 1, math.ceil(elapsed / interval_s))
    return ticks


def measure_sample_cost(sampler: SamplerLike, n: int) -> dict[str, float | int]:
    """Call ``sampler.sample()`` n times; wall and CPU time per call in milliseconds.

    CPU time is ``time.process_time`` (all threads of this process, user + system); its
    resolution can be coarse, so use a large n.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError("n must be a positive int")
    wall: list[float] = []
    cpu: list[float] = []
    gpus = 0
    for _ in range(n):
        c0 = time.process_time_ns()
        w0 = time.perf_counter_ns()
        _, samples = sampler.sample()
        w1 = time.perf_counter_ns()
        c1 = time.process_time_ns()
        wall.append((w1 - w0) / 1e6)
        cpu.append((c1 - c0) / 1e6)
        gpus = len(samples)
    return {
        "n": n,
        "gpus": gpus,
        "wall_ms_mean": sum(wall) / n,
        "wall_ms_p95": nearest_rank(wall, P95),
        "wall_ms_max": max(wall),
        "cpu_ms_mean": sum(cpu) / n,
        "cpu_ms_p95": nearest_rank(cpu, P95),
    }
