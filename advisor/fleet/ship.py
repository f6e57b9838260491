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
central events itself. A SQLite central store (development, tests) gets the same checks here.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import islice
from typing import Final, TypeVar

import orjson
from sqlalchemy import select, text
from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError

from advisor.core.errors import AdvisorError, IntegrityError, StoreError
from advisor.core.events import Prepared
from advisor.store import Checkpoint, EventStore
from advisor.store.audit import anchors
from advisor.store.engine import first_line, redact
from advisor.store.heads import HostKey, SignedHead
from advisor.store.schema import PROJECTION_TABLES, events, sources
from advisor.store.store import GENESIS_HASH, SHIP_PREFIX, RawEvent
from advisor.views.projections import Projector

BATCH: Final = 5000
REPEAT_ERROR_S: Final = 60.0  # `ship_forever` repeats an unchanged error at most this often
T = TypeVar("T")

_SHIP_SQL = text(
    "SELECT appended, duplicates, last_key, last_seq FROM advisor_ship(:host, "
    "CAST(:keys AS bigint[]), CAST(:streams AS text[]), CAST(:types AS text[]), "
    "CAST(:versions AS integer[]), CAST(:times AS bigint[]), CAST(:recorded AS bigint[]), "
    "CAST(:sources AS text[]), CAST(:source_keys AS bigint[]), CAST(:payloads AS text[]), "
    "CAST(:hashes AS bytea[]))")
_HEAD_SQL = text(
    "SELECT advisor_ship_head(:host, :seq, :hash, :time_us, :public_key, :signature, :store)")


@dataclass
class ShipReport:
    shipped: int = 0
    duplicates: int = 0
    retries: int = 0
    last_seq: int = 0
    central_seq: int = 0  # the host's last seq in the central store when the ship started
    behind: int = 0       # events the central store had lost behind the local position
    heads: int = 0        # signed heads stored centrally
    folded: bool = False  # ship folded the central projections (the caller may write them)


@dataclass(frozen=True)
class Position:
    """A host's last seq in the central store, with its host hash there (None: shipped
    before origins were kept, nothing to compare)."""

    seq: int
    hash: bytes | None


class Unreachable(StoreError):
    """The central store cannot be reached (for now): worth retrying."""


def checkpoint_name(central_url: str) -> str:
    return f"ship:{redact(central_url)}"


def ship(local: EventStore, central: EventStore, host: str, *, batch: int = BATCH,
         give_up_after_s: float | None = 300.0,
         sleep: Callable[[float], None] = time.sleep,
         key: HostKey | None = None, store_label: str = "") -> ShipReport:
    """Ship every local event the central store does not hold yet; IntegrityError when the
    central store holds something else for this host, StoreError when it stays unreachable
    for `give_up_after_s` (None: keep trying). With `key`, sign the host's chain head after
    each batch and store it centrally (`store_label` names the local store in the head)."""
    report = ShipReport()
    writer = _writer(central)

    def retrying(attempt: Callable[[], T]) -> T:
        return _retrying(attempt, report, give_up_after_s, sleep, central.display_url)

    name = checkpoint_name(central.url)
    saved = local.checkpoint(name)
    bookmark = int(saved["seq"]) if saved else 0
    position = retrying(lambda: central_position(central, host))
    retrying(lambda: check_position(local, central, host, position))
    report.central_seq = position.seq
    report.behind = max(0, bookmark - position.seq)
    after = position.seq
    while True:
        chunk = list(islice(local.read_raw(after_seq=after, chunk=batch), batch))
        if not chunk:
            break
        _refuse_relayed(chunk)
        appended, duplicates = retrying(partial(writer.ship, host, chunk, position))
        report.shipped += appended
        report.duplicates += duplicates
        position = Position(chunk[-1].seq, chunk[-1].hash)
        after = position.seq
        local.append_prepared([], Checkpoint(name, {"seq": after}))
        if key is not None and writer.keeps_heads:
            head = key.sign(host, after, chunk[-1].hash, time.time_ns() // 1000, store_label)
            report.heads += retrying(partial(writer.store_head, head))
    if after != bookmark and after == position.seq == report.central_seq:
        local.append_prepared([], Checkpoint(name, {"seq": after}))  # nothing sent: moved
    report.last_seq = after
    report.folded = retrying(lambda: _fold(central))
    return report


def open_central(url: str, *, give_up_after_s: float | None = 300.0,
                 sleep: Callable[[float], None] = time.sleep) -> EventStore:
    """`open_store(url)`, retried like a ship while the server is unreachable."""
    from advisor.store import open_store

    return _retrying(lambda: open_store(url), ShipReport(), give_up_after_s, sleep, redact(url))


# -- what the central store holds for a host ------------------------------------------------

def central_position(central: EventStore, host: str) -> Position:
    """The host's last seq in the central store and its hash (where older events were
    retained, their anchor); seq 0 when it has shipped nothing."""
    source = f"{SHIP_PREFIX}{host}"
    row = None
    with central.connect() as conn:
        sid = conn.execute(select(sources.c.id).where(sources.c.name == source)).scalar()
        if sid is not None:
            row = conn.execute(select(events.c.idem_key, events.c.origin)
                               .where(events.c.source_id == sid)
                               .order_by(events.c.idem_key.desc()).limit(1)).first()
    anchor = anchors(central)[1].get(source)
    if row is not None and (anchor is None or row[0] > anchor.seq):
        return Position(int(row[0]), _origin_hash(row[1], host, int(row[0])))
    if anchor is not None:
        return Position(anchor.seq, bytes.fromhex(anchor.hash))
    return Position(0, GENESIS_HASH)


@dataclass(frozen=True)
class Shipped:
    """A host event as the central store holds it: its host hash (None: shipped before
    origins were kept) and its content."""

    hash: bytes | None
    content: tuple[str, str, int, int, str]  # stream, type, version, time, payload

    def matches(self, event: RawEvent) -> bool:
        """The same event: the same hash; without one, the same content."""
        if self.hash is not None:
            return self.hash == event.hash
        return self.content == (event.stream, event.type, event.version, event.time_us,
                                event.payload)


def central_events(central: EventStore, host: str, keys: Sequence[int]) -> dict[int, Shipped]:
    """The host events the central store holds at these host seqs."""
    source = f"{SHIP_PREFIX}{host}"
    found: dict[int, Shipped] = {}
    with central.connect() as conn:
        sid = conn.execute(select(sources.c.id).where(sources.c.name == source)).scalar()
        if sid is None:
            return found
        unique = sorted(set(keys))
        for i in range(0, len(unique), 500):
            for r in conn.execute(select(events.c.idem_key, events.c.origin, events.c.stream,
                                         events.c.type, events.c.schema_version,
                                         events.c.event_time_us, events.c.payload)
                                  .where(events.c.source_id == sid)
                                  .where(events.c.idem_key.in_(unique[i:i + 500]))):
                k = int(r[0])
                found[k] = Shipped(_origin_hash(r[1], host, k), (r[2], r[3], r[4], r[5], r[6]))
    return found


def check_position(local: EventStore, central: EventStore, host: str,
                   position: Position) -> None:
    """IntegrityError unless this store's chain holds, at the host's last seq in the central
    store, the event the central store holds there."""
    if position.seq == 0:
        return
    mine = _local_event(local, position.seq)
    if mine is None:
        last = _local_last_seq(local)
        raise IntegrityError(
            f"host {host}: the central store {central.display_url} holds its events up to its "
            f"seq {position.seq}, but this store ends at seq {last}: it is not the store that "
            f"shipped them (a store restored from an older backup, or another host shipping as "
            f"{host}); nothing shipped", first_bad_seq=last + 1)
    if position.hash is not None and mine.hash == position.hash:
        return
    if position.hash is None:  # shipped before origins were kept: compare the content
        shipped = central_events(central, host, [position.seq]).get(position.seq)
        if shipped is None or shipped.matches(mine):
            return
    first = _first_difference(local, central, host, position.seq)
    raise IntegrityError(
        f"host {host}: its event {first} is not the one it shipped to {central.display_url} "
        f"(the hashes differ): this store's history was rewritten after it was shipped, or "
        f"another host ships as {host}; nothing shipped", first_bad_seq=first)


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


def _origin_hash(origin: str | None, host: str, key: int) -> bytes | None:
    if origin is None:
        return None
    try:
        return bytes.fromhex(orjson.loads(origin)["hash"])
    except (ValueError, KeyError, TypeError) as e:
        raise IntegrityError(f"host {host}: the central store's origin of its seq {key} is "
                             "not an advisor origin", first_bad_seq=key) from e


def _local_event(local: EventStore, seq: int) -> RawEvent | None:
    got = list(islice(local.read_raw(after_seq=seq - 1, chunk=1), 1))
    return got[0] if got and got[0].seq == seq else None


def _local_last_seq(local: EventStore) -> int:
    with local.connect() as conn:
        value = conn.execute(select(events.c.seq).order_by(events.c.seq.desc()).limit(1)).scalar()
    return int(value or 0)


def _refuse_relayed(chunk: Sequence[RawEvent]) -> None:
    relayed = next((e for e in chunk if e.origin is not None), None)
    if relayed is not None:
        raise StoreError(f"event {relayed.seq} of this store was shipped here from another "
                         "host: ship a host's own store, not a central one")


def _origin(event: RawEvent) -> bytes:
    """The host's envelope fields that the central row does not keep as they were."""
    return orjson.dumps({"hash": event.hash.hex(), "key": event.key,
                         "recorded_us": event.recorded_us, "source": event.source},
                        option=orjson.OPT_SORT_KEYS)


# -- writing to the central store -------------------------------------------------------------

class _Writer:
    keeps_heads = False

    def __init__(self, central: EventStore) -> None:
        self.central = central

    def ship(self, host: str, chunk: Sequence[RawEvent], at: Position) -> tuple[int, int]:
        raise NotImplementedError

    def store_head(self, head: SignedHead) -> int:
        return 0


class _ServerWriter(_Writer):
    """PostgreSQL: through the owner's `advisor_ship` and `advisor_ship_head`."""

    keeps_heads = True

    def ship(self, host: str, chunk: Sequence[RawEvent], at: Position) -> tuple[int, int]:
        params = {"host": host, "keys": [e.seq for e in chunk],
                  "streams": [e.stream for e in chunk], "types": [e.type for e in chunk],
                  "versions": [e.version for e in chunk], "times": [e.time_us for e in chunk],
                  "recorded": [e.recorded_us for e in chunk],
                  "sources": [e.source for e in chunk], "source_keys": [e.key for e in chunk],
                  "payloads": [e.payload for e in chunk], "hashes": [e.hash for e in chunk]}
        row = self._call(host, lambda conn: conn.execute(_SHIP_SQL, params).one())
        if int(row[2]) < chunk[-1].seq:
            raise IntegrityError(f"host {host}: the central store took its events only up to "
                                 f"its seq {row[2]}, not {chunk[-1].seq}",
                                 first_bad_seq=int(row[2]) + 1)
        return int(row[0]), int(row[1])

    def store_head(self, head: SignedHead) -> int:
        stored = self._call(head.host, lambda conn: conn.execute(_HEAD_SQL, {
            "host": head.host, "seq": head.seq, "hash": head.hash, "time_us": head.time_us,
            "public_key": head.public_key, "signature": head.signature,
            "store": head.store}).scalar_one())
        return int(bool(stored))

    def _call(self, host: str, work: Callable[..., T]) -> T:
        try:
            with self.central.begin() as conn:
                return work(conn)
        except DBAPIError as e:
            if _transient(e):
                raise Unreachable(f"the central store {self.central.display_url} is "
                                  f"unreachable: {first_line(e)}") from e
            state = getattr(e.orig, "sqlstate", None)
            if state == "AD001":
                detail = getattr(getattr(e.orig, "diag", None), "message_detail", None)
                raise IntegrityError(f"the central store refused host {host}'s events: "
                                     f"{first_line(e)}",
                                     first_bad_seq=int(detail) if detail else None) from e
            raise StoreError(f"the central store {self.central.display_url} refused host "
                             f"{host}: {first_line(e)}") from e


class _DirectWriter(_Writer):
    """Another store (SQLite: development, tests): the checks of `advisor_ship`, made here
    before the store's own append."""

    def ship(self, host: str, chunk: Sequence[RawEvent], at: Position) -> tuple[int, int]:
        there = [e for e in chunk if e.seq <= at.seq]
        self._same_as_shipped(host, there)
        new = [e for e in chunk if e.seq > at.seq]
        prev_seq, prev_hash = at.seq, at.hash
        for e in new:
            if e.seq != prev_seq + 1:
                raise IntegrityError(f"host {host}: its seq {e.seq} does not follow its last "
                                     f"shipped seq {prev_seq}", first_bad_seq=e.seq)
            if prev_hash is not None and e.recomputed_hash(prev_hash) != e.hash:
                raise IntegrityError(f"host {host}: its seq {e.seq} does not extend its chain "
                                     f"as shipped: its hash is not the hash of its content "
                                     f"after seq {prev_seq}", first_bad_seq=e.seq)
            prev_seq, prev_hash = e.seq, e.hash
        outgoing: list[Prepared] = [
            (e.stream, e.type, e.version, e.time_us, f"{SHIP_PREFIX}{host}", e.seq,
             e.payload.encode()) for e in new]
        try:
            result = self.central.append_prepared(outgoing, origins=[_origin(e) for e in new])
        except StoreError as e:
            if _transient(e):
                raise Unreachable(str(e)) from e
            raise
        if result.duplicates:  # another shipper of this host came first: the same events?
            self._same_as_shipped(host, new)
        return result.appended, len(there) + result.duplicates

    def _same_as_shipped(self, host: str, chunk: Sequence[RawEvent]) -> None:
        """IntegrityError unless the central store holds each of these (its hash, or
        where shipped before origins were kept its content)."""
        stored = central_events(self.central, host, [e.seq for e in chunk])
        for e in chunk:
            shipped = stored.get(e.seq)
            if shipped is None:
                raise IntegrityError(f"host {host}: its seq {e.seq} is missing from the "
                                     "central store below its last shipped seq",
                                     first_bad_seq=e.seq)
            if not shipped.matches(e):
                raise IntegrityError(f"host {host}: its seq {e.seq} is in the central store "
                                     "with another hash: the host's history differs from what "
                                     "it shipped", first_bad_seq=e.seq)


def _writer(central: EventStore) -> _Writer:
    return _ServerWriter(central) if central.dialect == "postgresql" else _DirectWriter(central)


def _fold(central: EventStore) -> bool:
    """Fold the central projections when the caller may write them (else the owner does)."""
    if central.dialect == "postgresql":
        with central.connect() as conn:
            names = [t.name for t in PROJECTION_TABLES]
            checks = [f"has_table_privilege('{n}', '{p}')" for n in names
                      for p in ("INSERT", "UPDATE", "DELETE")]
            checks.append("has_table_privilege('checkpoints', 'INSERT')")
            if not conn.execute(text("SELECT " + " AND ".join(checks))).scalar_one():
                return False
    try:
        Projector(central).catch_up()
    except SQLAlchemyError as e:
        if _transient(e):
            raise Unreachable(f"the central store {central.display_url} is unreachable: "
                              f"{first_line(e)}") from e
        raise
    return True


# -- retrying -----------------------------------------------------------------------------------

def _transient(e: BaseException) -> bool:
    """A failure of the connection (or of the server, for now), not of what was sent."""
    seen: BaseException | None = e
    while seen is not None:
        if isinstance(seen, Unreachable | OperationalError | ConnectionError | TimeoutError):
            return True
        if isinstance(seen, DBAPIError) and seen.connection_invalidated:
            return True
        if type(seen).__module__.startswith("psycopg") and type(seen).__name__ in (
                "OperationalError", "ConnectionTimeout", "InterfaceError"):
            return True
        seen = seen.__cause__
    return False


def _retrying(attempt: Callable[[], T], report: ShipReport, give_up_after_s: float | None,
              sleep: Callable[[float], None], where: str) -> T:
    """`attempt()`, retried with exponential backoff (0.5 s doubling to 30 s) while it fails
    with a transient error, until `give_up_after_s` have passed, counting both the waits and
    the time the attempts took (a connect that times out); then a StoreError, which
    `watch --ship-to` reports before it tries again later."""
    delay, slept, trying = 0.5, 0.0, 0.0
    while True:
        attempt_started = time.monotonic()
        try:
            return attempt()
        except Exception as e:
            trying += time.monotonic() - attempt_started
            if not _transient(e):
                if isinstance(e, SQLAlchemyError):
                    raise StoreError(f"the central store {where}: {first_line(e)}") from e
                raise
            spent = slept + trying
            if give_up_after_s is not None and spent >= give_up_after_s:
                raise Unreachable(f"the central store {where} is unreachable (gave up after "
                                  f"{spent:.0f} s): {_reason(e)}") from e
            report.retries += 1
            pause = delay if give_up_after_s is None else min(delay, give_up_after_s - spent)
            sleep(pause)
            slept += pause
            delay = min(delay * 2, 30.0)


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


def ship_forever(local: EventStore, central_url: str, host: str, stop: threading.Event,
                 interval_s: float = 5.0,
                 on_error: Callable[[str], None] | None = None,
                 on_shipped: Callable[[ShipReport], None] | None = None,
                 key: HostKey | None = None, store_label: str = "") -> None:
    """`watch --ship-to`: ship every `interval_s` until `stop` is set. Whatever fails — the
    central store unreachable, a refusal, an integrity error, a bug — is reported through
    `on_error` (an unchanged error at most once a minute) and tried again next round: the
    host goes on diagnosing and remediating on its own meanwhile."""
    central: EventStore | None = None
    last_error, last_error_at = "", 0.0
    while not stop.is_set():
        try:
            if central is None:
                central = open_central(central_url, give_up_after_s=interval_s,
                                       sleep=_waiter(stop))
            report = ship(local, central, host, give_up_after_s=interval_s,
                          sleep=_waiter(stop), key=key, store_label=store_label)
            if on_shipped is not None:
                on_shipped(report)
            last_error = ""
        except Exception as e:
            message = str(e) if isinstance(e, AdvisorError) else (
                f"unexpected {type(e).__name__}: {first_line(e)}")
            now = time.monotonic()
            if on_error is not None and (message != last_error
                                         or now - last_error_at >= REPEAT_ERROR_S):
                on_error(message)
                last_error, last_error_at = message, now
            if central is not None and not isinstance(e, AdvisorError):
                central.close()  # a fresh engine next round
                central = None
        stop.wait(interval_s)
    if central is not None:
        central.close()
