"""`advisor verify`: the hash chain, each shipped host's own chain, and (with the heads) the
chain against the heads this host signed — one result, ok or not."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from advisor.store import EventStore
    from advisor.store.integrity.audit import HeadsReport, VerifyReport
    from advisor.store.integrity.headlog import HeadsRead
    from advisor.store.integrity.heads import HeadFinding
    from advisor.store.integrity.hostchain import HostChainReport


@dataclass
class Collected:
    read: HeadsRead
    key_path: Path
    trusted_key: bytes | None  # None: there is no host key at key_path
    store_exists: bool


def collect(
    db_url: str,
    label: str,
    key_path: Path | None,
    heads_file: Path | None,
    journal_files: tuple[Path, ...],
) -> Collected:
    """The heads signed for the store at `db_url` (its `label`: `store_label`): from the
    heads file and the journal (these .journal files, else the system journal). Creates
    nothing."""
    from advisor.store.integrity.headlog import (
        HeadsRead,
        default_key_path,
        heads_file_for,
        load_key,
        read_heads_file,
        read_journal,
    )
    from advisor.store.migrate import store_exists

    path = key_path if key_path is not None else default_key_path()
    key = load_key(path)
    read = HeadsRead(label)
    read_heads_file(heads_file if heads_file is not None else heads_file_for(path), read)
    read_journal(journal_files, read)
    return Collected(read, path, None if key is None else key.public_key, store_exists(db_url))


def missing_store_heads(collected: Collected) -> HeadsReport:
    """The heads compared with a store that does not exist (never ok when there are heads:
    the missing store is the finding)."""
    from advisor.store.integrity.audit import check_heads

    return check_heads(None, collected.read.heads, collected.trusted_key, str(collected.key_path))


@dataclass
class Verification:
    report: VerifyReport
    hosts: list[HostChainReport] = field(default_factory=list)
    heads: HeadsReport | None = None  # with the heads collected
    host_heads: dict[str, list[HeadFinding]] = field(default_factory=dict)  # central store

    @property
    def ok(self) -> bool:
        return (
            self.report.ok
            and all(h.ok for h in self.hosts)
            and (self.heads is None or self.heads.ok)
            and all(f.ok for found in self.host_heads.values() for f in found)
        )


def verify_store(
    store: EventStore, collected: Collected | None, progress: Callable[[int], None] | None = None
) -> Verification:
    """Walk the chain (`progress` told of the events checked), each shipped host's chain, and
    with `collected` the heads: this store's, and in a central store each host's shipped
    chain against the heads that host signed."""
    from advisor.store.integrity import audit, hostchain

    report = audit.verify(store, progress=progress)
    hosts = [hostchain.verify_host(store, source) for source in hostchain.shipped_sources(store)]
    if collected is None:
        return Verification(report, hosts)
    heads = audit.check_heads(
        store, collected.read.heads, collected.trusted_key, str(collected.key_path)
    )
    return Verification(report, hosts, heads, hostchain.central_head_findings(store))
