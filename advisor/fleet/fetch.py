"""Fetching the lines a host kept, when a central post-mortem needs them.

A host ships what the fleet needs and keeps its routine lines (`advisor.fleet.selection`);
each run of them stands in the central store as a `ship.held` range. When a post-mortem in
the central store needs them — the requests a server was serving when it died, its
throughput lines before a KV-cache OOM — the owner asks (`advisor fetch HOST/UNIT`, `ask_for`):
one request a range that holds the service's lines (or its host's GPU samples) in the
incident's window, in `fetch_requests`. The host's shipper reads its open requests every
round (`answer_requests`, after shipping) and sends each range whole; the central store
takes it only as the events the host kept (`advisor.store.integrity.kept`: every seq, each
hash recomputed from the range's starting hash, the last at its closing hash), stores them
with source `kept:HOST`, and the owner's fold merges them into their runs and GPU samples
(the fold does not depend on the order events arrive in). A host that no longer has a range
(retained there) answers with why.

The owner needs nothing open towards the hosts: the request travels the way the events do,
from the host to the central store, on the host's own role and schedule.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from typing import Final, Protocol, TypeVar

from advisor.core.errors import IntegrityError
from advisor.store import EventStore
from advisor.store.chain import RawEvent
from advisor.store.integrity.central import Writer
from advisor.store.integrity.fetchrequests import (
    Answer,
    RequestsUnreadable,
    answers,
    ask,
    open_requests,
)
from advisor.store.integrity.kept import Kept, fetched_keys, kept_ranges

__all__ = [
    "PER_ROUND",
    "Asked",
    "FetchReport",
    "Retrying",
    "answer_requests",
    "ask_for",
    "gpu_stream",
    "needed",
    "wait_answered",
]

PER_ROUND: Final = 20  # ranges a shipper answers a round (each at most HELD_MAX events)
T = TypeVar("T")


def gpu_stream(stream: str, host: str) -> bool:
    """Whether `stream` is one of `host`'s GPUs (`HOST/gpuN`)."""
    name = stream.removeprefix(f"{host}/")
    return name != stream and name.startswith("gpu") and name[3:].isdigit()


@dataclass
class FetchReport:
    """What a shipper answered this round."""

    ranges: int = 0
    events: int = 0  # events appended centrally (a range sent before counts none)
    declined: list[str] = field(default_factory=list)  # the ranges it could not send, why
    cannot: str | None = None  # why it could not read the requests (an older central store)

    def words(self, said: str | None = None) -> list[str]:
        """The round's answers in words for the agent's log; why it cannot read the
        requests only when that is not what it `said` last round."""
        out = (
            [
                f"sent {self.events:,} kept events of {self.ranges} range(s) the central "
                "store asked for"
            ]
            if self.ranges
            else []
        )
        return out + self.declined + ([self.cannot] if self.cannot and self.cannot != said else [])


class Retrying(Protocol):
    """How the shipper calls the central store: retried while it is unreachable."""

    def __call__(self, attempt: Callable[[], T]) -> T: ...


def answer_requests(
    local: EventStore, writer: Writer, host: str, retrying: Retrying, *, limit: int = PER_ROUND
) -> FetchReport:
    """Send the central store the ranges it asked this host for (the oldest `limit`): each
    read back from this store whole, or answered with why not (no longer here, or not the
    events this host shipped the range for: an IntegrityError, reported and answered). A
    central store without requests to read (older than migration 0014, or a role without
    SELECT on them) is said in `cannot`, and shipping goes on."""
    report = FetchReport()
    try:
        requests = retrying(partial(open_requests, writer.central, host, limit))
    except RequestsUnreadable as e:
        report.cannot = str(e)
        return report
    for request in requests:
        got = _range(local, request.first_seq, request.held_key)
        note = ""
        if got is None:
            note = f"host {host} no longer holds its events {request.first_seq}..{request.held_key}"
        try:
            appended = retrying(partial(writer.ship_kept, host, request.held_key, got or [], note))
        except IntegrityError as e:
            note = str(e)
            try:
                retrying(partial(writer.ship_kept, host, request.held_key, [], note))
            except IntegrityError as again:
                note = str(again)
            appended = 0
        report.ranges += 1
        report.events += appended
        if note:
            report.declined.append(note)
    return report


def _range(local: EventStore, first: int, last: int) -> list[RawEvent] | None:
    """This store's events `first`..`last`, all of them; None when some are not here."""
    n = last - first + 1
    got = list(islice(local.read_raw(after_seq=first - 1, chunk=min(n, 5000)), n))
    if len(got) != n or got[0].seq != first or got[-1].seq != last:
        return None
    return got


@dataclass(frozen=True)
class Asked:
    """The ranges a post-mortem's window needs from a host, and where each stands."""

    host: str
    stream: str
    ranges: list[Kept]
    fetched: set[int]  # the ranges (by last host seq) whose events are here
    answers: dict[int, Answer]  # the requests made for the others
    added: int  # requests this call made

    @property
    def waiting(self) -> list[Kept]:
        """The ranges asked for and not answered yet."""
        return [
            r
            for r in self.ranges
            if r.key not in self.fetched
            and (r.key not in self.answers or self.answers[r.key].answered_us is None)
        ]

    @property
    def declined(self) -> dict[int, str]:
        """The ranges the host answered without events, and why."""
        return {
            k: a.note or "the host sent no events"
            for k, a in self.answers.items()
            if a.answered_us is not None and k not in self.fetched
        }

    def lines(self, fetched: bool) -> int:
        """How many of the service's lines the ranges fetched (or not fetched) hold."""
        return sum(
            r.streams.get(self.stream, 0) for r in self.ranges if (r.key in self.fetched) == fetched
        )


def needed(ranges: Sequence[Kept], host: str, stream: str) -> list[Kept]:
    """The ranges that hold `stream`'s lines or the host's GPU samples."""
    return [r for r in ranges if any(s == stream or gpu_stream(s, host) for s in r.streams)]


def ask_for(central: EventStore, host: str, unit: str, window: tuple[int, int], by: str) -> Asked:
    """Ask `host` for the ranges it kept of `HOST/UNIT`'s lines and its GPU samples between
    the window's two times (µs), those not here and not asked for yet."""
    stream = f"{host}/{unit}"
    ranges = needed(kept_ranges(central, host, *window), host, stream)
    fetched = fetched_keys(central, host, [r.key for r in ranges])
    missing = [r for r in ranges if r.key not in fetched]
    added, asked = ask(central, host, missing, by, time.time_ns() // 1000) if missing else (0, {})
    return Asked(host, stream, ranges, fetched, asked, added)


def wait_answered(
    central: EventStore,
    asked: Asked,
    timeout_s: float,
    *,
    sleep: Callable[[float], None] = time.sleep,
    every_s: float = 0.5,
) -> Asked:
    """`asked` once the host answered every request (or `timeout_s` passed): read again."""
    deadline = time.monotonic() + timeout_s
    while True:
        keys = [r.key for r in asked.ranges if r.key not in asked.fetched]
        got = answers(central, asked.host, keys)
        asked = Asked(
            asked.host,
            asked.stream,
            asked.ranges,
            fetched_keys(central, asked.host, [r.key for r in asked.ranges]),
            got,
            asked.added,
        )
        if not asked.waiting or time.monotonic() >= deadline:
            return asked
        sleep(every_s)
