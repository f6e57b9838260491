"""What this host's history says: how long GPU memory takes to be released after a kill.

For every run of the host that ended killed (SIGKILL — a stop that timed out, or a `kill`
action), the release time is from the run's end to the first GPU sample at which every GPU
the run had used (NVML named the run's unit on it, or it was above `USED`) is back under
`FREE` of its capacity. The recommender waits for the p95 of these (nearest rank) in
`wait_gpu_free`.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import select

from advisor.core.quantiles import p95
from advisor.core.release import FREE, HORIZON_US, USED
from advisor.store import EventStore
from advisor.store.schema import gpu_samples, runs


def release_times(store: EventStore, host: str) -> list[float]:
    """Seconds from each killed run's end to its GPUs' memory being free, oldest first."""
    out: list[float] = []
    with store.connect() as conn:
        killed = conn.execute(
            select(runs.c.unit, runs.c.started_us, runs.c.ended_us)
            .where(runs.c.host == host)
            .where(runs.c.exit_signal == "KILL")
            .where(runs.c.ended_us.isnot(None))
            .order_by(runs.c.ended_us)
        ).all()
        for unit, started, ended in killed:
            rows = conn.execute(
                select(
                    gpu_samples.c.gpu,
                    gpu_samples.c.time_us,
                    gpu_samples.c.used_bytes,
                    gpu_samples.c.total_bytes,
                    gpu_samples.c.units,
                )
                .where(gpu_samples.c.host == host)
                .where(gpu_samples.c.time_us >= started)
                .where(gpu_samples.c.time_us <= ended + HORIZON_US)
                .order_by(gpu_samples.c.time_us, gpu_samples.c.gpu)
            ).all()
            used = {
                g
                for g, t, u, total, names in rows
                if t <= ended and ((total and u / total > USED) or unit in (names or "").split(","))
            }
            if not used:
                continue
            last: dict[int, float] = {}
            for g, t, u, total, _ in rows:
                if g not in used or not total:
                    continue
                last[g] = u / total
                if t > ended and len(last) == len(used) and all(v < FREE for v in last.values()):
                    out.append((t - ended) / 1e6)
                    break
    return out


def release_p95_s(store: EventStore, host: str) -> float | None:
    return p95(release_times(store, host))


READY_FLOOR_S: Final = 60.0  # a bound, not a sleep: the wait ends at the readiness line
READY_FACTOR: Final = 3.0


def ready_bound_s(store: EventStore, host: str, unit: str) -> float | None:
    """How long a restart of `unit` may take to be ready: three times its slowest start to
    readiness so far (at least a minute); None with no ready run yet."""
    with store.connect() as conn:
        took = [
            (ready - started) / 1e6
            for started, ready in conn.execute(
                select(runs.c.started_us, runs.c.ready_us)
                .where(runs.c.host == host)
                .where(runs.c.unit == unit)
                .where(runs.c.ready_us.isnot(None))
            )
        ]
    return max(READY_FLOOR_S, READY_FACTOR * max(took)) if took else None


def unit_gpus(
    store: EventStore, host: str, unit: str, since_us: int, until_us: int
) -> tuple[int, ...] | None:
    """The GPUs NVML saw the unit's processes on between two times; None when no sample
    names the unit (the wait then watches every GPU)."""
    with store.connect() as conn:
        rows = conn.execute(
            select(gpu_samples.c.gpu)
            .distinct()
            .where(gpu_samples.c.host == host)
            .where(gpu_samples.c.time_us >= since_us)
            .where(gpu_samples.c.time_us <= until_us)
            .where(gpu_samples.c.units.contains(unit, autoescape=True))
        ).all()
    found = tuple(sorted(int(r[0]) for r in rows))
    return found or None
