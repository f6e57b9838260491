"""Python's cyclic garbage collector held back while many short-lived objects are made:
paused while an input is read and diagnosed (`gc_paused`), run less often while the store's
events are folded (`fewer_collections`), and kept off what a daemon's start-up made
(`freeze_start_up`).

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
from typing import Final

FOLD_THRESHOLD: Final = 50_000  # allocations between collections while folding


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


@contextmanager
def fewer_collections(threshold: int = FOLD_THRESHOLD) -> Iterator[None]:
    """The collector run every `threshold` allocations inside the block (not paused: a
    fold runs for as long as the store is large, and makes some cycles). A chunk's fold makes
    objects by the hundred thousand (events, payloads, parsed lines), few of them in cycles,
    and at the default threshold the collector runs every 700 of them, scanning the chunk
    again and again (a quarter of the fold's time)."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], threshold), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


def freeze_start_up() -> None:
    """Leave what a long-running process made while starting — its modules, the rules, the
    model, the first pass's objects: tens of thousands, alive until it exits — out of the
    collector's passes from now on (`gc.freeze`). Each full pass walked all of them again
    (~20 ms every few seconds in `advisor watch`). Garbage already made is collected first;
    frozen objects are still freed the moment nothing holds them (reference counting), only
    a cycle among them would stay."""
    gc.collect()
    gc.freeze()
