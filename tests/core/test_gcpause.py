"""`freeze_start_up`: what a daemon made while starting leaves the collector's passes; the
garbage made before is collected first, and a frozen object is still freed when nothing
holds it."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from advisor.core.gcpause import freeze_start_up


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


@pytest.mark.usefixtures("unfrozen")
def test_start_up_objects_leave_the_collectors_passes() -> None:
    cycle_a, cycle_b = _Node(), _Node()
    cycle_a.other, cycle_b.other = cycle_b, cycle_a
    garbage = weakref.ref(cycle_a)
    del cycle_a, cycle_b  # cyclic garbage made while starting
    kept = _Node()
    held = weakref.ref(kept)
    freeze_start_up()
    assert garbage() is None  # collected before the freeze, not frozen for good
    assert gc.get_freeze_count() > 0
    assert not any(o is kept for o in gc.get_objects())  # out of the collector's passes
    del kept
    assert held() is None  # a frozen object is freed when nothing holds it
