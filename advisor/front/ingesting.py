"""The front door's ingestion: journald (a JSON-lines file or stream, .journal files, the
live journal), text logs, nvidia-smi logs, NVML samples live or replayed, a watched folder;
then what was ingested folded and diagnosed. Each delegates to the `ingest` package and
advisor.pipeline.processing. The signal handling a caller wraps a long read in is lent from
advisor.pipeline.signals."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import IO, TYPE_CHECKING

from advisor.front.base import Front

if TYPE_CHECKING:
    from advisor.core.records import Progress
    from advisor.pipeline.processing import ProcessReport
    from ingest.batches import IngestReport
    from ingest.nvml import NvmlSampler
    from ingest.watch import FolderWatcher


def signals_set(stop: threading.Event) -> AbstractContextManager[None]:
    """SIGTERM or Ctrl-C sets `stop` (a second one interrupts at once)."""
    from advisor.pipeline.signals import signals_set as set_

    return set_(stop)


def sigterm_as_interrupt() -> AbstractContextManager[None]:
    """SIGTERM stops the work as Ctrl-C does, through KeyboardInterrupt."""
    from advisor.pipeline.signals import sigterm_as_interrupt as as_interrupt

    return as_interrupt()


def input_file(path: Path) -> Path:
    """`path` resolved, or InputError when it is not there or not a regular file."""
    from ingest.files import resolve

    return resolve(path)


def text_file(path: Path) -> Path:
    """`path` resolved (`input_file`), or InputError when it does not look like text."""
    from ingest.text import refuse_binary

    resolved = input_file(path)
    refuse_binary(resolved)
    return resolved


class Ingesting(Front):
    def diagnose_after(self, *, follow: bool = False) -> ProcessReport:
        """Fold and diagnose what was ingested; with `follow`, after every batch too."""
        from advisor.pipeline.processing import Processor

        processor = Processor(self.store)
        if follow:
            processor.follow()
            return processor.run(final=False)
        return processor.run(final=True)

    def log_hosts(self) -> set[str]:
        """The hosts the store's log lines are of (up to two: one, or more than one)."""
        from advisor.views.read.hosts import log_hosts

        return log_hosts(self.store)

    def ingest_journal_stream(
        self, stream: IO[bytes], *, strict: bool = False, default_host: str | None = None
    ) -> IngestReport:
        """journalctl -o json lines from `stream` (stdin)."""
        from ingest.journal_sources import ingest_json_stream

        return ingest_json_stream(self.store, stream, strict=strict, default_host=default_host)

    def ingest_journal_file(
        self,
        path: Path,
        *,
        strict: bool = False,
        default_host: str | None = None,
        progress: Progress | None = None,
    ) -> IngestReport:
        """journalctl -o json lines from the file `path`, parsed in parallel."""
        from ingest.journal_sources import ingest_json_file

        return ingest_json_file(
            self.store,
            path,
            strict=strict,
            default_host=default_host,
            progress=progress,
            parallel=True,
        )

    def ingest_journalctl(
        self,
        *,
        stop: threading.Event,
        files: tuple[Path, ...] = (),
        units: tuple[str, ...] = (),
        follow: bool = False,
        since: str | None = None,
        strict: bool = False,
        default_host: str | None = None,
    ) -> IngestReport:
        """.journal `files`, or the system journal (live with `follow`, until `stop`),
        through journalctl."""
        from ingest.journal_sources import ingest_journalctl

        return ingest_journalctl(
            self.store,
            stop=stop,
            files=files,
            units=units,
            follow=follow,
            since=since,
            strict=strict,
            default_host=default_host,
        )

    def ingest_text(
        self,
        path: Path,
        unit: str,
        host: str,
        *,
        strict: bool = False,
        progress: Progress | None = None,
    ) -> IngestReport:
        """A plain text log of `unit` on `host`."""
        from ingest.text import ingest_text_file

        return ingest_text_file(self.store, path, unit, host, strict=strict, progress=progress)

    def ingest_nvidia_smi(
        self,
        path: Path,
        host: str,
        *,
        tz: str = "UTC",
        strict: bool = False,
        progress: Progress | None = None,
    ) -> IngestReport:
        """A CSV log written by nvidia-smi, its samples filed under `host`."""
        from ingest.nvidia_smi import ingest_nvidia_smi_file

        return ingest_nvidia_smi_file(
            self.store, path, host, tz=tz, strict=strict, progress=progress
        )

    def replay_gpu(
        self, path: Path, *, strict: bool = False, progress: Progress | None = None
    ) -> IngestReport:
        """A recording of NVML samples (`ingest gpu --record`)."""
        from ingest.gpu import replay_recording

        return replay_recording(self.store, path, strict=strict, progress=progress)

    @staticmethod
    def gpu_sampler(host: str, process_every: int) -> NvmlSampler:
        """NVML, opened as the sampler is entered (PrerequisiteError without a GPU)."""
        from ingest.nvml import NvmlSampler

        return NvmlSampler(host, process_every=process_every)

    def sample_gpus(
        self,
        sampler: NvmlSampler,
        *,
        interval_s: float,
        count: int | None = None,
        duration_s: float | None = None,
        record: IO[bytes] | None = None,
    ) -> IngestReport:
        """Sample every GPU through `sampler` each `interval_s`, `count` times or for
        `duration_s` (else until interrupted); also appended to `record`, when given."""
        from ingest.gpu import sample_live

        return sample_live(
            self.store,
            sampler,
            interval_s=interval_s,
            count=count,
            duration_s=duration_s,
            record=record,
        )

    def folder_watcher(
        self,
        folder: Path,
        *,
        host: str,
        service: str | None,
        tz: str,
        on_report: Callable[[Path, IngestReport], None],
        on_error: Callable[[Path, str], None],
    ) -> FolderWatcher:
        """What ingests the new and appended files of `folder` once run."""
        from ingest.watch import FolderWatcher

        return FolderWatcher(
            self.store,
            folder,
            host=host,
            service=service,
            tz=tz,
            on_report=on_report,
            on_error=on_error,
        )
