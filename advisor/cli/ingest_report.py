"""What every `advisor ingest` command shares: its options, the report of what it read
(exit 4 when none of the input could be read), and the host GPU logs are filed under."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from advisor.cli.common import echo_json, settings
from advisor.core.errors import InputError
from advisor.reports.render import safe_text

if TYPE_CHECKING:
    from advisor.front import Advisor
    from advisor.pipeline.processing import ProcessReport
    from ingest.batches import IngestReport

strict_option = click.option(
    "--strict", is_flag=True, help="A line that cannot be parsed is an error; nothing is written."
)
diagnose_option = click.option(
    "--diagnose/--no-diagnose",
    default=True,
    show_default=True,
    help="Diagnose what was ingested (runs, incidents) before returning; --no-diagnose "
    "leaves it to `advisor diagnose` (faster bulk imports).",
)
host_option = click.option(
    "--host", default=None, help="Host name for entries that lack one (default: this host)."
)


def print_report(
    report: IngestReport, as_json: bool, diagnosis: ProcessReport | None = None
) -> None:
    """Print what was read and stored; InputError (exit 4) after it when every line read
    was malformed: nothing of the input could be used."""
    if as_json:
        echo_json({**report.as_dict(), **({"diagnosis": diagnosis.as_dict()} if diagnosis else {})})
    else:
        _print_text(report, diagnosis)
    if report.malformed_count and report.malformed_count >= report.read:
        first = f" (line {report.malformed[0].line_no}: {report.malformed[0].reason})"
        raise InputError(
            f"{report.source}: none of its {report.read} line(s) could be read"
            + (first if report.malformed else "")
        )


def _print_text(report: IngestReport, diagnosis: ProcessReport | None) -> None:
    click.echo(
        f"{safe_text(report.source)}: read {report.read}, stored {report.appended} "
        f"new events, {report.duplicates} already stored, "
        f"{report.malformed_count} malformed"
    )
    for m in report.malformed:
        click.echo(f"  line {m.line_no}: {safe_text(m.reason)}", err=True)
    if report.malformed_count > len(report.malformed):
        click.echo(f"  ... and {report.malformed_count - len(report.malformed)} more", err=True)
    if diagnosis is not None and diagnosis.diagnosed:
        click.echo(
            f"diagnosed {diagnosis.diagnosed} runs ({diagnosis.diagnosis_events} new "
            "diagnosis events; see `advisor incidents`)"
        )


def samples_host(adv: Advisor, host: str | None) -> str:
    """The host an nvidia-smi CSV is filed under: `--host`, else this host (the settings'
    `host`) — unless the store's log lines are all of one other host, as in a post-mortem of
    that host's files: then InputError (exit 4) naming it, rather than samples no chart of
    that host would ever show."""
    here = settings(host=host).host
    if host is not None:
        return here
    logged = adv.log_hosts()
    if len(logged) == 1 and here not in logged:
        (other,) = logged
        raise InputError(
            f"ingest nvidia-smi: the store's journal is of host {safe_text(other)}, not this "
            f"host ({safe_text(here)}); give --host {safe_text(other)} to file the samples "
            f"under it (or --host {safe_text(here)})"
        )
    return here
