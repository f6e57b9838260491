"""Parse in a second process while this one writes: reading, decoding and validating a line
costs about as much as hashing and storing it, and a host has more than one core.

The parser process sends validated batches, each with the checkpoint position after it,
through a pipe (bounded by the OS, so memory stays flat); this process appends them in order.
Killed at any point, either side leaves the store consistent: a batch and its checkpoint
commit together here, and the next run resumes from the last committed position.

The parser is *spawned*, not forked: a forked child would inherit this process's database
connections and the pipe's reading end. Were this process killed, such a child would keep a
PostgreSQL session (and its transaction's locks) open, blocked forever on a pipe it still
holds both ends of. A spawned child holds only its end: it gets EPIPE and exits.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterable
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from advisor.errors import AdvisorError, InputError
from advisor.events import Prepared
from advisor.store.types import AppendResult, Checkpoint
from ingest.pipeline import DEFAULT_BATCH, Ingester, IngestReport
from ingest.records import Record

if TYPE_CHECKING:
    from advisor.store import EventStore

# Below this, starting a Python process costs more than it saves.
PARALLEL_MIN_BYTES = 8 * 1024 * 1024


def _parse(send: Connection, name: str, checkpoint: str | None, strict: bool, batch_size: int,
           produce: Callable[[], Iterable[Record]]) -> None:
    ingester: Ingester

    def hand_over(batch: list[Prepared], cp: Checkpoint | None) -> AppendResult:
        send.send(("batch", batch, cp, ingester.consumed))
        return AppendResult()

    try:
        ingester = Ingester(None, name, checkpoint=checkpoint, strict=strict,
                            batch_size=batch_size, sink=hand_over)
        report = ingester.feed(produce())
        send.send(("done", report.read, report.malformed_count, report.malformed))
    except AdvisorError as e:
        send.send(("error", e))
    except BrokenPipeError:  # the writer is gone; nothing left to do
        pass
    finally:
        send.close()


def ingest_parallel(store: EventStore, name: str, produce: Callable[[], Iterable[Record]], *,
                    checkpoint: str | None = None, strict: bool = False,
                    batch_size: int = DEFAULT_BATCH,
                    progress: Callable[[int], None] | None = None) -> IngestReport:
    """`produce` must pickle (a module-level function, or a functools.partial of one)."""
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    parser = ctx.Process(target=_parse, name="advisor-parse", daemon=True,
                         args=(send, name, checkpoint, strict, batch_size, produce))
    parser.start()
    send.close()
    report = IngestReport(name)
    try:
        while True:
            try:
                message: tuple[Any, ...] = receive.recv()
            except EOFError:
                parser.join(timeout=5)
                raise InputError(f"{name}: the parser process ended unexpectedly "
                                 f"(exit {parser.exitcode})") from None
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
    finally:
        receive.close()
        parser.join(timeout=5)
        if parser.is_alive():
            parser.kill()
            parser.join()
