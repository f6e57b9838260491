"""GPU samples into the store: live from NVML (optionally recorded) or replayed from a recording."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from advisor.core.payloads import GpuSampled
from advisor.core.records import Progress, Record
from ingest.batches import Ingester, IngestReport
from ingest.filejob import ingest_file
from ingest.files import FileCursor
from ingest.gpu_recording import parse_recording_line, recording_line
from ingest.gpu_samples import sample_event
from ingest.nvml import NvmlSampler
from ingest.sampling import sampling_loop

if TYPE_CHECKING:
    from advisor.store import EventStore

REPLAY_KIND = "gpu-recording"


class RecordingParser:
    """One recording line holds one tick of every GPU: several events, one position."""

    def __call__(
        self, line_no: int, line: bytes, position: dict[str, Any], consumed: int
    ) -> list[Record] | None:
        if not line.strip():
            return None
        try:
            time_us, samples = parse_recording_line(line)
            events = [sample_event(time_us, s) for s in samples]
        except ValueError as e:
            return [Record(line_no, None, str(e), position, consumed)]
        if not events:
            return None
        # Only the line's last record carries the position: a batch that ends in the middle
        # of a line must not checkpoint past the GPUs it has not stored yet.
        return [
            Record(
                line_no,
                ev,
                None,
                position if i == len(events) - 1 else None,
                consumed if i == 0 else 0,
            )
            for i, ev in enumerate(events)
        ]

    def extra(self) -> dict[str, Any] | None:
        return None


def replay_recording(
    store: EventStore,
    path: Path,
    *,
    strict: bool = False,
    progress: Progress | None = None,
    complete_only: bool = False,
) -> IngestReport:
    def parser(_p: Path, _c: FileCursor) -> RecordingParser:
        return RecordingParser()

    return ingest_file(
        store,
        path,
        REPLAY_KIND,
        parser,
        strict=strict,
        progress=progress,
        complete_only=complete_only,
    )


def sample_live(
    store: EventStore | None,
    sampler: NvmlSampler,
    *,
    interval_s: float,
    count: int | None = None,
    duration_s: float | None = None,
    record: IO[bytes] | None = None,
    stop: threading.Event | None = None,
    on_tick: Callable[[int, list[GpuSampled]], None] | None = None,
    with_health: bool = True,
) -> IngestReport:
    """Sample until count/duration/stop; each tick is one committed batch, with the GPU faults
    its health reading found (`NvmlSampler.faults`) unless `with_health` is False."""
    ingester = Ingester(store, f"nvml:{sampler.host}") if store is not None else None
    report = ingester.report if ingester is not None else IngestReport(f"nvml:{sampler.host}")

    # A sampler without health readings (the simulator's twin) gives no faults.
    health: Callable[[int], list[dict[str, Any]]] | None = (
        getattr(sampler, "faults", None) if with_health else None
    )

    def tick(time_us: int, samples: list[GpuSampled]) -> None:
        if record is not None:
            record.write(recording_line(time_us, sampler.host, samples))
            record.flush()
        faults = health(time_us) if health is not None else []
        if ingester is not None:
            for s in samples:
                ingester.add(Record(0, sample_event(time_us, s)))
            for fault in faults:
                ingester.add(Record(0, fault))
            ingester.flush()
        else:
            report.read += len(samples)
        if on_tick is not None:
            on_tick(time_us, samples)

    sampling_loop(sampler, interval_s, count=count, duration_s=duration_s, stop=stop, on_tick=tick)
    return report
