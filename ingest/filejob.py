"""Ingest one line-oriented file: resume from its checkpoint, --strict pre-check, batches."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from advisor.core.records import Progress, Record
from ingest.batches import DEFAULT_BATCH, Ingester, IngestReport, check_strict
from ingest.files import FileCursor, checkpoint_name, iter_lines, resolve, start_cursor
from ingest.parallel import PARALLEL_MIN_BYTES, ingest_parallel

if TYPE_CHECKING:
    from advisor.store import EventStore


class LineParser(Protocol):
    def __call__(
        self, line_no: int, line: bytes, position: dict[str, Any], consumed: int
    ) -> Record | list[Record] | None: ...

    def extra(self) -> dict[str, Any] | None: ...


def file_records(
    path: Path, cursor: FileCursor, parser: LineParser, *, complete_only: bool = False
) -> Iterator[Record]:
    offset = cursor.offset
    resume = cursor.position(cursor.offset, cursor.line)
    resume.update(cursor.extra or {})
    with open(path, "rb") as fh:
        for line_no, line, end, complete in iter_lines(
            fh, cursor.offset, cursor.line, complete_only=complete_only
        ):
            if complete:
                position = cursor.position(end, line_no)
                record = parser(line_no, line, position, end - offset)
                extra = parser.extra()  # the parser's state *after* this line, saved with it
                if extra:
                    position.update(extra)
                resume = position
            else:
                # Store the unfinished last line, but resume before it: once the writer
                # completes it, the whole line is read again (and keyed by its full text).
                record = parser(line_no, line, dict(resume), end - offset)
            offset = end
            if isinstance(record, Record):
                yield record
            elif record:
                yield from record


def ingest_file(
    store: EventStore,
    path: Path,
    kind: str,
    make_parser: Callable[[Path, FileCursor], LineParser],
    *,
    qualifier: str = "",
    strict: bool = False,
    progress: Progress | None = None,
    complete_only: bool = False,
    batch_size: int = DEFAULT_BATCH,
    parallel: bool = False,
) -> IngestReport:
    """With `parallel`, a large file's lines are parsed in a second process (see
    ingest.parallel). `progress` is told the bytes read so far and how many there are."""
    path = resolve(path)
    name = checkpoint_name(kind, path, qualifier)
    cursor = start_cursor(path, store.checkpoint(name))
    total = max(0, path.stat().st_size - cursor.offset)
    done = None if progress is None else functools.partial(_report_bytes, progress, total)

    if strict:  # parsers keep state from line to line: each pass gets its own
        check_strict(
            file_records(path, cursor, make_parser(path, cursor), complete_only=complete_only),
            str(path),
        )
    records = functools.partial(
        file_records, path, cursor, make_parser(path, cursor), complete_only=complete_only
    )
    if parallel and total >= PARALLEL_MIN_BYTES:
        return ingest_parallel(
            store,
            str(path),
            records,
            checkpoint=name,
            strict=strict,
            batch_size=batch_size,
            progress=done,
        )
    ingester = Ingester(
        store, str(path), checkpoint=name, strict=strict, progress=done, batch_size=batch_size
    )
    return ingester.feed(records())


def _report_bytes(progress: Progress, total: int, done: int) -> None:
    progress(done, total)
