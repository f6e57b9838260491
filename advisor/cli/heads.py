"""The command line's side of signed chain heads (docs/integrity.md): writing commands sign
them after their batches, `advisor verify --heads` reads them back and compares."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from advisor.core.render import safe_text
from advisor.core.settings import this_host

if TYPE_CHECKING:
    from advisor.store import EventStore
    from advisor.store.audit import HeadsReport
    from advisor.store.headlog import HeadsRead

SHOWN_FINDINGS = 5     # findings printed; the rest counted
JSON_FINDINGS = 100    # findings in --json; `findings_total` counts them all


def sign_heads(store: EventStore) -> None:
    """Sign the store's head after the batches this command commits (and when it ends); the
    host key is created on first use. Nothing for an in-memory store."""
    from advisor.store.headlog import (
        HeadWriter,
        default_key_path,
        heads_file_for,
        load_or_create_key,
        store_label,
    )

    label = store_label(store.url)
    if label is None:
        return
    path = default_key_path()
    key = load_or_create_key(path)
    writer = HeadWriter(store, key, host=this_host(), label=label,
                        heads_file=heads_file_for(path),
                        on_error=lambda m: click.echo(f"heads: {safe_text(m)}", err=True))
    click.get_current_context().call_on_close(writer.close)


@dataclass
class Collected:
    read: HeadsRead
    key_path: Path
    trusted_key: bytes | None   # None: there is no host key at key_path
    store_exists: bool


def collect(db_url: str, key_path: Path | None, heads_file: Path | None,
            journal_files: tuple[Path, ...]) -> Collected:
    """The heads signed for the store at `db_url`: from the heads file and the journal
    (these .journal files, else the system journal). Creates nothing."""
    from advisor.store.headlog import (
        HeadsRead,
        default_key_path,
        heads_file_for,
        load_key,
        read_heads_file,
        read_journal,
        store_label,
    )

    label = store_label(db_url)
    if label is None:
        raise click.UsageError("--heads: an in-memory store has no signed heads")
    path = key_path if key_path is not None else default_key_path()
    key = load_key(path)
    read = HeadsRead(label)
    read_heads_file(heads_file if heads_file is not None else heads_file_for(path), read)
    read_journal(journal_files, read)
    from advisor.store.migrate import store_exists

    return Collected(read, path, None if key is None else key.public_key, store_exists(db_url))


def heads_json(collected: Collected, report: HeadsReport) -> dict[str, Any]:
    read = collected.read
    return {"ok": report.ok, "store": read.label, "key": str(collected.key_path),
            "public_key": None if collected.trusted_key is None else collected.trusted_key.hex(),
            "heads": report.heads, "sources": read.sources, "unreadable": read.unreadable,
            "notes": read.notes, "last_seq": report.last_seq,
            "latest_head_seq": report.latest_head_seq, "not_covered": report.not_covered,
            "retained": report.retained,
            "findings": [{"ok": f.ok, "seq": f.seq, "reason": f.reason}
                         for f in report.findings[:JSON_FINDINGS]],
            "findings_total": len(report.findings)}


def print_heads(collected: Collected, report: HeadsReport) -> None:
    read = collected.read
    where = ", ".join(f"{safe_text(k)}: {v}" for k, v in read.sources.items()) or "none read"
    click.echo(f"heads: {report.heads} signed for {safe_text(read.label)} ({where})")
    for note in read.notes:
        click.echo(f"heads: {safe_text(note)}")
    if read.unreadable:
        click.echo(f"heads: {read.unreadable} lines or journal entries are not heads (ignored)")
    if report.latest_head_seq is not None and report.not_covered:
        click.echo(f"heads: {report.not_covered} events after the latest head (seq "
                   f"{report.latest_head_seq}) are not covered by one yet")
    if report.retained:
        click.echo(f"heads: {report.retained} heads are at retained events (not checkable)")
    bad = [f for f in report.findings if not f.ok]
    for finding in report.findings:
        if finding.ok:
            click.echo(f"heads: {safe_text(finding.reason)}")
    for finding in bad[:SHOWN_FINDINGS]:
        click.echo(f"Error: heads: {safe_text(finding.reason)}", err=True)
    if len(bad) > SHOWN_FINDINGS:
        click.echo(f"Error: heads: ... and {len(bad) - SHOWN_FINDINGS} more (see --json)",
                   err=True)


def verify_missing_store(collected: Collected, as_json: bool) -> None:
    """`verify --heads` where the store is gone but heads were signed for it: say so, exit 3."""
    import sys

    from advisor.cli.common import echo_json
    from advisor.store.audit import check_heads

    report = check_heads(None, collected.read.heads, collected.trusted_key,
                         str(collected.key_path))
    if as_json:
        echo_json({"ok": False, "checked": 0, "last_seq": 0, "first_bad_seq": None,
                   "reason": "the store does not exist", "hosts": [],
                   "heads": heads_json(collected, report)})
    else:
        click.echo(f"Error: {safe_text(collected.read.label)}: the store does not exist",
                   err=True)
        print_heads(collected, report)
    sys.exit(3)
