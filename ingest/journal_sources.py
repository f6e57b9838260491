"""The ways journal entries come in: JSON-lines files and stdin, `.journal` files and live
follow through journalctl's export stream.

Live follow of chosen units reads the whole journal and keeps, in Python, the entries a
`Selection` wants: `journalctl -u GLOB` refuses to start ("Failed to add filter for units: No
data available") until a matching unit has logged, and never picks up a unit that appears
later."""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from fnmatch import fnmatchcase
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from advisor.core.journalctl import (
    build_argv,
    export_entries,
    journalctl_path,
    spawn,
    validate_unit,
)
from advisor.core.records import Progress, Record
from advisor.core.units import mangle
from ingest.batches import DEFAULT_BATCH, Ingester, IngestReport, check_strict
from ingest.filejob import ingest_file
from ingest.files import FileCursor
from ingest.follow import Reader, Selection, Urgent, flush_on_idle, kept
from ingest.journal import EntryError, entry_event, json_line_record

if TYPE_CHECKING:
    from advisor.store import EventStore

JSON_KIND = "journal-json"
FOLLOW_KIND = "journalctl"


class JsonLineParser:
    def __init__(self, default_host: str | None = None) -> None:
        self.default_host = default_host

    def __call__(
        self, line_no: int, line: bytes, position: dict[str, Any], consumed: int
    ) -> Record | None:
        if not line or line.isspace():  # (without copying the line, as strip() would)
            return None
        return json_line_record(line, line_no, default_host=self.default_host, position=position)

    def extra(self) -> dict[str, Any] | None:
        return None


def ingest_json_file(
    store: EventStore,
    path: Path,
    *,
    strict: bool = False,
    default_host: str | None = None,
    progress: Progress | None = None,
    complete_only: bool = False,
    parallel: bool = False,
) -> IngestReport:
    def parser(_path: Path, _cursor: FileCursor) -> JsonLineParser:
        return JsonLineParser(default_host)

    return ingest_file(
        store,
        path,
        JSON_KIND,
        parser,
        strict=strict,
        progress=progress,
        complete_only=complete_only,
        parallel=parallel,
    )


def ingest_json_stream(
    store: EventStore,
    stream: IO[bytes],
    *,
    strict: bool = False,
    default_host: str | None = None,
    name: str = "<stdin>",
) -> IngestReport:
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
        if line and not line.isspace():
            yield json_line_record(line, line_no, default_host=default_host)


def export_records(
    entries: Iterator[dict[str, Any]],
    *,
    default_host: str | None = None,
    skip_cursor: str | None = None,
) -> Iterator[Record]:
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


class UnitGlobs:
    """The entries about units matching globs — the unit `entry_event` says an entry is
    about: `UNIT=` on PID 1's messages, else the sender's unit — as `journalctl -u` chooses
    them, and with `kernel` the kernel's lines too."""

    def __init__(self, globs: Sequence[str], *, kernel: bool = False) -> None:
        self.globs = tuple(mangle(validate_unit(g)) for g in globs)
        self.kernel = kernel
        self.name = (",".join(sorted(globs)) or "*") + ("+kernel" if kernel else "")
        self._seen: dict[str, bool] = {}

    def keep(self, event: Mapping[str, Any]) -> bool:
        payload = event["payload"]
        if payload.get("transport") == "kernel":
            return self.kernel
        unit = payload.get("unit")
        if not isinstance(unit, str):
            return False
        hit = self._seen.get(unit)
        if hit is None:
            hit = any(fnmatchcase(unit, g) for g in self.globs)
            if len(self._seen) < 100_000:
                self._seen[unit] = hit
        return hit

    def tick(self) -> None:
        pass


def ingest_journalctl(
    store: EventStore,
    *,
    files: Sequence[Path] = (),
    units: Sequence[str] = (),
    follow: bool = False,
    since: str | None = None,
    strict: bool = False,
    default_host: str | None = None,
    batch_size: int = DEFAULT_BATCH,
    selection: Selection | None = None,
    resume_from: Sequence[str] = (),
    stop: threading.Event | None = None,
    urgent: Urgent | None = None,
) -> IngestReport:
    """Read through journalctl's export stream, resuming at the saved cursor; following, until
    the stream ends or `stop` is set (with `urgent`: which entries to commit at once,
    `ingest.follow.flush_on_idle`).

    Following with `units` (or any `selection`), journalctl reads every entry and the
    selection keeps its own; the cursor saved is the last entry read, kept or not.
    `resume_from`: checkpoint names to resume from while this one has none (an older name
    of the same reader)."""
    if selection is None and units and follow:
        selection = UnitGlobs(units)
    if selection is not None:
        units = ()
        name = checkpoint_name_for(files, (), selection=selection.name)
    else:
        name = checkpoint_name_for(files, units)
    saved = store.checkpoint(name)
    for older in resume_from:
        if saved is None:
            saved = store.checkpoint(older)
    cursor = saved.get("cursor") if saved else None
    argv = build_argv(
        files=files,
        units=units,
        follow=follow,
        cursor=cursor,
        since=since,
        executable=journalctl_path(),
    )
    if strict and not follow:
        with spawn(argv) as out:
            records = export_records(
                export_entries(out), default_host=default_host, skip_cursor=cursor
            )
            check_strict(_selected(records, selection), name)
    ingester = Reader(store, name, checkpoint=name, strict=strict, batch_size=batch_size)
    with spawn(argv) as out:
        records = export_records(export_entries(out), default_host=default_host, skip_cursor=cursor)
        if follow:
            flush_on_idle(ingester, records, selection, stop=stop, urgent=urgent)
        else:
            _read_all(ingester, records, selection, stop)
    return ingester.report


def _read_all(
    ingester: Reader,
    records: Iterable[Record],
    selection: Selection | None,
    stop: threading.Event | None,
) -> None:
    """Every record to its end (or until `stop`), then one last commit."""
    for record in records:
        if stop is not None and stop.is_set():
            break
        ingester.offer(record, selection)
    ingester.flush()


def _selected(records: Iterable[Record], selection: Selection | None) -> Iterator[Record]:
    return (r for r in records if selection is None or kept(r, selection))


def checkpoint_name_for(
    files: Sequence[Path], units: Sequence[str], *, selection: str | None = None
) -> str:
    """`journalctl:WHERE:WHAT`: WHERE the files (or `system`), WHAT the units (or `*`), or a
    selection's name."""
    where = ",".join(str(Path(f).expanduser().resolve()) for f in files) or "system"
    what = selection if selection is not None else (",".join(sorted(units)) or "*")
    return f"{FOLLOW_KIND}:{where}:{what}"
