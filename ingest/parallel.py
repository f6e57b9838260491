"""Parse in a second process while this one writes: reading, decoding and validating a line
costs about as much as hashing and storing it, and a host has more than one core.

The parser process sends validated batches, each with the checkpoint position after it,
through a pipe (bounded by the OS, so memory stays flat); this process appends them in order.
Killed at any point, either side leaves the store consistent: a batch and its checkpoint
commit together here, and the next run resumes from the last committed position.

The parser is a fresh interpreter (`python -m ingest.parallel`), not a fork: a forked child
would inherit this process's database connections and the pipe's reading end. Were this
process killed, such a child would keep a PostgreSQL session (and its transaction's locks)
open, blocked forever on a pipe it still held both ends of. The fresh one holds only its own
ends: it gets EPIPE and exits. It imports the parsers and the event models, not SQLAlchemy.
Messages are pickled: both ends are this program, and nothing from the input is unpickled.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from typing import IO, TYPE_CHECKING, Any

from advisor.core.errors import AdvisorError, InputError
from advisor.core.events import Prepared
from advisor.core.records import Record
from advisor.store.types import AppendResult, Checkpoint
from ingest.batches import DEFAULT_BATCH, Ingester, IngestReport

if TYPE_CHECKING:
    from advisor.store import EventStore

# Below this, starting a Python process costs more than it saves.
PARALLEL_MIN_BYTES = 8 * 1024 * 1024


def _send(out: IO[bytes], message: tuple[Any, ...]) -> None:
    pickle.dump(message, out, protocol=pickle.HIGHEST_PROTOCOL)
    out.flush()


def parse_worker(job: IO[bytes], out: IO[bytes]) -> None:
    """The parser process: read the job, send validated batches, then a summary."""
    name, checkpoint, strict, batch_size, produce = pickle.load(job)
    ingester: Ingester

    def hand_over(batch: list[Prepared], cp: Checkpoint | None) -> AppendResult:
        _send(out, ("batch", batch, cp, ingester.consumed))
        return AppendResult()

    try:
        ingester = Ingester(
            None, name, checkpoint=checkpoint, strict=strict, batch_size=batch_size, sink=hand_over
        )
        report = ingester.feed(produce())
        _send(out, ("done", report.read, report.malformed_count, report.malformed))
    except AdvisorError as e:
        _send(out, ("error", e))


def ingest_parallel(
    store: EventStore,
    name: str,
    produce: Callable[[], Iterable[Record]],
    *,
    checkpoint: str | None = None,
    strict: bool = False,
    batch_size: int = DEFAULT_BATCH,
    progress: Callable[[int], None] | None = None,
) -> IngestReport:
    """`produce` must pickle (a module-level function, or a functools.partial of one)."""
    job = pickle.dumps((name, checkpoint, strict, batch_size, produce))
    with tempfile.TemporaryFile() as errors:
        parser = subprocess.Popen(
            [sys.executable, "-m", "ingest.parallel"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            bufsize=1 << 20,
        )
        assert parser.stdin is not None and parser.stdout is not None
        try:
            parser.stdin.write(job)
            parser.stdin.close()
            return _collect(store, name, parser.stdout, progress, parser, errors)
        finally:
            parser.stdout.close()
            if parser.poll() is None:
                parser.kill()
            parser.wait()


def _collect(
    store: EventStore,
    name: str,
    messages: IO[bytes],
    progress: Callable[[int], None] | None,
    parser: subprocess.Popen[bytes],
    errors: IO[bytes],
) -> IngestReport:
    report = IngestReport(name)
    while True:
        try:
            message: tuple[Any, ...] = pickle.load(messages)
        except EOFError:
            parser.wait()
            errors.seek(0)
            last = (errors.read().decode("utf-8", "replace").strip().splitlines() or [""])[-1]
            raise InputError(
                f"{name}: the parser process ended unexpectedly "
                f"(exit {parser.returncode}){': ' + last if last else ''}"
            ) from None
        if message[0] == "batch":
            _, batch, cp, consumed = message
            result = store.append_prepared(batch, cp)
            report.appended += result.appended
            report.duplicates += result.duplicates
            if progress is not None:
                progress(consumed)
        elif message[0] == "done":
            _, report.read, report.malformed_count, report.malformed = message
            return report
        else:
            error: AdvisorError = message[1]
            raise error


if __name__ == "__main__":
    try:
        parse_worker(sys.stdin.buffer, sys.stdout.buffer)
    except BrokenPipeError:  # the writer is gone (killed): nothing left to do, nothing to flush
        os._exit(1)
