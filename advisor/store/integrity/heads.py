"""Signed chain heads: tamper evidence that someone holding the store file cannot undo.

A head is (host, seq, hash, time) signed with the host's Ed25519 key, which is kept outside
the store. Heads are written where the store's owner cannot rewrite them unnoticed (the
journal, the central store); `advisor verify --heads` compares the chain with them: a
history re-chained after a head was signed no longer has the head's hash at its seq, a cut
tail ends before the latest head, and a deleted store has heads and no events.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import orjson
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
    load_pem_private_key,
)

HEAD_CONTEXT = b"advisor-head-v1\n"


@dataclass(frozen=True)
class SignedHead:
    host: str
    seq: int
    hash: bytes  # the chain's hash at `seq` (32 bytes)
    time_us: int  # when it was signed
    public_key: bytes  # raw Ed25519 public key (32 bytes)
    signature: bytes  # Ed25519 signature of `message()` (64 bytes)
    # Which store's chain (`advisor.store.integrity.headlog.store_label`), signed with the rest when
    # given: a host's heads for one store are never compared with another store's chain.
    store: str = ""

    def message(self) -> bytes:
        fields: list[object] = [self.host, self.seq, self.hash.hex(), self.time_us]
        if self.store:
            fields.append(self.store)
        return HEAD_CONTEXT + orjson.dumps(fields)

    def valid(self, trusted_key: bytes | None = None) -> bool:
        """The signature matches (made by `trusted_key` when given)."""
        if trusted_key is not None and trusted_key != self.public_key:
            return False
        try:
            Ed25519PublicKey.from_public_bytes(self.public_key).verify(
                self.signature, self.message()
            )
        except (InvalidSignature, ValueError):
            return False
        return True

    def as_json(self) -> dict[str, object]:
        return {
            "host": self.host,
            "seq": self.seq,
            "hash": self.hash.hex(),
            "time_us": self.time_us,
            "public_key": self.public_key.hex(),
            "signature": self.signature.hex(),
            **({"store": self.store} if self.store else {}),
        }

    @classmethod
    def from_json(cls, obj: dict[str, object]) -> SignedHead:
        """From `as_json`'s form; ValueError (or KeyError/TypeError) when it is not one."""
        return cls(
            host=str(obj["host"]),
            seq=_int(obj["seq"]),
            hash=_hex(obj["hash"], 32),
            time_us=_int(obj["time_us"]),
            public_key=_hex(obj["public_key"], 32),
            signature=_hex(obj["signature"], 64),
            store=_str(obj.get("store", "")),
        )


def _int(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**63:
        raise ValueError(f"not a 64-bit count: {value!r}")
    return value


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"not a string: {value!r}")
    return value


def _hex(value: object, size: int) -> bytes:
    raw = bytes.fromhex(str(value))
    if len(raw) != size:
        raise ValueError(f"expected {size} bytes, got {len(raw)}")
    return raw


class HostKey:
    """The host's signing key."""

    def __init__(self, private: Ed25519PrivateKey) -> None:
        self._private = private
        self.public_key = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)

    @classmethod
    def generate(cls) -> HostKey:
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_bytes(cls, raw: bytes) -> HostKey:
        return cls(Ed25519PrivateKey.from_private_bytes(raw))

    @classmethod
    def from_pem(cls, data: bytes) -> HostKey:
        """From `to_pem`'s form (PKCS#8 PEM); ValueError when it is not an Ed25519 key."""
        key = load_pem_private_key(data, password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError("not an Ed25519 private key")
        return cls(key)

    def to_pem(self) -> bytes:
        return self._private.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())

    def sign(self, host: str, seq: int, hash_: bytes, time_us: int, store: str = "") -> SignedHead:
        unsigned = SignedHead(host, seq, hash_, time_us, self.public_key, b"", store)
        return SignedHead(
            host,
            seq,
            hash_,
            time_us,
            self.public_key,
            self._private.sign(unsigned.message()),
            store,
        )


@dataclass(frozen=True)
class HeadFinding:
    """What comparing a chain with its signed heads found (`ok` False: evidence of tampering)."""

    ok: bool
    seq: int | None
    reason: str


def compare_heads(
    heads: Iterable[SignedHead],
    hash_at: Callable[[int], bytes | None],
    last_seq: int,
    trusted_key: bytes | None = None,
) -> list[HeadFinding]:
    """Check a chain (its hash at a seq, its last seq) against heads signed for it: a bad
    signature, a head whose seq now holds another hash (re-chained), a head past the
    chain's end (a cut tail, or a deleted store when the chain is empty)."""
    findings: list[HeadFinding] = []
    checked = 0
    for head in sorted(heads, key=lambda h: h.seq):
        if not head.valid(trusted_key):
            findings.append(HeadFinding(False, head.seq, "a head's signature does not verify"))
            continue
        if head.seq > last_seq:
            what = (
                "the store has no events" if last_seq == 0 else f"the chain ends at seq {last_seq}"
            )
            findings.append(
                HeadFinding(
                    False,
                    head.seq,
                    f"a head was signed at seq {head.seq} but {what}: "
                    "events were cut or the store was replaced",
                )
            )
            continue
        if hash_at(head.seq) != head.hash:
            findings.append(
                HeadFinding(
                    False,
                    head.seq,
                    f"seq {head.seq} holds another hash than the one "
                    "signed: history was rewritten and re-chained",
                )
            )
            continue
        checked += 1
    if not findings:
        findings.append(
            HeadFinding(
                True,
                None,
                "1 signed head matches the chain"
                if checked == 1
                else f"{checked} signed heads match the chain",
            )
        )
    return findings
