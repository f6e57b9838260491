"""A central store's side of shipping: what it holds for a host, and taking a host's events.

A host's events arrive in the central store with source `ship:<host>` and the host's seq as
key, the rest of the host's envelope kept as the event's `origin` (`advisor.fleet.ship`).
In PostgreSQL a shipper appends only through the owner's `advisor_ship()` (migration 0009),
which makes every check itself; another store (SQLite: development, tests) gets the same
checks here, before the store's own append. Every failure of the connection is an
`Unreachable`, worth retrying; what the central store refuses is an IntegrityError or a
StoreError.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import orjson
from sqlalchemy import Connection, select, text
from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError

from advisor.core.errors import IntegrityError, StoreError
from advisor.core.events import Prepared
from advisor.store.chain import GENESIS_HASH, RawEvent
from advisor.store.engine import first_line, in_parts
from advisor.store.integrity.heads import SignedHead
from advisor.store.integrity.held import HELD_TYPE, range_fault
from advisor.store.integrity.kept import decline, kept_call, take_kept
from advisor.store.integrity.retained import anchors
from advisor.store.schema import PROJECTION_TABLES, events, sources
from advisor.store.store import SHIP_PREFIX, EventStore

T = TypeVar("T")

_SHIP_SQL = text(
    "SELECT appended, duplicates, last_key, last_seq FROM advisor_ship(:host, "
    "CAST(:keys AS bigint[]), CAST(:streams AS text[]), CAST(:types AS text[]), "
    "CAST(:versions AS integer[]), CAST(:times AS bigint[]), CAST(:recorded AS bigint[]), "
    "CAST(:sources AS text[]), CAST(:source_keys AS bigint[]), CAST(:payloads AS text[]), "
    "CAST(:hashes AS bytea[]))"
)
_HEAD_SQL = text(
    "SELECT advisor_ship_head(:host, :seq, :hash, :time_us, :public_key, :signature, :store)"
)


class Unreachable(StoreError):
    """The central store cannot be reached (for now): worth retrying."""


def is_transient(e: BaseException) -> bool:
    """A failure of the connection (or of the server, for now), not of what was sent."""
    seen: BaseException | None = e
    while seen is not None:
        if isinstance(seen, Unreachable | OperationalError | ConnectionError | TimeoutError):
            return True
        if isinstance(seen, DBAPIError) and seen.connection_invalidated:
            return True
        if type(seen).__module__.startswith("psycopg") and type(seen).__name__ in (
            "OperationalError",
            "ConnectionTimeout",
            "InterfaceError",
        ):
            return True
        seen = seen.__cause__
    return False


def is_database_error(e: BaseException) -> bool:
    """An error of the database layer itself (not yet one of advisor's own)."""
    return isinstance(e, SQLAlchemyError)


@dataclass(frozen=True)
class Position:
    """A host's last seq in the central store, with its host hash there (None: shipped
    before origins were kept, nothing to compare)."""

    seq: int
    hash: bytes | None


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
        return self.content == (
            event.stream,
            event.type,
            event.version,
            event.time_us,
            event.payload,
        )


def central_position(central: EventStore, host: str) -> Position:
    """The host's last seq in the central store and its hash (where all its events there
    were retained, their anchor); seq 0 when it has shipped nothing. One statement while
    the host has events there: they all come after any anchor (retention takes the oldest
    partitions, and a host's events arrive in its seq order)."""
    source = f"{SHIP_PREFIX}{host}"
    with central.connect() as conn:
        row = conn.execute(
            select(events.c.idem_key, events.c.origin)
            .join(sources, sources.c.id == events.c.source_id)
            .where(sources.c.name == source)
            .order_by(events.c.idem_key.desc())
            .limit(1)
        ).first()
    if row is not None:
        return Position(int(row[0]), _origin_hash(row[1], host, int(row[0])))
    anchor = anchors(central)[1].get(source)
    if anchor is not None:
        return Position(anchor.seq, bytes.fromhex(anchor.hash))
    return Position(0, GENESIS_HASH)


def central_events(central: EventStore, host: str, keys: Sequence[int]) -> dict[int, Shipped]:
    """The host events the central store holds at these host seqs."""
    source = f"{SHIP_PREFIX}{host}"
    found: dict[int, Shipped] = {}
    with central.connect() as conn:
        sid = conn.execute(select(sources.c.id).where(sources.c.name == source)).scalar()
        if sid is None:
            return found
        for part in in_parts(keys):
            for r in conn.execute(
                select(
                    events.c.idem_key,
                    events.c.origin,
                    events.c.stream,
                    events.c.type,
                    events.c.schema_version,
                    events.c.event_time_us,
                    events.c.payload,
                )
                .where(events.c.source_id == sid)
                .where(events.c.idem_key.in_(part))
            ):
                k = int(r[0])
                found[k] = Shipped(_origin_hash(r[1], host, k), (r[2], r[3], r[4], r[5], r[6]))
    return found


def _origin_hash(origin: str | None, host: str, key: int) -> bytes | None:
    if origin is None:
        return None
    try:
        return bytes.fromhex(orjson.loads(origin)["hash"])
    except (ValueError, KeyError, TypeError) as e:
        raise IntegrityError(
            f"host {host}: the central store's origin of its seq {key} is not an advisor origin",
            first_bad_seq=key,
        ) from e


def origin(event: RawEvent) -> bytes:
    """The host's envelope fields that the central row does not keep as they were."""
    return orjson.dumps(
        {
            "hash": event.hash.hex(),
            "key": event.key,
            "recorded_us": event.recorded_us,
            "source": event.source,
        },
        option=orjson.OPT_SORT_KEYS,
    )


def may_fold(central: EventStore) -> bool:
    """Whether this connection may write the central projections (the owner may; a
    shipping role may not, and leaves the fold to the owner)."""
    if central.dialect != "postgresql":
        return True
    with central.connect() as conn:
        names = [t.name for t in PROJECTION_TABLES]
        checks = [
            f"has_table_privilege('{n}', '{p}')"
            for n in names
            for p in ("INSERT", "UPDATE", "DELETE")
        ]
        checks.append("has_table_privilege('checkpoints', 'INSERT')")
        return bool(conn.execute(text("SELECT " + " AND ".join(checks))).scalar_one())


# -- taking a host's events -------------------------------------------------------------------


class Writer:
    """Appends a host's events to the central store (see `writer_for`)."""

    keeps_heads = False

    def __init__(self, central: EventStore) -> None:
        self.central = central

    def ship(self, host: str, chunk: Sequence[RawEvent], at: Position) -> tuple[int, int]:
        """Append the host's events of `chunk` the central store does not hold yet, `at`
        being the host's position there: (appended, duplicates)."""
        raise NotImplementedError

    def store_head(self, head: SignedHead) -> int:
        """Store a signed head of the host's chain: 1 when stored, 0 when not."""
        return 0

    def ship_kept(self, host: str, held_key: int, got: Sequence[RawEvent], note: str) -> int:
        """Send the events of a range the host kept, the one ending at `held_key` (none:
        `note` says why not; `advisor.store.integrity.kept`); how many were appended."""
        if not got:
            decline(self.central, host, held_key, note)
            return 0
        return take_kept(self.central, host, held_key, got)


class ServerWriter(Writer):
    """PostgreSQL: through the owner's `advisor_ship` and `advisor_ship_head`."""

    keeps_heads = True

    def ship(self, host: str, chunk: Sequence[RawEvent], at: Position) -> tuple[int, int]:
        params = {
            "host": host,
            "keys": [e.seq for e in chunk],
            "streams": [e.stream for e in chunk],
            "types": [e.type for e in chunk],
            "versions": [e.version for e in chunk],
            "times": [e.time_us for e in chunk],
            "recorded": [e.recorded_us for e in chunk],
            "sources": [e.source for e in chunk],
            "source_keys": [e.key for e in chunk],
            "payloads": [e.payload for e in chunk],
            "hashes": [e.hash for e in chunk],
        }
        row = self._call(host, lambda conn: conn.execute(_SHIP_SQL, params).one())
        if int(row[2]) < chunk[-1].seq:
            raise IntegrityError(
                f"host {host}: the central store took its events only up to "
                f"its seq {row[2]}, not {chunk[-1].seq}",
                first_bad_seq=int(row[2]) + 1,
            )
        return int(row[0]), int(row[1])

    def store_head(self, head: SignedHead) -> int:
        stored = self._call(
            head.host,
            lambda conn: conn.execute(
                _HEAD_SQL,
                {
                    "host": head.host,
                    "seq": head.seq,
                    "hash": head.hash,
                    "time_us": head.time_us,
                    "public_key": head.public_key,
                    "signature": head.signature,
                    "store": head.store,
                },
            ).scalar_one(),
        )
        return int(bool(stored))

    def ship_kept(self, host: str, held_key: int, got: Sequence[RawEvent], note: str) -> int:
        return self._call(host, lambda conn: kept_call(conn, host, held_key, got, note))[0]

    def _call(self, host: str, work: Callable[[Connection], T]) -> T:
        try:
            with self.central.begin() as conn:
                return work(conn)
        except DBAPIError as e:
            if is_transient(e):
                raise Unreachable(
                    f"the central store {self.central.display_url} is unreachable: {first_line(e)}"
                ) from e
            state = getattr(e.orig, "sqlstate", None)
            if state == "AD001":
                detail = getattr(getattr(e.orig, "diag", None), "message_detail", None)
                raise IntegrityError(
                    f"the central store refused host {host}'s events: {first_line(e)}",
                    first_bad_seq=int(detail) if detail else None,
                ) from e
            raise StoreError(
                f"the central store {self.central.display_url} refused host {host}: {first_line(e)}"
            ) from e


class DirectWriter(Writer):
    """Another store (SQLite: development, tests): the checks of `advisor_ship`, made here
    before the store's own append."""

    def ship(self, host: str, chunk: Sequence[RawEvent], at: Position) -> tuple[int, int]:
        there = [e for e in chunk if e.seq <= at.seq]
        self._same_as_shipped(host, there)
        new = [e for e in chunk if e.seq > at.seq]
        _check_extends(host, new, at)
        outgoing: list[Prepared] = [
            (
                e.stream,
                e.type,
                e.version,
                e.time_us,
                f"{SHIP_PREFIX}{host}",
                e.seq,
                e.payload.encode(),
            )
            for e in new
        ]
        try:
            result = self.central.append_prepared(outgoing, origins=[origin(e) for e in new])
        except StoreError as e:
            if is_transient(e):
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
                raise IntegrityError(
                    f"host {host}: its seq {e.seq} is missing from the "
                    "central store below its last shipped seq",
                    first_bad_seq=e.seq,
                )
            if not shipped.matches(e):
                raise IntegrityError(
                    f"host {host}: its seq {e.seq} is in the central store "
                    "with another hash: the host's history differs from what "
                    "it shipped",
                    first_bad_seq=e.seq,
                )


def _check_extends(host: str, new: Sequence[RawEvent], at: Position) -> None:
    """IntegrityError unless `new` follows the host's position seq by seq, each event's
    hash the hash of its content after the one before."""
    prev_seq, prev_hash = at.seq, at.hash
    for e in new:
        if e.type == HELD_TYPE:  # a range the host kept: it starts where the chain stands
            fault = range_fault(e.payload, e.seq, prev_seq + 1, prev_hash)
            if fault is not None and fault.starts_elsewhere:
                raise IntegrityError(
                    f"host {host}: its kept range from seq {fault.first_bad_seq} does not "
                    f"start from its chain as shipped (the hash before it differs)",
                    first_bad_seq=fault.first_bad_seq,
                )
            if fault is not None:
                raise IntegrityError(
                    f"host {host}: its kept range ending at seq {e.seq} does not follow its "
                    f"last shipped seq {prev_seq}",
                    first_bad_seq=fault.first_bad_seq,
                )
            prev_seq, prev_hash = e.seq, e.hash
            continue
        if e.seq != prev_seq + 1:
            raise IntegrityError(
                f"host {host}: its seq {e.seq} does not follow its last shipped seq {prev_seq}",
                first_bad_seq=e.seq,
            )
        if prev_hash is not None and e.recomputed_hash(prev_hash) != e.hash:
            raise IntegrityError(
                f"host {host}: its seq {e.seq} does not extend its chain "
                f"as shipped: its hash is not the hash of its content "
                f"after seq {prev_seq}",
                first_bad_seq=e.seq,
            )
        prev_seq, prev_hash = e.seq, e.hash


def writer_for(central: EventStore) -> Writer:
    """The writer for this central store: PostgreSQL's functions, or the checks made here."""
    return ServerWriter(central) if central.dialect == "postgresql" else DirectWriter(central)
