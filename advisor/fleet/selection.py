"""What a host ships to the fleet's central store, and what it keeps.

A busy inference server logs a line per request and a throughput line every few seconds;
shipped one by one, a thousand hosts send a central store hundreds of thousands of lines a
second, each checked and chained there. The fleet needs far less: every host keeps its own
store (and diagnoses from it), and the central store needs what a fleet view and a central
post-mortem read.

Shipped, each as it is:
- every event that is not a log line: diagnoses, incidents, plans and actions, corrections,
  GPU faults, heartbeats, retention records;
- every log line that is not routine: start-up (arguments, memory, weights, the KV cache,
  warm-up), warnings and errors, tracebacks, systemd's lifecycle messages, kernel lines
  (Xid, NVRM, the OOM killer) — a line no engine registered as routine ships, so a line
  nobody described is never held;
- GPU samples at the fleet's resolution: one per GPU every `gpu_every_s` (60 s), and every
  sample whose GPU processes changed (who holds the memory).

Kept on the host: the engines' routine serving lines (`Engine.routine` in the engine
registry: access logs of requests that succeeded, throughput lines, per-request
bookkeeping), firewall log lines, and the GPU samples between the fleet's. Each run of kept
events (at most `HELD_MAX`) travels as one `ship.held` event (`LinesHeld`): the range of
host seqs, how many each stream had, and the host's chain hash before the range — its
origin holds the hash after it. The central store checks that the range follows what it
holds and starts from the hash the chain had there; so each host's chain is still verified
across a gap, its signed heads still name shipped hashes, and the kept events, fetched from
the host when a central post-mortem needs them (`advisor.fleet.fetch`), are checked against
the range's two hashes.

The decision reads the stored payload text, not the parsed payload: the database cuts a log
line's message to its first `HEAD_CHARS` characters (`EventStore.glance`), which are searched
for the routine cues as JSON writes them, one substring test each; a longer line with no cue
there is read whole and judged on all of it. A kept line costs the host ~10 µs, most of it
SQLite reading the row (bench/fleet.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Final

import orjson

from advisor.core.engines import ROUTINE_CUES
from advisor.core.errors import StoreError
from advisor.core.events import canonical_payload
from advisor.core.payloads import LinesHeld
from advisor.store import EventStore
from advisor.store.chain import RawEvent
from advisor.store.glance import MESSAGE_KEY, Glance
from advisor.store.integrity.held import HELD_STREAM, HELD_TYPE

__all__ = [
    "GPU_EVERY_S",
    "HEAD_CHARS",
    "HELD_EVERY_S",
    "HELD_MAX",
    "HOST_ROUTINE",
    "MODES",
    "Selection",
    "next_batch",
    "routine_line",
    "selection_for",
]

GPU_EVERY_S: Final = 60.0
HELD_EVERY_S: Final = 60.0  # a run of kept events at the end waits at most this for company
# A run of kept events is at most this long: a central store fetches a range in one piece
# (`advisor.fleet.fetch`); at 200 lines a second, 25 s of them.
HELD_MAX: Final = 5000
# `ship --lines`: `fleet` ships what the fleet needs (above); `all` ships every event.
MODES: Final = ("fleet", "all")
# Routine lines of the host itself, not of an engine: the firewall's log of each packet.
HOST_ROUTINE: Final = ("[UFW BLOCK]", "[UFW AUDIT]", "[UFW ALLOW]")
_LOG: Final = "log.recorded"
# How much of a log line's message `EventStore.glance` reads for the decision; a longer line
# with no routine cue in it is read whole.
HEAD_CHARS: Final = 400
_GPU: Final = "gpu.sampled"


def _as_json(text: str) -> str:
    """`text` as it appears inside a JSON string (a quote is `\\"`)."""
    return orjson.dumps(text).decode()[1:-1]


_ROUTINE: Final = tuple(
    dict.fromkeys([_as_json(c.text) for c in ROUTINE_CUES] + [_as_json(t) for t in HOST_ROUTINE])
)


@dataclass
class _Kept:
    """A run of consecutive kept events, as its digest needs them."""

    first: Glance
    from_hash: bytes  # the host's chain hash before the run
    last: Glance
    streams: dict[str, int]

    def take(self, event: Glance) -> None:
        self.last = event
        self.streams[event.stream] = self.streams.get(event.stream, 0) + 1

    @property
    def events(self) -> int:
        return self.last.seq - self.first.seq + 1

    def event(self, host: str) -> RawEvent:
        """The `ship.held` event standing for the run: keyed and chained as its last event."""
        payload = LinesHeld(
            first_seq=self.first.seq,
            last_seq=self.last.seq,
            from_hash=self.from_hash.hex(),
            first_time_us=self.first.time_us,
            last_time_us=self.last.time_us,
            streams=self.streams,
        )
        return RawEvent(
            seq=self.last.seq,
            stream=f"{host}/{HELD_STREAM}",
            type=HELD_TYPE,
            version=payload.version,
            time_us=self.last.time_us,
            recorded_us=self.last.recorded_us,
            source="",
            key=0,
            payload=canonical_payload(payload).decode(),
            hash=self.last.hash,
            origin=None,
        )


@dataclass
class Selection:
    """Splits a host's events into those shipped and those kept, across rounds of shipping.

    A run of kept events ships as its digest as soon as an event after it ships; a run at
    the end of what the host has so far stays pending (`pending`) and grows in the next
    round, until it is `held_every_s` old (then `due` gives its digest): a host that only
    serves sends one digest a minute, not one a round. It also remembers, per GPU, when it
    last shipped a sample and which processes it had (a new `Selection` ships the next
    sample of each GPU), as of the last batch the central store took (`confirm`)."""

    gpu_every_s: float = GPU_EVERY_S
    held_every_s: float = HELD_EVERY_S
    shipped_gpu: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    # `shipped_gpu` as of the last batch the central store took (`confirm`): a round that
    # failed is judged again from it (`resume`), not from samples that never arrived
    confirmed_gpu: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    pending: _Kept | None = None
    kept: int = 0  # events kept since the last `resume`

    def _routine_sample(self, event: Glance) -> bool:
        """Whether the host keeps this GPU sample (one between the fleet's, its processes
        the same)."""
        try:
            processes = orjson.dumps(orjson.loads(event.text or "").get("processes"))
        except (orjson.JSONDecodeError, AttributeError):
            return False  # not what a sample looks like: ship it, the central store judges
        last = self.shipped_gpu.get(event.stream)
        if (
            last is not None
            and last[1] == processes
            and 0 <= event.time_us - last[0] < self.gpu_every_s * 1_000_000
        ):
            return True
        self.shipped_gpu[event.stream] = (event.time_us, processes)
        return False

    def resume(self, seq: int, hash_: bytes) -> tuple[int, bytes]:
        """Where to read on from, the central store standing at host seq `seq` (this
        store's hash there `hash_`): after the pending run when it starts right there, else
        at `seq` (the pending run is dropped: the central store is elsewhere)."""
        self.kept = 0
        self.shipped_gpu = dict(self.confirmed_gpu)
        run = self.pending
        if run is not None and run.first.seq == seq + 1 and run.from_hash == hash_:
            return run.last.seq, run.last.hash
        self.pending = None
        return seq, hash_

    def confirm(self) -> None:
        """The central store took the batch `pick` made (and `due`'s digest, if any)."""
        self.confirmed_gpu = dict(self.shipped_gpu)

    def pick(
        self,
        chunk: Sequence[Glance],
        host: str,
        before: bytes,
        read: Callable[[Sequence[int]], list[RawEvent]],
    ) -> list[RawEvent]:
        """`chunk` as shipped: its events that ship (read whole through `read`), each run of
        kept ones before one of them replaced by its `ship.held` event; `before` is the
        host's chain hash before the chunk. A run at the chunk's end stays `pending`.

        A log line whose first `HEAD_CHARS` hold no routine cue but which goes on past them
        is read whole and judged on all of it (TGI's `Success` comes after the request's
        parameters)."""
        verdicts: list[bool] = []  # each event's, whole lines judged below
        longer: list[int] = []
        for event in chunk:
            text = event.text
            if event.type == _LOG:
                routine = text is not None and routine_line(text)
                if not routine and text is not None and len(text) >= HEAD_CHARS:
                    longer.append(event.seq)
            else:  # of the rest, only GPU samples are ever kept
                routine = event.type == _GPU and self._routine_sample(event)
            verdicts.append(routine)
        whole = {e.seq: e for e in read(longer)} if longer else {}
        spans: list[Glance | RawEvent] = []  # an event to read whole, or a digest
        run, prev = self.pending, before
        kept = 0
        for event, routine in zip(chunk, verdicts, strict=True):
            read_whole = whole.get(event.seq)
            if read_whole is not None:
                routine = routine_line(_message(read_whole.payload))
            if routine:
                kept += 1
                if run is None:
                    run = _Kept(event, prev, event, {})
                run.take(event)
                if run.events >= HELD_MAX:  # full: a range is fetched in one piece
                    spans.append(run.event(host))
                    run = None
            else:
                if run is not None:
                    spans.append(run.event(host))
                    run = None
                spans.append(read_whole or event)
            prev = event.hash
        self.pending = run
        self.kept += kept
        rest = iter(read([s.seq for s in spans if isinstance(s, Glance)]))
        out: list[RawEvent] = []
        for span in spans:
            if isinstance(span, RawEvent):
                out.append(span)
                continue
            read_back = next(rest, None)
            if read_back is None or read_back.seq != span.seq:
                raise StoreError(f"event {span.seq} of this store went while it was shipped")
            out.append(read_back)
        return out

    def due(self, host: str, now_us: int, *, flush: bool = False) -> list[RawEvent]:
        """The pending run's digest, when it is `held_every_s` old by its first event's
        recorded time (or `flush`); it is then no longer pending."""
        run = self.pending
        if run is None:
            return []
        if not flush and now_us - run.first.recorded_us < self.held_every_s * 1_000_000:
            return []
        self.pending = None
        return [run.event(host)]


def selection_for(mode: str, gpu_every_s: float = GPU_EVERY_S) -> Selection | None:
    """The selection a `ship --lines` mode names: None ships every event."""
    if mode not in MODES:
        raise ValueError(f"what to ship is one of {', '.join(MODES)}, not {mode!r}")
    return Selection(gpu_every_s) if mode == "fleet" else None


def _message(payload: str) -> str:
    """A stored log line's message on, as JSON writes it (with the fields after it)."""
    start = payload.find(MESSAGE_KEY)
    return "" if start < 0 else payload[start + len(MESSAGE_KEY) :]


def routine_line(message: str) -> bool:
    """Whether a log line is routine: its message (as stored: JSON-escaped), or its first
    few hundred characters, holds a routine cue."""
    for cue in _ROUTINE:  # noqa: SIM110 - a plain loop: any() with a generator is slower here
        if cue in message:
            return True
    return False


def next_batch(
    local: EventStore,
    host: str,
    after: int,
    before: bytes,
    batch: int,
    selection: Selection | None,
) -> tuple[Sequence[RawEvent | Glance], list[RawEvent]]:
    """The next `batch` events after `after` (the hash there `before`), and what of them to
    send: all of them as they are, or with `selection` what the fleet needs (each event
    read only as far as deciding needs, the shipped ones whole) and, once the store has no
    more, the kept run that has waited long enough."""
    if selection is None:
        chunk = list(islice(local.read_raw(after_seq=after, chunk=batch), batch))
        _refuse_relayed(chunk)
        return chunk, chunk
    glances = local.glance(after_seq=after, limit=batch, message_chars=HEAD_CHARS)
    _refuse_relayed(glances)
    sent = selection.pick(glances, host, before, local.read_raw_at) if glances else []
    if len(glances) < batch:
        sent += selection.due(host, time.time_ns() // 1000)
    return glances, sent


def _refuse_relayed(chunk: Sequence[RawEvent | Glance]) -> None:
    relayed = next(
        (e for e in chunk if (e.relayed if isinstance(e, Glance) else e.origin is not None)),
        None,
    )
    if relayed is not None:
        raise StoreError(
            f"event {relayed.seq} of this store was shipped here from another "
            "host: ship a host's own store, not a central one"
        )
