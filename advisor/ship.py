"""Shipping a host's events to a central store (PostgreSQL) for the fleet view.

Each host keeps its own store and stays autonomous; `ship` copies its events, in sequence
order (so in order per stream), in batches, to the central store. An event arrives there with
source `ship:<host>` and its local sequence number as key: the central store's idempotency
look-up makes a batch sent twice (a ship interrupted between the central commit and the
local checkpoint, two shippers at once) land once. The payload travels as the host stored
it, and the rest of the host's envelope (recorded time, source, key, hash) as the event's
`origin`, so each host's own chain can be verified in the central store (`advisor verify`).
The position is a checkpoint in the local store, so an interrupted ship resumes where it
stopped. While the central store is unreachable it waits and retries with exponential
backoff. The central store folds what it receives into its projections; it never diagnoses
shipped runs again (the hosts did).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Final, TypeVar

import orjson

from advisor.errors import StoreError
from advisor.events import Prepared
from advisor.projections import Projector
from advisor.store import AppendResult, Checkpoint, EventStore
from advisor.store.audit import anchors
from advisor.store.engine import first_line, redact
from advisor.store.store import SHIP_PREFIX, RawEvent

BATCH: Final = 5000
T = TypeVar("T")


@dataclass
class ShipReport:
    shipped: int = 0
    duplicates: int = 0
    retries: int = 0
    last_seq: int = 0


def checkpoint_name(central_url: str) -> str:
    return f"ship:{redact(central_url)}"


def ship(local: EventStore, central: EventStore, host: str, *, batch: int = BATCH,
         give_up_after_s: float | None = 300.0,
         sleep: Callable[[float], None] = time.sleep) -> ShipReport:
    """Ship every local event not shipped yet; StoreError if the central store stays
    unreachable for `give_up_after_s` (None: keep trying)."""
    report = ShipReport()
    name = checkpoint_name(central.url)
    saved = local.checkpoint(name)
    after = int(saved["seq"]) if saved else 0
    # Events the central store has retained are gone from it: never send them again, even
    # with the local position lost.
    retained = _retrying(lambda: anchors(central)[1].get(f"{SHIP_PREFIX}{host}"),
                         _connection_lost, report, give_up_after_s, sleep)
    if retained is not None:
        after = max(after, retained.seq)
    while True:
        events = list(islice(local.read_raw(after_seq=after, chunk=batch), batch))
        if not events:
            break
        outgoing: list[Prepared] = [
            (e.stream, e.type, e.version, e.time_us, f"{SHIP_PREFIX}{host}", e.seq,
             e.payload.encode()) for e in events]
        result = _append_retrying(central, outgoing, [_origin(e) for e in events], report,
                                  give_up_after_s, sleep)
        report.shipped += result.appended
        report.duplicates += result.duplicates
        after = events[-1].seq
        local.append_prepared([], Checkpoint(name, {"seq": after}))
    report.last_seq = after
    _fold(central, report, give_up_after_s, sleep)
    return report


def _origin(event: RawEvent) -> bytes:
    """The host's envelope fields that the central row does not keep as they were."""
    return orjson.dumps({"hash": event.hash.hex(), "key": event.key,
                         "recorded_us": event.recorded_us, "source": event.source},
                        option=orjson.OPT_SORT_KEYS)


def _append_retrying(central: EventStore, batch: list[Prepared],
                     origins: Sequence[bytes | None],
                     report: ShipReport, give_up_after_s: float | None,
                     sleep: Callable[[float], None]) -> AppendResult:
    return _retrying(lambda: central.append_prepared(batch, origins=origins),
                     lambda e: isinstance(e, StoreError), report, give_up_after_s, sleep)


def _fold(central: EventStore, report: ShipReport, give_up_after_s: float | None,
          sleep: Callable[[float], None]) -> None:
    _retrying(lambda: Projector(central).catch_up(), _connection_lost, report,
              give_up_after_s, sleep)


def _connection_lost(e: Exception) -> bool:
    """A read of the central store failed because it is (for now) unreachable."""
    return isinstance(e, StoreError) or type(e).__module__.startswith(("sqlalchemy", "psycopg"))


def _retrying(attempt: Callable[[], T], transient: Callable[[Exception], bool],
              report: ShipReport, give_up_after_s: float | None,
              sleep: Callable[[float], None]) -> T:
    """`attempt()`, retried with exponential backoff (0.5 s doubling to 30 s) while it fails
    with a `transient` error, until `give_up_after_s` of waiting (None: forever); then a
    StoreError, which `watch --ship-to` reports before it tries again later."""
    delay, waited = 0.5, 0.0
    while True:
        try:
            return attempt()
        except Exception as e:
            if not transient(e):
                raise
            if give_up_after_s is not None and waited >= give_up_after_s:
                if isinstance(e, StoreError):
                    raise
                raise StoreError(f"the central store is unreachable: {first_line(e)}") from e
            report.retries += 1
            sleep(delay)
            waited += delay
            delay = min(delay * 2, 30.0)


def _waiter(stop: threading.Event) -> Callable[[float], None]:
    """A sleep that ends early when `stop` is set."""

    def wait(seconds: float) -> None:
        stop.wait(seconds)

    return wait


def ship_forever(local: EventStore, central_url: str, host: str, stop: threading.Event,
                 interval_s: float = 5.0,
                 on_error: Callable[[str], None] | None = None) -> None:
    """`watch --ship-to`: ship every `interval_s` until `stop` is set; an unreachable central
    store is retried (the host goes on diagnosing and remediating on its own meanwhile)."""
    from advisor.store import open_store

    central: EventStore | None = None
    while not stop.is_set():
        try:
            if central is None:
                central = open_store(central_url)
            ship(local, central, host, give_up_after_s=interval_s, sleep=_waiter(stop))
        except StoreError as e:
            if on_error is not None:
                on_error(str(e))
        stop.wait(interval_s)
    if central is not None:
        central.close()
