"""The command line's side of signed chain heads (docs/integrity.md): writing commands sign
them after their batches, `advisor verify --heads` reads them back and compares."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from advisor.reports.render import safe_text

if TYPE_CHECKING:
    from advisor.front import Advisor
    from advisor.pipeline.verify import Collected
    from advisor.store.integrity.audit import HeadsReport

SHOWN_FINDINGS = 5  # findings printed; the rest counted
JSON_FINDINGS = 100  # findings in --json; `findings_total` counts them all


def sign_heads(adv: Advisor) -> None:
    """Sign the store's head after the batches this command commits (and when it ends); the
    host key is created on first use. Nothing for an in-memory store."""
    close = adv.sign_heads(lambda m: click.echo(f"heads: {safe_text(m)}", err=True))
    if close is not None:
        click.get_current_context().call_on_close(close)


def heads_json(collected: Collected, report: HeadsReport) -> dict[str, Any]:
    read = collected.read
    return {
        "ok": report.ok,
        "store": read.label,
        "key": str(collected.key_path),
        "public_key": None if collected.trusted_key is None else collected.trusted_key.hex(),
        "heads": report.heads,
        "sources": read.sources,
        "unreadable": read.unreadable,
        "notes": read.notes,
        "last_seq": report.last_seq,
        "latest_head_seq": report.latest_head_seq,
        "not_covered": report.not_covered,
        "retained": report.retained,
        "findings": [
            {"ok": f.ok, "seq": f.seq, "reason": f.reason} for f in report.findings[:JSON_FINDINGS]
        ],
        "findings_total": len(report.findings),
    }


def print_heads(collected: Collected, report: HeadsReport) -> None:
    read = collected.read
    where = ", ".join(f"{safe_text(k)}: {v}" for k, v in read.sources.items()) or "none read"
    click.echo(f"heads: {report.heads} signed for {safe_text(read.label)} ({where})")
    for note in read.notes:
        click.echo(f"heads: {safe_text(note)}")
    if read.unreadable:
        click.echo(f"heads: {read.unreadable} lines or journal entries are not heads (ignored)")
    if report.latest_head_seq is not None and report.not_covered:
        click.echo(
            f"heads: {report.not_covered} events after the latest head (seq "
            f"{report.latest_head_seq}) are not covered by one yet"
        )
    if report.retained:
        click.echo(f"heads: {report.retained} heads are at retained events (not checkable)")
    bad = [f for f in report.findings if not f.ok]
    for finding in report.findings:
        if finding.ok:
            click.echo(f"heads: {safe_text(finding.reason)}")
    for finding in bad[:SHOWN_FINDINGS]:
        click.echo(f"Error: heads: {safe_text(finding.reason)}", err=True)
    if len(bad) > SHOWN_FINDINGS:
        click.echo(f"Error: heads: ... and {len(bad) - SHOWN_FINDINGS} more (see --json)", err=True)
