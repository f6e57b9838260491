"""Python's cyclic garbage collector paused while an input is read and diagnosed.

Every line read becomes a few small objects (`LogLine`, `Split`, `Parsed`, its facts) that
hold no reference cycles: reference counting frees them the moment nothing holds them. The
collector frees none of them, but each of its passes walks every object still alive — on a
large input the lines kept so far — which cost a fifth to a third of `classify`'s time.
Cyclic garbage made meanwhile (none, on the inputs measured: tests/diagnosis checks it) is
collected once the collector runs again."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """The collector off inside the block; as it was (on, usually) after it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
