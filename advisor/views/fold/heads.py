"""Each stream's newest events (`stream_heads`): the newest event's seq and time, the newest
heartbeat's seq, and the newest event a host shipped, with that host.

What `advisor hosts` needs of every host is there in one small table, where it used to search
`events` stream by stream (on a central store, on every partition). A head is a function of
the set of events folded, merged by seq (`merge`): the newest by seq wins, whichever fold saw
it first. Readers add the events the fold has not reached yet the same way
(`advisor.views.read.hosts`), so what they show does not wait for the next fold. A host's
kept events fetched later (source `kept:HOST`, `advisor.fleet.fetch`) are old: no head.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from sqlalchemy import Connection, delete, select

from advisor.core.events import StoredEvent
from advisor.core.heartbeat import HEARTBEAT
from advisor.store.integrity.kept import KEPT_PREFIX
from advisor.store.schema import stream_heads
from advisor.store.store import SHIP_PREFIX
from advisor.views.fold.foldbase import IN


class Head(NamedTuple):
    """One stream's row of `stream_heads`."""

    seq: int
    time_us: int
    beat_seq: int | None
    ship_seq: int | None
    shipper: str | None


class Seen(NamedTuple):
    """What a head is made of: one event's place, stream, type, time and source."""

    seq: int
    stream: str
    type: str
    time_us: int
    source: str


def merge(heads: dict[str, Head], seen: Iterable[Seen]) -> None:
    """Take `seen` into `heads` (by stream), the newest by seq winning each field."""
    for e in seen:
        if e.source.startswith(KEPT_PREFIX):  # a host's kept event fetched later: not news
            continue
        old = heads.get(e.stream)
        newest = old is None or e.seq > old.seq
        beat = e.type == HEARTBEAT and (old is None or old.beat_seq is None or e.seq > old.beat_seq)
        shipped = e.source.startswith(SHIP_PREFIX) and (
            old is None or old.ship_seq is None or e.seq > old.ship_seq
        )
        if not (newest or beat or shipped):
            continue
        heads[e.stream] = Head(
            seq=e.seq if newest or old is None else old.seq,
            time_us=e.time_us if newest or old is None else old.time_us,
            beat_seq=e.seq if beat else (old.beat_seq if old else None),
            ship_seq=e.seq if shipped else (old.ship_seq if old else None),
            shipper=e.source[len(SHIP_PREFIX) :] if shipped else (old.shipper if old else None),
        )


def load_heads(conn: Connection, streams: Sequence[str] | None = None) -> dict[str, Head]:
    """The stored heads (of `streams`; None: every stream)."""
    query = select(stream_heads)
    found: dict[str, Head] = {}
    parts = [None] if streams is None else [streams[i : i + IN] for i in range(0, len(streams), IN)]
    for part in parts:
        q = query if part is None else query.where(stream_heads.c.stream.in_(part))
        for row in conn.execute(q):
            found[row.stream] = Head(row.seq, row.time_us, row.beat_seq, row.ship_seq, row.shipper)
    return found


def fold_heads(conn: Connection, batch: Sequence[StoredEvent]) -> None:
    """Merge one chunk's events into the stored heads, in the chunk's transaction."""
    seen = [Seen(e.seq, e.stream, e.type, e.time_us, e.source) for e in batch]
    streams = sorted({e.stream for e in seen})
    heads = load_heads(conn, streams)
    before = dict(heads)
    merge(heads, seen)
    changed = sorted(s for s, head in heads.items() if before.get(s) != head)
    for i in range(0, len(changed), IN):
        conn.execute(delete(stream_heads).where(stream_heads.c.stream.in_(changed[i : i + IN])))
    if changed:
        conn.execute(stream_heads.insert(), [{"stream": s, **heads[s]._asdict()} for s in changed])
