"""Walk the hash chain (`advisor verify`), compare it with signed heads (`verify --heads`),
and summarise the store (`advisor status`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import func, select, text

from advisor.core.events import ChainAnchor, StoreRetained
from advisor.core.timefmt import format_us
from advisor.store import migrate
from advisor.store.heads import HeadFinding, SignedHead, compare_heads
from advisor.store.schema import events, sources
from advisor.store.store import (
    GENESIS_HASH,
    SHIP_PREFIX,
    EventStore,
    event_hash,
    latest_checkpoints,
)
from advisor.store.types import EventFilter


@dataclass(frozen=True)
class VerifyReport:
    checked: int
    last_seq: int
    first_bad_seq: int | None = None
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.first_bad_seq is None


def verify(
    store: EventStore, *, chunk: int = 10_000, progress: Callable[[int], None] | None = None
) -> VerifyReport:
    """Recompute every hash in sequence order; name the first event that does not match.
    Where old events were retained (`advisor retention`), start from their anchor."""
    prev, expected_seq, checked = GENESIS_HASH, 1, 0
    for event in store.read_raw(chunk=chunk):
        if checked == 0 and event.seq > 1:
            anchor = anchors(store)[0].get(event.seq - 1)
            if anchor is not None:
                prev, expected_seq = bytes.fromhex(anchor.hash), event.seq
        if event.seq != expected_seq:
            return VerifyReport(
                checked, event.seq, expected_seq, f"sequence gap: event {expected_seq} is missing"
            )
        h = event.recomputed_hash(prev)
        if h != event.hash:
            return VerifyReport(
                checked, event.seq, event.seq, "hash mismatch: content or chain was altered"
            )
        prev, expected_seq, checked = h, event.seq + 1, checked + 1
        if progress is not None and checked % chunk == 0:
            progress(checked)
    if progress is not None:
        progress(checked)
    return VerifyReport(checked, expected_seq - 1)


@dataclass
class HeadsReport:
    """The chain compared with the heads this host signed for the store (`verify --heads`)."""

    heads: int  # signed for this store (deduplicated)
    last_seq: int  # the chain's (0: no events, or no store)
    latest_head_seq: int | None
    not_covered: int  # events after the latest head (signed later, or never)
    retained: int  # heads at seqs whose events were retained: not checkable
    findings: list[HeadFinding]

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.findings)


def check_heads(
    store: EventStore | None, heads: Sequence[SignedHead], trusted_key: bytes | None, key_name: str
) -> HeadsReport:
    """Compare the chain with signed heads. `store` None: it does not exist (any head for it
    is then evidence that it was deleted or replaced). `trusted_key` None: the host key is
    missing, which with heads there is itself a finding (heads are then checked against the
    keys they carry)."""
    latest = max((h.seq for h in heads), default=None)
    report = HeadsReport(len(heads), 0, latest, 0, 0, [])
    if not heads:
        report.findings.append(
            HeadFinding(
                True, None, "no signed heads for this store: nothing to compare the chain with"
            )
        )
        if store is not None:
            report.last_seq = report.not_covered = last_seq(store)
        return report
    if trusted_key is None:
        report.findings.append(
            HeadFinding(
                False,
                None,
                f"the host key {key_name} is missing, but {_were(len(heads))} "
                "signed for this store: the key was removed or replaced",
            )
        )
    else:
        others = [h for h in heads if h.public_key != trusted_key]
        if others:
            report.findings.append(
                HeadFinding(
                    False,
                    min(h.seq for h in others),
                    f"{_heads(len(others))} for this store "
                    f"{'is' if len(others) == 1 else 'are'} signed by another key than "
                    f"{key_name}: heads were forged, or the key was replaced",
                )
            )
            heads = [h for h in heads if h.public_key == trusted_key]
    if store is None:
        top = max(heads, key=lambda h: h.seq, default=None)
        if top is not None:
            report.findings.append(
                HeadFinding(
                    False,
                    top.seq,
                    f"the store does not exist, but {_were(len(heads))} "
                    f"signed for it, the latest at seq {top.seq} "
                    f"({format_us(top.time_us)}): it was deleted or replaced",
                )
            )
        return report
    report.last_seq = last_seq(store)
    report.not_covered = max(0, report.last_seq - (latest or 0))
    chain_anchors = anchors(store)[0]
    first = _first_seq(store)
    checkable: list[SignedHead] = []
    for head in heads:
        if chain_anchors and head.seq < first and head.seq not in chain_anchors:
            report.retained += 1
        else:
            checkable.append(head)
    stored = _hashes(store, sorted({h.seq for h in checkable}))

    def hash_at(seq: int) -> bytes | None:
        if seq in stored:
            return stored[seq]
        anchor = chain_anchors.get(seq)
        return None if anchor is None else bytes.fromhex(anchor.hash)

    report.findings.extend(compare_heads(checkable, hash_at, report.last_seq, trusted_key))
    return report


def _heads(n: int) -> str:
    return "1 head" if n == 1 else f"{n} heads"


def _were(n: int) -> str:
    return f"{_heads(n)} {'was' if n == 1 else 'were'}"


def _first_seq(store: EventStore) -> int:
    with store.connect() as conn:
        return int(conn.execute(select(func.coalesce(func.min(events.c.seq), 0))).scalar_one())


def _hashes(store: EventStore, seqs: list[int], chunk: int = 500) -> dict[int, bytes]:
    found: dict[int, bytes] = {}
    with store.connect() as conn:
        for i in range(0, len(seqs), chunk):
            for seq, value in conn.execute(
                select(events.c.seq, events.c.hash).where(events.c.seq.in_(seqs[i : i + chunk]))
            ):
                if isinstance(value, bytes | bytearray | memoryview):
                    found[int(seq)] = bytes(value)
    return found


@dataclass(frozen=True)
class HostChainReport:
    """A host's own chain, recomputed in the central store from what it shipped."""

    host: str
    checked: int
    last_seq: int
    first_bad_seq: int | None = None
    reason: str | None = None
    # Shipped before events carried their origin (and the first after those, whose link to
    # them cannot be recomputed): the chain is checked from there on.
    unchecked: int = 0

    @property
    def ok(self) -> bool:
        return self.first_bad_seq is None


def shipped_sources(store: EventStore) -> list[str]:
    with store.connect() as conn:
        return list(
            conn.execute(
                select(sources.c.name)
                .where(sources.c.name.startswith(SHIP_PREFIX, autoescape=True))
                .order_by(sources.c.name)
            ).scalars()
        )


def verify_host(store: EventStore, source: str) -> HostChainReport:
    """Walk one host's chain as shipped (key = the host's seq, `origin` = the rest of the
    host's envelope) from its first event; name the first host seq that does not match.
    Only a prefix of events without an origin (shipped before origins were kept) goes
    unchecked: one after the chain started was not shipped by advisor."""
    host = source.removeprefix(SHIP_PREFIX)
    prev, expected, checked, unchecked = GENESIS_HASH, 1, 0, 0
    anchor = anchors(store)[1].get(source)
    started = anchor is not None
    if anchor is not None:  # its older events were retained
        prev, expected = bytes.fromhex(anchor.hash), anchor.seq + 1
    for event in store.read_raw(source=source):
        if event.origin is None:
            if started:
                return HostChainReport(
                    host,
                    checked,
                    event.key,
                    event.key,
                    "no origin: this event was not shipped by the host "
                    "(written into the central store directly)",
                    unchecked,
                )
            unchecked += 1
            continue
        try:
            origin = orjson.loads(event.origin)
            claimed = bytes.fromhex(origin["hash"])
            recorded, key, name = origin["recorded_us"], origin["key"], origin["source"]
            if not (isinstance(recorded, int) and isinstance(key, int) and isinstance(name, str)):
                raise TypeError("origin fields")
        except (ValueError, KeyError, TypeError):
            return HostChainReport(
                host,
                checked,
                event.key,
                event.key,
                "the origin is not an advisor origin",
                unchecked,
            )
        if not started and unchecked and event.key == expected + unchecked:
            # the first with its origin after older ones without: the chain starts here
            prev, expected, unchecked = claimed, event.key + 1, unchecked + 1
            started = True
            continue
        started = True
        if event.key != expected:
            return HostChainReport(
                host,
                checked,
                event.key,
                expected,
                f"host event {expected} was not shipped",
                unchecked,
            )
        h = event_hash(
            prev,
            event.key,
            event.stream,
            event.type,
            event.version,
            event.time_us,
            recorded,
            name,
            key,
            event.payload.encode(),
        )
        if h != claimed:
            return HostChainReport(
                host,
                checked,
                event.key,
                event.key,
                "hash mismatch: the host's content or chain was altered",
                unchecked,
            )
        prev, expected, checked = h, event.key + 1, checked + 1
    return HostChainReport(host, checked, expected - 1, unchecked=unchecked)


def central_head_findings(store: EventStore) -> dict[str, list[HeadFinding]]:
    """A central store: each host's chain as shipped compared with the heads the host signed
    and shipped (`advisor_host_heads`), keyed by host seq and checked against the public key
    registered for the host (`advisor_shippers`), else the key the heads carry. Empty where
    the store keeps no heads (SQLite, or before migration 0009)."""
    if store.dialect != "postgresql":
        return {}
    with store.connect() as conn:
        if conn.execute(text("SELECT to_regclass('advisor_host_heads')")).scalar() is None:
            return {}
        rows = conn.execute(
            text(
                "SELECT h.host, h.seq, h.hash, h.time_us, h.public_key, h.signature, h.store, "
                "e.origin, k.public_key FROM advisor_host_heads h "
                "LEFT JOIN sources s ON s.name = :prefix || h.host "
                "LEFT JOIN events e ON e.source_id = s.id AND e.idem_key = h.seq "
                "LEFT JOIN advisor_shippers k ON k.host = h.host "
                "ORDER BY h.host, h.seq"
            ),
            {"prefix": SHIP_PREFIX},
        ).all()
    by_host: dict[str, list[tuple[SignedHead, bytes | None]]] = {}
    trusted: dict[str, bytes | None] = {}
    for host, seq, hash_, time_us, public_key, signature, label, origin, registered in rows:
        stored: bytes | None = None
        if origin is not None:
            try:
                stored = bytes.fromhex(orjson.loads(origin)["hash"])
            except (ValueError, KeyError, TypeError):
                stored = None
        head = SignedHead(
            host, int(seq), bytes(hash_), int(time_us), bytes(public_key), bytes(signature), label
        )
        by_host.setdefault(host, []).append((head, stored))
        trusted[host] = None if registered is None else bytes(registered)
    findings: dict[str, list[HeadFinding]] = {}
    for host, pairs in by_host.items():
        source = f"{SHIP_PREFIX}{host}"
        anchor = anchors(store)[1].get(source)
        stored_at = {head.seq: stored for head, stored in pairs}
        if anchor is not None and stored_at.get(anchor.seq) is None:
            stored_at[anchor.seq] = bytes.fromhex(anchor.hash)
        # heads at seqs whose events were retained (below the anchor) cannot be compared
        heads = [head for head, _ in pairs if anchor is None or head.seq >= anchor.seq]
        findings[host] = compare_heads(
            heads, stored_at.get, _host_last_seq(store, source, anchor), trusted[host]
        )
    return findings


def _host_last_seq(store: EventStore, source: str, anchor: ChainAnchor | None) -> int:
    with store.connect() as conn:
        value = conn.execute(
            select(func.max(events.c.idem_key))
            .join(sources, sources.c.id == events.c.source_id)
            .where(sources.c.name == source)
        ).scalar()
    return max(int(value or 0), anchor.seq if anchor is not None else 0)


def retentions(store: EventStore) -> list[StoreRetained]:
    """The store.retained events (`advisor retention`), oldest first."""
    return [
        e.payload
        for e in store.read(EventFilter(type="store.retained"))
        if isinstance(e.payload, StoreRetained)
    ]


def anchors(store: EventStore) -> tuple[dict[int, ChainAnchor], dict[str, ChainAnchor]]:
    """From the store.retained events: the store chain's anchors by the seq they end at, and
    each shipping host's latest anchor (by its source name)."""
    chain: dict[int, ChainAnchor] = {}
    hosts: dict[str, ChainAnchor] = {}
    for retained in retentions(store):
        chain[retained.anchor.seq] = retained.anchor
        for source, anchor in retained.hosts.items():
            if source not in hosts or anchor.seq > hosts[source].seq:
                hosts[source] = anchor
    return chain, hosts


def last_seq(store: EventStore) -> int:
    with store.connect() as conn:
        return int(conn.execute(select(func.coalesce(func.max(events.c.seq), 0))).scalar_one())


@dataclass
class StoreStatus:
    url: str
    revision: str | None
    head_revision: str | None
    events: int
    last_seq: int | None
    by_type: dict[str, int] = field(default_factory=dict)
    by_stream: dict[str, int] = field(default_factory=dict)
    checkpoints: dict[str, dict[str, Any]] = field(default_factory=dict)


def status(store: EventStore) -> StoreStatus:
    with store.connect() as conn:
        revision = migrate.current_revision(conn)
        by_type: dict[str, int] = dict(
            conn.execute(
                select(events.c.type, func.count()).group_by(events.c.type).order_by(events.c.type)
            ).all()
        )
        by_stream: dict[str, int] = dict(
            conn.execute(
                select(events.c.stream, func.count())
                .group_by(events.c.stream)
                .order_by(events.c.stream)
            ).all()
        )
        last_seq = conn.execute(select(func.max(events.c.seq))).scalar()
        cps = {
            name: {**orjson.loads(pos), "updated_time_us": updated}
            for name, pos, updated in latest_checkpoints(conn)
        }
    return StoreStatus(
        url=store.display_url,
        revision=revision,
        head_revision=migrate.head_revision(),
        events=sum(by_type.values()),
        last_seq=last_seq,
        by_type=by_type,
        by_stream=by_stream,
        checkpoints=cps,
    )
