"""Walk the hash chain (`advisor verify`), compare it with signed heads (`verify --heads`),
and summarise the store (`advisor status`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import func, select

from advisor.core.timefmt import format_us
from advisor.store import migrate
from advisor.store.chain import GENESIS_HASH
from advisor.store.checkpointing import latest_checkpoints
from advisor.store.integrity.heads import HeadFinding, SignedHead, compare_heads
from advisor.store.integrity.retained import anchors, last_seq
from advisor.store.schema import events
from advisor.store.store import EventStore

# A central store's hosts' chains live in `hostchain`, the retention anchors in `retained`;
# importers of this module find them here too.
__all__ = [
    "HeadsReport",
    "StoreStatus",
    "VerifyReport",
    "check_heads",
    "status",
    "verify",
]


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
    heads = _trusted_heads(report, heads, trusted_key, key_name)
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
    _compare_with_chain(store, report, heads, trusted_key)
    return report


def _trusted_heads(
    report: HeadsReport, heads: Sequence[SignedHead], trusted_key: bytes | None, key_name: str
) -> Sequence[SignedHead]:
    """The heads to check: those the host key signed (all of them when it is missing). A
    missing key with heads there, and heads signed by another key, are findings."""
    if trusted_key is None:
        report.findings.append(
            HeadFinding(
                False,
                None,
                f"the host key {key_name} is missing, but {_were(len(heads))} "
                "signed for this store: the key was removed or replaced",
            )
        )
        return heads
    others = [h for h in heads if h.public_key != trusted_key]
    if not others:
        return heads
    report.findings.append(
        HeadFinding(
            False,
            min(h.seq for h in others),
            f"{_heads(len(others))} for this store "
            f"{'is' if len(others) == 1 else 'are'} signed by another key than "
            f"{key_name}: heads were forged, or the key was replaced",
        )
    )
    return [h for h in heads if h.public_key == trusted_key]


def _compare_with_chain(
    store: EventStore, report: HeadsReport, heads: Sequence[SignedHead], trusted_key: bytes | None
) -> None:
    """Compare the heads with the chain's hashes (or its anchors, where events were
    retained); heads below a retention's anchor are counted, not checked."""
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
