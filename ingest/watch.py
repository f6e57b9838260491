"""Watch a folder and ingest new and appended files: journal JSON, text logs, nvidia-smi CSV
logs and GPU recordings, surviving rotation (rename + new file) and truncation.

watchdog tells us which paths changed; each changed file is read from its checkpoint, only
complete lines, so a line still being written is picked up on the next change.
"""

from __future__ import annotations

import queue
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from advisor.core.errors import AdvisorError
from ingest.batches import IngestReport
from ingest.gpu import replay_recording
from ingest.journal_sources import ingest_json_file
from ingest.kinds import line_kind
from ingest.nvidia_smi import ingest_nvidia_smi_file
from ingest.text import ingest_text_file

if TYPE_CHECKING:
    from advisor.store import EventStore

SKIPPED_SUFFIXES = {".gz", ".xz", ".zst", ".bz2", ".lz4", ".zip", ".journal", ".swp", ".tmp"}
_ROTATION = re.compile(r"(\.\d+)+$")
_LOG_SUFFIX = re.compile(r"\.(log|txt|out|err|jsonl|json|csv)$")
# A SQLite store kept in the watched folder (and its side files) is not a log: read as text,
# every batch stored would change it again.
_SQLITE_SIDE_FILE = re.compile(r"-(wal|shm|journal)$")
_SQLITE_MAGIC = b"SQLite format 3\x00"
SNIFF_BYTES = 1 << 20


def sniff(path: Path) -> str | None:
    """What kind of file this is, from its first non-empty line; None to ignore it (or, while
    that line is still being written, to look again later)."""
    if (
        path.name.startswith(".")
        or path.suffix in SKIPPED_SUFFIXES
        or _SQLITE_SIDE_FILE.search(path.name)
    ):
        return None
    try:
        with open(path, "rb") as fh:
            if fh.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC:
                return None
            fh.seek(0)
            first = b""
            while fh.tell() < SNIFF_BYTES:
                line = fh.readline(SNIFF_BYTES)
                if not line.endswith(b"\n"):
                    # not a whole line yet: decide when there is one (a line this long is text)
                    return "text" if len(line) >= SNIFF_BYTES else None
                if line.strip():
                    first = line.strip()
                    break
    except OSError:
        return None
    if not first:
        return None
    return line_kind(first)


def service_name(path: Path) -> str:
    """vllm-llama.log.1 → vllm-llama: the name a text log's lines are filed under."""
    name = _ROTATION.sub("", path.name)
    return _LOG_SUFFIX.sub("", name) or name


@dataclass
class WatchStats:
    reports: list[IngestReport] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def appended(self) -> int:
        return sum(r.appended for r in self.reports)


class _Changed(FileSystemEventHandler):
    def __init__(self, changed: queue.Queue[Path]) -> None:
        self.changed = changed

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory or event.event_type in ("deleted", "opened", "closed_no_write"):
            return
        for p in (event.src_path, getattr(event, "dest_path", "")):
            if p:
                self.changed.put(Path(p if isinstance(p, str) else p.decode()))


class FolderWatcher:
    def __init__(
        self,
        store: EventStore,
        folder: Path,
        *,
        host: str,
        service: str | None = None,
        tz: str = "UTC",
        on_report: Callable[[Path, IngestReport], None] | None = None,
        on_error: Callable[[Path, str], None] | None = None,
    ) -> None:
        self.store = store
        self.folder = folder
        self.host = host
        self.service = service
        self.tz = tz
        self.on_report = on_report
        self.on_error = on_error
        self.stats = WatchStats()

    def ingest_path(self, path: Path) -> IngestReport | None:
        if not path.is_file():
            return None
        kind = sniff(path)
        try:
            if kind == "journal-json":
                report = ingest_json_file(
                    self.store, path, default_host=self.host, complete_only=True
                )
            elif kind == "nvidia-smi":
                report = ingest_nvidia_smi_file(
                    self.store, path, self.host, tz=self.tz, complete_only=True
                )
            elif kind == "gpu-recording":
                report = replay_recording(self.store, path, complete_only=True)
            elif kind == "text":
                report = ingest_text_file(
                    self.store,
                    path,
                    self.service or service_name(path),
                    self.host,
                    complete_only=True,
                )
            else:
                return None
        except AdvisorError as e:  # one bad file must not stop the watcher
            self.stats.errors.append(f"{path}: {e}")
            if self.on_error is not None:
                self.on_error(path, str(e))
            return None
        self.stats.reports.append(report)
        if self.on_report is not None and (report.appended or report.malformed_count):
            self.on_report(path, report)
        return report

    def scan(self, stop: threading.Event | None = None) -> None:
        for path in sorted(self.folder.iterdir()):
            if stop is not None and stop.is_set():
                return
            self.ingest_path(path)

    def run(self, stop: threading.Event, *, rescan_s: float = 30.0, settle_s: float = 0.2) -> None:
        """Ingest what is there, then every change until `stop` is set."""
        changed: queue.Queue[Path] = queue.Queue()
        observer = Observer()
        observer.schedule(_Changed(changed), str(self.folder), recursive=False)
        observer.start()
        try:
            self.scan(stop)
            idle = 0.0
            while not stop.is_set():
                try:
                    first = changed.get(timeout=settle_s)
                except queue.Empty:
                    idle += settle_s
                    if idle >= rescan_s:  # events can be missed (overflow, network mounts)
                        self.scan(stop)
                        idle = 0.0
                    continue
                paths = {first}
                while True:  # coalesce a burst of events into one pass per file
                    try:
                        paths.add(changed.get_nowait())
                    except queue.Empty:
                        break
                for path in sorted(paths):
                    if stop.is_set():
                        break
                    if path.parent == self.folder:
                        self.ingest_path(path)
        finally:
            observer.stop()
            observer.join()
