"""Live follow: store each entry moments after it comes, and still in batches while the
stream flows.

A reader thread hands records over through a bounded queue (a slow store slows the reader
instead of growing memory). What has come is committed, batch and checkpoint in one
transaction, as soon as the stream is quiet for `idle_s` (a few milliseconds: entries that
arrive together, like the lines of one traceback, go in one transaction), or once the oldest
record waiting has waited `max_wait_s` while entries keep coming, or when a batch is full.
Quick commits are budgeted: `burst` of them at once, then one every `min_gap_s` (a token
bucket). A crash after a quiet spell, which journalctl hands over in a few pieces, is stored
within milliseconds; under load commits come about every `min_gap_s` (each one also runs
the diagnosis after it), so batches grow with the rate instead of one transaction a line.
While nothing is pending the loop blocks on the queue: no polling.

A stop (`stop` set, by SIGTERM or Ctrl-C through `signals_set`) is a message on the same
queue: the loop ends between two records, commits what is pending, and returns. An
exception raised at any moment instead (the old way) could land inside a commit and leave
that connection's write lock held while the last commit waited on it."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from advisor.core.records import Record
from ingest.batches import Ingester


class Selection(Protocol):
    """Which followed entries are stored. `name` goes into the checkpoint's name: another
    selection has another position."""

    @property
    def name(self) -> str: ...

    def keep(self, event: Mapping[str, Any]) -> bool:
        """Whether to store this entry (the event `entry_event` built)."""

    def tick(self) -> None:
        """Called when the stream pauses and at least every half second while it flows."""


# Does this entry (the event `entry_event` built) need storing at once? One that does not
# may wait for company (`flush_on_idle`). The pipeline says which (`pipeline.pacing`).
Urgent = Callable[[Mapping[str, Any]], bool]


@dataclass(frozen=True)
class Timing:
    idle_s: float = 0.005  # a pause this long commits what is pending
    burst: int = 8  # quick commits at once...
    min_gap_s: float = 0.05  # ...then one this often, under load...
    max_wait_s: float = 0.1  # ...and a record waits at most this long while entries flow
    routine_wait_s: float = 5.0  # what `urgent` calls routine waits this long for company
    tick_s: float = 0.5  # the selection's tick, at least this often
    save_every_s: float = 5.0  # the position past dropped entries, at most this often
    max_block_s: float = 60.0  # nothing pending: wake this seldom (a bound, not a poll)


class Reader(Ingester):
    """An ingester that also moves its saved position past entries it does not store."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.unsaved = False  # skipped entries after the saved position
        self.saved_at = time.monotonic()

    def skip(self, record: Record) -> None:
        if record.position is not None:
            self._position = record.position
            self.unsaved = True

    def offer(self, record: Record, selection: Selection | None) -> bool:
        """Store `record` if the selection keeps it (malformed ones are, to be counted), else
        move the saved position past it; whether it was stored."""
        if selection is not None and not kept(record, selection):
            self.skip(record)
            return False
        self.add(record)
        return True

    def flush(self) -> Any:
        result = super().flush()
        self.unsaved = False
        self.saved_at = time.monotonic()
        return result


def kept(record: Record, selection: Selection) -> bool:
    """Malformed entries are kept (to be counted): which unit they are about is unknown."""
    return record.event is None or selection.keep(record.event)


_END = object()
_STOP = object()


def flush_on_idle(
    ingester: Reader,
    records: Iterator[Record],
    selection: Selection | None = None,
    timing: Timing = Timing(),
    stop: threading.Event | None = None,
    urgent: Urgent | None = None,
) -> None:
    """Add records as they come and commit them as the module says, until the records end
    or `stop` is set.

    Entries the selection drops move the saved position too, committed at most every
    `save_every_s` (a restart re-reads at most those, and drops them again). With `urgent`,
    a batch with no urgent entry (a busy server's request lines) is committed once its
    oldest has waited `routine_wait_s` (or when it is full): one transaction every few seconds
    rather than one every `min_gap_s`; an urgent entry commits as before."""
    pending: queue.Queue[object] = queue.Queue(maxsize=10_000)

    def pump() -> None:
        try:
            for record in records:
                pending.put(record)
        except BaseException as e:  # surfaced in the caller's thread
            pending.put(e)
        pending.put(_END)

    def stopper() -> None:
        assert stop is not None
        stop.wait()
        pending.put(_STOP)

    threading.Thread(target=pump, name="journalctl-reader", daemon=True).start()
    if stop is not None:
        threading.Thread(target=stopper, name="follow-stop", daemon=True).start()
    loop = _Loop(ingester, selection, timing, urgent)
    try:
        while True:
            try:
                item = pending.get(timeout=loop.timeout())
            except queue.Empty:
                loop.quiet()
                continue
            if item is _END or item is _STOP or (stop is not None and stop.is_set()):
                break  # (entries read ahead of a stop are left for the next start)
            if isinstance(item, BaseException):
                raise item
            assert isinstance(item, Record)
            loop.take(item)
    finally:
        ingester.flush()


class _Loop:
    """When to commit, tick and save: the clock of `flush_on_idle`."""

    def __init__(
        self,
        ingester: Reader,
        selection: Selection | None,
        timing: Timing,
        urgent: Urgent | None = None,
    ) -> None:
        self.ingester = ingester
        self.selection = selection
        self.timing = timing
        self.urgent = urgent
        self.first_at: float | None = None  # when the oldest pending record came
        self.hurry = False  # an urgent record is pending
        self.tokens = float(timing.burst)  # quick commits left (see the module)
        self.counted_at = time.monotonic()
        self.next_tick = 0.0

    def timeout(self) -> float:
        """How long to wait for the next record before `quiet`."""
        now = time.monotonic()
        t = self.timing
        if self.selection is not None and now >= self.next_tick:
            self.selection.tick()
            self.next_tick = now + t.tick_s
        if self.first_at is not None and not self.hurry:
            wait = self._due() - now
            if self.selection is not None:
                wait = min(wait, self.next_tick - now)  # the tick goes on meanwhile
            return max(0.0, wait)
        if self.first_at is not None:
            short = 1.0 - self._tokens(now)
            quiet = max(t.idle_s, short * t.min_gap_s)
            return max(0.0, min(quiet, self._due() - now))
        wait = t.max_block_s
        if self.selection is not None:
            wait = min(wait, self.next_tick - now)
        if self.ingester.unsaved:
            wait = min(wait, self.ingester.saved_at + t.save_every_s - now)
        return max(0.0, wait)

    def take(self, record: Record) -> None:
        if not self.ingester.offer(record, self.selection):
            return
        if record.event is not None and not self.ingester.pending:
            self.first_at = None  # a full batch committed itself
            self.hurry = False
            return
        if not self.hurry:
            self.hurry = self.urgent is None or record.event is None or self.urgent(record.event)
        now = time.monotonic()
        if self.first_at is None:
            self.first_at = now
        elif now >= self._due():
            self._commit()

    def quiet(self) -> None:
        """Nothing came for the time `timeout` said: commit what waits, or the position —
        unless what waits is routine and its time has not come (the time-out was a tick)."""
        if self.first_at is not None and not self.hurry and time.monotonic() < self._due():
            return
        if self.first_at is not None or (
            self.ingester.unsaved
            and time.monotonic() - self.ingester.saved_at >= self.timing.save_every_s
        ):
            self._commit()

    def _due(self) -> float:
        """When what is pending is committed even while entries keep coming: the oldest's
        arrival plus the wait of its kind (`max_wait_s`, or `routine_wait_s` while nothing
        urgent is pending)."""
        assert self.first_at is not None
        wait = self.timing.max_wait_s if self.hurry else self.timing.routine_wait_s
        return self.first_at + wait

    def _commit(self) -> None:
        self.ingester.flush()
        self.first_at = None
        self.hurry = False
        now = time.monotonic()
        self.tokens = max(0.0, self._tokens(now) - 1.0)
        self.counted_at = now

    def _tokens(self, now: float) -> float:
        t = self.timing
        return min(float(t.burst), self.tokens + (now - self.counted_at) / t.min_gap_s)
