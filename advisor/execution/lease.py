"""One executor per plan: the plan's lease in the store, taken before a step runs and renewed
while it runs; a second executor finds the plan busy. A holder that stops renewing loses the
lease when it expires — at once when it was an executor of this host whose process is gone
(a killed `advisor remediate`), so the unit does not wait out the lease while it is down."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from advisor.core.errors import AdvisorError
from advisor.core.host import this_host
from advisor.store import EventStore, leases


def executor_identity() -> str:
    """`host:pid:nonce`: whose lease it is, and whether its process still runs."""
    return f"{this_host()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def executor_gone(identity: str) -> bool:
    """An executor identity of this host whose process no longer exists."""
    parts = identity.split(":")
    if len(parts) < 3 or ":".join(parts[:-2]) != this_host() or not parts[-2].isdigit():
        return False
    pid = int(parts[-2])
    if pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def _taken_over(store: EventStore, name: str, identity: str, ttl_s: float) -> bool:
    """The lease's holder is an executor of this host whose process is gone: taken over."""
    held = leases.holder_of(store, name)
    if held is None or not executor_gone(held.holder):
        return False
    return leases.take_over(store, name, held.holder, identity, ttl_s) is not None


@contextmanager
def holding(store: EventStore, name: str, identity: str, ttl_s: float) -> Iterator[bool]:
    """Hold lease `name` for the block, renewed every third of `ttl_s` (True), or find it
    held by a live holder (False)."""
    if leases.take(store, name, identity, ttl_s) is None and not _taken_over(
        store, name, identity, ttl_s
    ):
        yield False
        return
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(ttl_s / 3):
            try:
                leases.take(store, name, identity, ttl_s)
            except AdvisorError:
                continue  # the next renewal tries again; the lease outlives one miss

    keeper = threading.Thread(target=renew, name="lease", daemon=True)
    keeper.start()
    try:
        yield True
    finally:
        stop.set()
        keeper.join(timeout=5)
        leases.give_back(store, name, identity)
