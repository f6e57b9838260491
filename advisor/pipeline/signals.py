"""How the long-running loops stop: SIGTERM as Ctrl-C, or either as a stop event."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Daemons stop on SIGTERM the way they stop on Ctrl-C: through KeyboardInterrupt, so
    every `finally` runs and buffered events are committed."""

    def _raise(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def signals_set(stop: threading.Event) -> Iterator[None]:
    """For a loop that checks `stop`: SIGTERM or Ctrl-C sets it, so the work in hand (a file
    half ingested, its report) ends whole before the loop returns. A second signal
    interrupts at once."""

    def _set(_signum: int, _frame: object) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = {sig: signal.signal(sig, _set) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
