"""The ways journal entries come in: JSON-lines files and stdin, `.journal` files and live
follow through journalctl's export stream."""

from __future__ import annotations

import queue
import shutil
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ingest.filejob import ingest_file
from ingest.files import FileCursor
from ingest.journal import EntryError, entry_event, json_line_record
from ingest.journalctl import build_argv, export_entries, journalctl_path, spawn
from ingest.pipeline import DEFAULT_BATCH, Ingester, IngestReport, check_strict
from ingest.records import Progress, Record

if TYPE_CHECKING:
    from advisor.store import EventStore

JSON_KIND = "journal-json"
FOLLOW_KIND = "journalctl"


class JsonLineParser:
    def __init__(self, default_host: str | None = None) -> None:
        self.default_host = default_host

    def __call__(self, line_no: int, line: bytes, position: dict[str, Any],
                 consumed: int) -> Record | None:
        if not line.strip():
            return None
        return json_line_record(line, line_no, default_host=self.default_host, position=position)

    def extra(self) -> dict[str, Any] | None:
        return None


def ingest_json_file(store: EventStore, path: Path, *, strict: bool = False,
                     default_host: str | None = None,
                     progress: Progress | None = None,
                     complete_only: bool = False, parallel: bool = False) -> IngestReport:
    def parser(_path: Path, _cursor: FileCursor) -> JsonLineParser:
        return JsonLineParser(default_host)

    return ingest_file(store, path, JSON_KIND, parser, strict=strict, progress=progress,
                       complete_only=complete_only, parallel=parallel)


def ingest_json_stream(store: EventStore, stream: IO[bytes], *, strict: bool = False,
                       default_host: str | None = None, name: str = "<stdin>") -> IngestReport:
    """stdin has no position to resume from: idempotency keys make a re-run harmless.
    With --strict it is spooled to a temporary file first, so that nothing is written
    unless all of it is good."""
    if strict:
        with tempfile.TemporaryFile() as spool:
            shutil.copyfileobj(stream, spool)
            spool.seek(0)
            check_strict(_stream_records(spool, default_host), name)
            spool.seek(0)
            return Ingester(store, name, strict=True).feed(_stream_records(spool, default_host))
    return Ingester(store, name).feed(_stream_records(stream, default_host))


def _stream_records(stream: IO[bytes], default_host: str | None) -> Iterator[Record]:
    for line_no, line in enumerate(stream, start=1):
        if line.strip():
            yield json_line_record(line, line_no, default_host=default_host)


def export_records(entries: Iterator[dict[str, Any]], *, default_host: str | None = None,
                   skip_cursor: str | None = None) -> Iterator[Record]:
    for n, entry in enumerate(entries, start=1):
        cursor = entry.get("__CURSOR")
        cursor_text = cursor.decode("utf-8", "replace") if isinstance(cursor, bytes) else None
        if skip_cursor is not None and cursor_text == skip_cursor:
            continue  # we resume *at* the saved cursor: that entry is already stored
        position = {"cursor": cursor_text} if cursor_text else None
        try:
            event = entry_event(entry, default_host=default_host)
        except EntryError as e:
            yield Record(n, None, str(e), position)
            continue
        yield Record(n, event, None, position)


def ingest_journalctl(store: EventStore, *, files: Sequence[Path] = (), units: Sequence[str] = (),
                      follow: bool = False, since: str | None = None, strict: bool = False,
                      default_host: str | None = None,
                      batch_size: int = DEFAULT_BATCH) -> IngestReport:
    """Read through journalctl's export stream, resuming at the saved cursor."""
    name = checkpoint_name_for(files, units)
    saved = store.checkpoint(name)
    cursor = saved.get("cursor") if saved else None
    argv = build_argv(files=files, units=units, follow=follow, cursor=cursor, since=since,
                      executable=journalctl_path())
    if strict and not follow:
        with spawn(argv) as out:
            check_strict(export_records(export_entries(out), default_host=default_host,
                                        skip_cursor=cursor), name)
    ingester = Ingester(store, name, checkpoint=name, strict=strict, batch_size=batch_size)
    with spawn(argv) as out:
        records = export_records(export_entries(out), default_host=default_host,
                                 skip_cursor=cursor)
        if follow:
            _flush_on_idle(ingester, records)
        else:
            ingester.feed(records)
    return ingester.report


_END = object()


def _flush_on_idle(ingester: Ingester, records: Iterator[Record], idle_s: float = 0.2) -> None:
    """Add records as they come; whenever the stream pauses for `idle_s`, commit what we
    have, so a live entry is stored within moments instead of waiting for a full batch.
    The queue is bounded: a slow store slows the reader instead of growing memory."""
    pending: queue.Queue[object] = queue.Queue(maxsize=10_000)

    def pump() -> None:
        try:
            for record in records:
                pending.put(record)
        except BaseException as e:  # surfaced in the caller's thread
            pending.put(e)
        pending.put(_END)

    threading.Thread(target=pump, name="journalctl-reader", daemon=True).start()
    try:
        while True:
            try:
                item = pending.get(timeout=idle_s)
            except queue.Empty:
                if ingester.pending:
                    ingester.flush()
                continue
            if item is _END:
                break
            if isinstance(item, BaseException):
                raise item
            assert isinstance(item, Record)
            ingester.add(item)
    finally:
        ingester.flush()


def checkpoint_name_for(files: Sequence[Path], units: Sequence[str]) -> str:
    where = ",".join(str(Path(f).expanduser().resolve()) for f in files) or "system"
    return f"{FOLLOW_KIND}:{where}:{','.join(sorted(units)) or '*'}"
