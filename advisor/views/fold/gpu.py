"""GPU samples: their rows, and each run's peak GPU memory (the largest sample inside its
time window, those attributed to its unit where there are any)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from sqlalchemy import func, or_, select

from advisor.core.events import StoredEvent
from advisor.core.payloads import GpuSampled
from advisor.store.schema import gpu_samples, runs
from advisor.views.fold.foldbase import FoldBase
from advisor.views.fold.runrow import RunRow

HOSTS: Final = 100  # hosts' sample spans in one query


class GpuPeaks(FoldBase):
    """The fold's part that keeps GPU samples and run peaks."""

    def _sample(self, event: StoredEvent, p: GpuSampled) -> None:
        units = sorted({q.unit for q in p.processes or () if q.unit})
        self.samples.append(
            {
                "seq": event.seq,
                "host": p.host,
                "gpu": p.index,
                "time_us": event.time_us,
                "used_bytes": p.memory_used_bytes,
                "total_bytes": p.memory_total_bytes,
                "units": ",".join(units) if units else None,
            }
        )

    def _recompute_peaks(self) -> None:
        by_host: dict[str, list[dict[str, Any]]] = {}
        for sample in self.samples:
            by_host.setdefault(sample["host"], []).append(sample)
        if self.samples:
            self.conn.execute(gpu_samples.insert(), self.samples)
        self._load_covering(by_host)
        for run in self.runs.values():
            loaded = None if run.run_id in self.fresh else self.loaded.get(run.run_id)
            window_kept = loaded is not None and loaded.window == (run.started_us, run.ended_us)
            if window_kept and run.peak_gpu_from_unit is not None:
                self._raise_peak(run, by_host.get(run.host, ()))
            else:
                self._peak(run)

    def _load_covering(self, by_host: dict[str, list[dict[str, Any]]]) -> None:
        """Load the stored runs whose windows the new samples fall in: one query for all
        the chunk's hosts (`HOSTS` at a time: SQLite bounds an expression's depth), the rows
        themselves."""
        spans = [
            (host, min(s["time_us"] for s in new), max(s["time_us"] for s in new))
            for host, new in sorted(by_host.items())
        ]
        for i in range(0, len(spans), HOSTS):
            covering = self.conn.execute(
                select(runs).where(
                    or_(
                        *(
                            (runs.c.host == host)
                            & (runs.c.started_us <= high)
                            & (runs.c.ended_us.is_(None) | (runs.c.ended_us >= low))
                            for host, low, high in spans[i : i + HOSTS]
                        )
                    )
                )
            ).all()
            for row in covering:
                if row.run_id not in self.deleted and row.run_id not in self.runs:
                    self._loaded(RunRow.from_row(row))

    def _raise_peak(self, run: RunRow, new: Iterable[dict[str, Any]]) -> None:
        """Keep the peak of a run whose window did not change up to date with new samples
        (what `_peak` would find, without reading the window's older samples)."""
        inside = [
            (s["used_bytes"], s["total_bytes"], run.unit in (s["units"] or ""))
            for s in new
            if run.started_us <= s["time_us"]
            and (run.ended_us is None or s["time_us"] <= run.ended_us)
        ]
        own = [(used, total) for used, total, mine in inside if mine]
        if own and not run.peak_gpu_from_unit:  # the first of its own: they alone count now
            best, run.peak_gpu_from_unit = max(own), True
        else:
            candidates = own if run.peak_gpu_from_unit else [(u, t) for u, t, _ in inside]
            if not candidates:
                return
            best = max(candidates)
            if run.peak_gpu_used_bytes is not None:
                best = max(best, (run.peak_gpu_used_bytes, run.peak_gpu_total_bytes or 0))
        run.peak_gpu_used_bytes, run.peak_gpu_total_bytes = best

    def _peak(self, run: RunRow) -> None:
        window = (
            select(gpu_samples.c.used_bytes, gpu_samples.c.total_bytes)
            .where(gpu_samples.c.host == run.host)
            .where(gpu_samples.c.time_us >= run.started_us)
        )
        if run.ended_us is not None:
            window = window.where(gpu_samples.c.time_us <= run.ended_us)
        own = window.where(gpu_samples.c.units.contains(run.unit, autoescape=True))
        has_own = self.conn.execute(select(func.count()).select_from(own.subquery())).scalar()
        query = own if has_own else window
        best = self.conn.execute(
            query.order_by(gpu_samples.c.used_bytes.desc(), gpu_samples.c.total_bytes.desc()).limit(
                1
            )
        ).first()
        run.peak_gpu_used_bytes = best[0] if best else None
        run.peak_gpu_total_bytes = best[1] if best else None
        run.peak_gpu_from_unit = bool(has_own)
