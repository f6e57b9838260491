"""Parse in a second process while this one writes: reading, decoding and validating a line
costs about as much as hashing and storing it, and a host has more than one core.

The parser process sends validated batches, each with the checkpoint position after it,
through a pipe (bounded by the OS, so memory stays flat); this process appends them in order.
Killed at any point, either side leaves the store consistent: a batch and its checkpoint
commit together here, and the next run resumes from the last committed position.
"""

from __future__ import annotations

import gc
import multiprocessing
import threading
from collections.abc import Callable, Iterable
from multiprocessing.connection import Connection
from typing import Any

from advisor.errors import AdvisorError, InputError
from advisor.events import Prepared
from advisor.store import AppendResult, Checkpoint, EventStore
from ingest.pipeline import DEFAULT_BATCH, Ingester, IngestReport
from ingest.records import Record


def can_fork() -> bool:
    """fork() is only safe in a process that has no other threads."""
    return threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods()


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
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    parser = ctx.Process(target=_parse, name="advisor-parse", daemon=True,
                         args=(send, name, checkpoint, strict, batch_size, produce))
    gc.freeze()  # the child's garbage collector then leaves inherited objects' pages shared
    try:
        parser.start()
    finally:
        gc.unfreeze()
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
