"""Shipping a host's events to a central store (PostgreSQL) for the fleet view.

Each host keeps its own store and stays autonomous; `ship` copies its events, in sequence
order (so in order per stream), in batches, to the central store. An event arrives there with
source `ship:<host>` and its local sequence number as key. The payload travels as the host
stored it, and the rest of the host's envelope (recorded time, source, key, hash) as the
event's `origin`, so each host's own chain can be verified in the central store
(`advisor verify`).

The central store decides, not the shipper. In PostgreSQL a shipper appends only through
`advisor_ship()` (migration 0009), which binds its role to its host, recomputes each event's
host hash, refuses an event that does not extend the host's last shipped hash, takes an event
already there as a duplicate only when its hash is the one stored, and numbers and chains the
central events itself. A SQLite central store (development, tests) gets the same checks
(advisor.store.integrity.central).

The shipper does not trust its own bookmark either: at the start of every ship (so each round
of `watch --ship-to`) it reads the host's last seq and hash in the central store and compares
them with its own chain at that seq. A central store behind the bookmark (restored from an
older backup) is refilled from where it stands; a hash that differs (this store's history
rewritten after it was shipped, or another host shipping under this name) is an
IntegrityError naming the first host seq that differs, and nothing is shipped.

The local position is also saved as a checkpoint in the local store (`advisor status`). While
the central store is unreachable, ship waits and retries with exponential backoff for
`give_up_after_s`; every central connection is bounded (advisor.store.engine.pg_timeouts), so
a server that accepts connections and never answers is given up on too. With a host key, the
host's chain head is signed after each batch and stored centrally (`advisor_host_heads`).
The central projections are folded by ship only where the caller may write them (the owner:
development, tests); with a shipping role the central store's owner folds (`advisor fold`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from typing import Final, NoReturn, TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception, wait_exponential

from advisor.core.errors import AdvisorError, IntegrityError, StoreError
from advisor.fleet.fetch import FetchReport, answer_requests
from advisor.fleet.selection import Selection, next_batch
from advisor.store import Checkpoint, EventStore
from advisor.store.chain import GENESIS_HASH, RawEvent
from advisor.store.engine import first_line, redact
from advisor.store.integrity.binding import check_binding
from advisor.store.integrity.central import (
    Position,
    Unreachable,
    central_events,
    central_position,
    is_database_error,
    is_transient,
    may_fold,
    writer_for,
)
from advisor.store.integrity.heads import HostKey
from advisor.store.integrity.retained import anchors, last_seq
from advisor.store.store import SHIP_PREFIX
from advisor.views.fold.projector import Projector

BATCH: Final = 5000
REPEAT_ERROR_S: Final = 60.0  # `ship_forever` repeats an unchanged error at most this often
# While the central store is unreachable: waits of 0.5 s doubling up to 30 s.
_BACKOFF: Final = wait_exponential(multiplier=0.5, max=30.0)
T = TypeVar("T")


@dataclass
class ShipReport:
    shipped: int = 0
    duplicates: int = 0
    retries: int = 0
    last_seq: int = 0
    central_seq: int = 0  # the host's last seq in the central store when the ship started
    behind: int = 0  # events the central store had lost behind the local position
    heads: int = 0  # signed heads stored centrally
    held: int = 0  # host events kept on the host (in `ship.held` digests, or pending)
    folded: bool = False  # ship folded the central projections (the caller may write them)
    fetch: FetchReport = field(default_factory=FetchReport)  # kept ranges the central asked for

    def count(self, appended: int, duplicates: int) -> None:
        """Count one batch the central store took."""
        self.shipped += appended
        self.duplicates += duplicates


def checkpoint_name(central_url: str) -> str:
    return f"ship:{redact(central_url)}"


def ship(
    local: EventStore,
    central: EventStore,
    host: str,
    *,
    batch: int = BATCH,
    give_up_after_s: float | None = 300.0,
    sleep: Callable[[float], None] = time.sleep,
    key: HostKey | None = None,
    store_label: str = "",
    key_path: str = "",
    selection: Selection | None = None,
    fold: bool = True,
) -> ShipReport:
    """Ship every local event the central store does not hold yet, then answer its requests
    for kept ranges (`advisor.fleet.fetch`); IntegrityError when it holds something else for
    this host, StoreError when it stays unreachable for `give_up_after_s` (None: keep
    trying). With `key` (at `key_path`), sign the host's chain head after each batch and
    store it centrally (`store_label` names the local store in it) — first making sure the
    central store takes heads signed with it: PrerequisiteError, nothing shipped, when the
    host's binding would refuse them. `selection`: what the fleet needs, else every event;
    `fold` False: the owner's fold (`advisor fold`) folds the central store."""
    report, writer = ShipReport(), writer_for(central)

    def retrying(attempt: Callable[[], T]) -> T:
        return _retrying(attempt, report, give_up_after_s, sleep, central.display_url)

    if key is not None and writer.keeps_heads:
        retrying(lambda: check_binding(central, host, key.public_key, key_path))

    saved = local.checkpoint(name := checkpoint_name(central.url))
    bookmark = int(saved["seq"]) if saved else 0
    position = retrying(lambda: central_position(central, host))
    there = retrying(lambda: check_position(local, central, host, position))
    report.central_seq, report.behind = position.seq, max(0, bookmark - position.seq)
    after, before = position.seq, there  # where reading goes on, and the hash there
    if selection is not None:  # after the kept run still pending, if it starts there
        after, before = selection.resume(position.seq, there)
    while True:
        chunk, sent = next_batch(local, host, after, before, batch, selection)
        if chunk:
            after, before = chunk[-1].seq, chunk[-1].hash
        if sent:
            report.count(*retrying(partial(writer.ship, host, sent, position)))
            if selection is not None:
                selection.confirm()  # the central store holds what it judged by now
            position = Position(sent[-1].seq, sent[-1].hash)
            local.append_prepared([], Checkpoint(name, {"seq": position.seq}))
            if key is not None and writer.keeps_heads:
                head = key.sign(host, position.seq, sent[-1].hash, _now_us(), store_label)
                report.heads += retrying(partial(writer.store_head, head))
        if len(chunk) < batch:
            break  # the last of the store's events: no need to ask for more
    report.held = 0 if selection is None else selection.kept
    report.fetch = answer_requests(local, writer, host, retrying)
    if position.seq != bookmark and position.seq == report.central_seq:
        local.append_prepared([], Checkpoint(name, {"seq": position.seq}))  # nothing sent: moved
    report.last_seq = position.seq
    report.folded = fold and retrying(lambda: _fold(central))
    return report


def _now_us() -> int:
    return time.time_ns() // 1000


def open_central(
    url: str, *, give_up_after_s: float | None = 300.0, sleep: Callable[[float], None] = time.sleep
) -> EventStore:
    """`open_store(url)`, retried like a ship while the server is unreachable."""
    from advisor.store import open_store

    return _retrying(lambda: open_store(url), ShipReport(), give_up_after_s, sleep, redact(url))


# -- checking the central store against this one -------------------------------------------


def check_position(local: EventStore, central: EventStore, host: str, position: Position) -> bytes:
    """IntegrityError unless this store's chain holds, at the host's last seq in the central
    store, the event the central store holds there; this store's hash there (the genesis
    hash at seq 0)."""
    if position.seq == 0:
        return GENESIS_HASH
    mine = _local_event(local, position.seq)
    if mine is None:
        last = last_seq(local)
        raise IntegrityError(
            f"host {host}: the central store {central.display_url} holds its events up to its "
            f"seq {position.seq}, but this store ends at seq {last}: it is not the store that "
            f"shipped them (a store restored from an older backup, or another host shipping as "
            f"{host}); nothing shipped",
            first_bad_seq=last + 1,
        )
    if position.hash is not None and mine.hash == position.hash:
        return mine.hash
    if position.hash is None:  # shipped before origins were kept: compare the content
        shipped = central_events(central, host, [position.seq]).get(position.seq)
        if shipped is None or shipped.matches(mine):
            return mine.hash
    first = _first_difference(local, central, host, position.seq)
    raise IntegrityError(
        f"host {host}: its event {first} is not the one it shipped to {central.display_url} "
        f"(the hashes differ): this store's history was rewritten after it was shipped, or "
        f"another host ships as {host}; nothing shipped",
        first_bad_seq=first,
    )


def _first_difference(local: EventStore, central: EventStore, host: str, differs_at: int) -> int:
    """The first host seq whose event differs (a chain differs from there on): a binary
    search between the first the central store holds and one known to differ."""
    anchor = anchors(central)[1].get(f"{SHIP_PREFIX}{host}")
    lo, hi = (anchor.seq if anchor is not None else 1), differs_at

    def differs(k: int) -> bool:
        mine = _local_event(local, k)
        if anchor is not None and k == anchor.seq:
            return mine is None or mine.hash != bytes.fromhex(anchor.hash)
        theirs = central_events(central, host, [k]).get(k)
        return theirs is not None and (mine is None or not theirs.matches(mine))

    while lo < hi:
        mid = (lo + hi) // 2
        if differs(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _local_event(local: EventStore, seq: int) -> RawEvent | None:
    got = list(islice(local.read_raw(after_seq=seq - 1, chunk=1), 1))
    return got[0] if got and got[0].seq == seq else None


def _fold(central: EventStore) -> bool:
    """Fold the central projections when the caller may write them (else the owner does)."""
    if not may_fold(central):
        return False
    try:
        Projector(central).catch_up()
    except Exception as e:
        if is_database_error(e) and is_transient(e):
            raise Unreachable(
                f"the central store {central.display_url} is unreachable: {first_line(e)}"
            ) from e
        raise
    return True


# -- retrying -----------------------------------------------------------------------------------


def _retrying(
    attempt: Callable[[], T],
    report: ShipReport,
    give_up_after_s: float | None,
    sleep: Callable[[float], None],
    where: str,
) -> T:
    """`attempt()`, retried with exponential backoff (0.5 s doubling to 30 s) while it fails
    with a transient error, until `give_up_after_s` have passed, counting both the waits and
    the time the attempts took (a connect that times out); then a StoreError, which
    `watch --ship-to` reports before it tries again later."""
    trying = 0.0  # seconds the failed attempts took

    def timed() -> T:
        nonlocal trying
        started = time.monotonic()
        try:
            return attempt()
        except Exception:
            trying += time.monotonic() - started
            raise

    def spent(state: RetryCallState) -> float:
        return state.idle_for + trying  # idle_for: the waits so far

    def pause(state: RetryCallState) -> float:
        delay = _BACKOFF(state)
        return delay if give_up_after_s is None else min(delay, give_up_after_s - spent(state))

    def give_up(state: RetryCallState) -> bool:
        return give_up_after_s is not None and spent(state) >= give_up_after_s

    def gave_up(state: RetryCallState) -> NoReturn:
        e = state.outcome.exception() if state.outcome is not None else None
        assert e is not None  # retried only after a failure
        raise Unreachable(
            f"the central store {where} is unreachable (gave up after "
            f"{spent(state):.0f} s): {_reason(e)}"
        ) from e

    def count(_state: RetryCallState) -> None:
        report.retries += 1

    try:
        return Retrying(
            retry=retry_if_exception(is_transient),
            wait=pause,
            stop=give_up,
            sleep=sleep,
            before_sleep=count,
            retry_error_callback=gave_up,
        )(timed)
    except Exception as e:
        if not is_transient(e) and is_database_error(e):
            raise StoreError(f"the central store {where}: {first_line(e)}") from e
        raise


def _reason(e: BaseException) -> str:
    text_ = first_line(e)
    for prefix in ("the central store ", "cannot open the store ", "cannot append to "):
        if text_.startswith(prefix) and ": " in text_:
            return text_.split(": ", 1)[1]
    return text_


def _waiter(stop: threading.Event) -> Callable[[float], None]:
    """A sleep that ends early when `stop` is set."""

    def wait(seconds: float) -> None:
        stop.wait(seconds)

    return wait


def ship_forever(
    local: EventStore,
    central_url: str,
    host: str,
    stop: threading.Event,
    interval_s: float = 5.0,
    on_error: Callable[[str], None] | None = None,
    on_shipped: Callable[[ShipReport], None] | None = None,
    on_note: Callable[[str], None] = lambda _words: None,
    key: HostKey | None = None,
    store_label: str = "",
    key_path: str = "",
    selection: Selection | None = None,
) -> None:
    """`watch --ship-to`: ship every `interval_s` until `stop` is set. Whatever fails — the
    central store unreachable, a refusal, an integrity error, a bug — is reported through
    `on_error` (an unchanged error at most once a minute) and tried again next round: the
    host goes on diagnosing and remediating on its own meanwhile. `on_note` hears what it
    sent a central store that asked for kept ranges, or why not (once, until that changes)."""
    central: EventStore | None = None
    last_error, last_error_at, cannot = "", 0.0, None
    while not stop.is_set():
        try:
            if central is None:
                central = open_central(central_url, give_up_after_s=interval_s, sleep=_waiter(stop))
            report = ship(
                local,
                central,
                host,
                give_up_after_s=interval_s,
                sleep=_waiter(stop),
                key=key,
                store_label=store_label,
                key_path=key_path,
                selection=selection,
            )
            for words in report.fetch.words(said=cannot):
                on_note(words)
            cannot = report.fetch.cannot
            if on_shipped is not None:
                on_shipped(report)
            last_error = ""
        except Exception as e:
            message = (
                str(e)
                if isinstance(e, AdvisorError)
                else (f"unexpected {type(e).__name__}: {first_line(e)}")
            )
            now = time.monotonic()
            if on_error is not None and (
                message != last_error or now - last_error_at >= REPEAT_ERROR_S
            ):
                on_error(message)
                last_error, last_error_at = message, now
            if central is not None and not isinstance(e, AdvisorError):
                central.close()  # a fresh engine next round
                central = None
        stop.wait(interval_s)
    if central is not None:
        central.close()
