"""`advisor verify`: the hash chain, the shipped hosts' chains, and the signed heads."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import click

from advisor.cli.common import advisor_for, db_option, echo_json, json_option
from advisor.cli.heads import heads_json, print_heads
from advisor.core.errors import IntegrityError
from advisor.reports.render import safe_text

if TYPE_CHECKING:
    from advisor.front import Advisor
    from advisor.pipeline.verify import Collected, Verification


@click.command()
@click.option(
    "--heads",
    "with_heads",
    is_flag=True,
    help="Also compare the chain with the heads this host signed (the heads file, "
    "the journal): finds a re-chained history, a cut tail, a deleted store.",
)
@click.option(
    "--key",
    "key_path",
    type=click.Path(path_type=Path),
    metavar="PATH",
    help="The host key the heads must be signed with (implies --heads). Default: the "
    "`key` setting ($ADVISOR_KEY), else the store's own key (docs/integrity.md, \"The host "
    'key"). Never created here.',
)
@click.option(
    "--heads-file",
    type=click.Path(path_type=Path),
    metavar="PATH",
    help="The heads file (implies --heads; default: KEY.heads, beside the key).",
)
@click.option(
    "--heads-journal-file",
    "heads_journal_files",
    multiple=True,
    type=click.Path(path_type=Path),
    metavar="PATH",
    help="Read heads from this .journal file instead of the system journal "
    "(repeatable; implies --heads).",
)
@json_option
@db_option
def verify(
    with_heads: bool,
    key_path: Path | None,
    heads_file: Path | None,
    heads_journal_files: tuple[Path, ...],
    as_json: bool,
    db_url: str | None,
) -> None:
    """Walk the hash chain; name the first event that does not match (exit 3). In a central
    store, also walk each host's own chain as it was shipped. With --heads, also compare it
    with the heads the host signed (exit 3 on a mismatch, a cut tail or a deleted store).

    \b
    Examples:
      advisor verify
      advisor verify --heads --json
    """
    from advisor.cli.progress import count_progress

    adv = advisor_for(db_url, read_only=True)
    collected = None
    if with_heads or key_path is not None or heads_file is not None or heads_journal_files:
        collected = adv.collect_heads(key_path, heads_file, heads_journal_files)
        if collected is None:
            raise click.UsageError("--heads: an in-memory store has no signed heads")
        if not collected.store_exists and collected.read.heads:
            # The missing store is the finding.
            _say_missing_store(adv, collected, as_json)
            raise SystemExit(IntegrityError.exit_code)
    with count_progress("verifying", adv.last_seq()) as progress:
        result = adv.verify(collected, progress)
    if as_json:
        _echo_json(adv, result, collected)
    else:
        _print(result, collected)
    if not result.ok:
        raise SystemExit(IntegrityError.exit_code)


def _say_missing_store(adv: Advisor, collected: Collected, as_json: bool) -> None:
    report = adv.missing_store_heads(collected)
    if as_json:
        echo_json(
            {
                "ok": False,
                "checked": 0,
                "last_seq": 0,
                "first_bad_seq": None,
                "reason": "the store does not exist",
                "hosts": [],
                "heads": heads_json(collected, report),
            }
        )
    else:
        click.echo(f"Error: {safe_text(collected.read.label)}: the store does not exist", err=True)
        print_heads(collected, report)


def _echo_json(adv: Advisor, result: Verification, collected: Collected | None) -> None:
    echo_json(
        {
            "ok": result.ok,
            **asdict(result.report),
            "hosts": [{"ok": h.ok, **asdict(h)} for h in result.hosts],
            "skipped": adv.skipped(),
            **(
                {
                    "host_heads": {
                        host: [asdict(f) for f in found]
                        for host, found in result.host_heads.items()
                    }
                }
                if result.host_heads
                else {}
            ),
            **(
                {}
                if collected is None or result.heads is None
                else {"heads": heads_json(collected, result.heads)}
            ),
        }
    )


def _print(result: Verification, collected: Collected | None) -> None:
    report = result.report
    if report.ok:
        click.echo(
            f"verified {report.checked} events: hash chain intact (last seq {report.last_seq})"
        )
    else:
        click.echo(
            f"Error: hash chain broken at seq {report.first_bad_seq}: {report.reason}", err=True
        )
    for h in result.hosts:
        unchecked = (
            f"; {h.unchecked} shipped before origins were kept, not checkable"
            if h.unchecked
            else ""
        )
        kept = f", and {h.kept} kept events fetched from it" if h.kept else ""
        if h.ok:
            click.echo(
                f"host {h.host}: verified {h.checked} shipped events of its own "
                f"chain (host seq 1–{h.last_seq}){kept}{unchecked}"
            )
        else:
            click.echo(
                f"Error: host {h.host}: chain broken at its seq {h.first_bad_seq}: {h.reason}",
                err=True,
            )
    if collected is not None and result.heads is not None:
        print_heads(collected, result.heads)
    for host, found in result.host_heads.items():
        for f in found:
            if f.ok:
                click.echo(f"host {safe_text(host)}: {f.reason}")
            else:
                click.echo(f"Error: host {safe_text(host)}: {safe_text(f.reason)}", err=True)
