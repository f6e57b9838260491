"""`advisor ingest ...`: journald, text logs, nvidia-smi logs, NVML, a watched folder."""

from __future__ import annotations

import sys
import threading
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from advisor.cli.common import (
    COUNT,
    DURATION_MAX_S,
    advisor_for,
    db_option,
    json_option,
    seconds,
    settings,
)
from advisor.cli.group import AdvisorGroup
from advisor.cli.heads import sign_heads
from advisor.cli.ingest_report import (
    diagnose_option,
    host_option,
    print_report,
    samples_host,
    strict_option,
)
from advisor.cli.progress import byte_progress
from advisor.core.errors import InputError
from advisor.core.journalctl import journalctl_path
from advisor.core.units import parse_service, service_host
from advisor.front.ingesting import input_file, signals_set, sigterm_as_interrupt, text_file
from advisor.reports.render import safe_text

if TYPE_CHECKING:
    from advisor.front import Advisor
    from ingest.batches import IngestReport


@click.group(cls=AdvisorGroup)
def ingest() -> None:
    """Bring observations into the event store.

    \b
    Examples:
      advisor ingest journal --file journal.jsonl
      advisor ingest text vllm.log --service vllm-llama70b
    """


def _check_journal_sources(
    file_: str | None, journal_files: tuple[Path, ...], follow: bool, units: tuple[str, ...]
) -> None:
    chosen = sum((file_ is not None, bool(journal_files), follow and not journal_files))
    if chosen != 1:
        raise click.UsageError("give exactly one of --file F, --journal-file PATH, --follow")
    if units and file_ is not None:
        raise click.UsageError("--unit filters journalctl; it does not apply to --file")


@ingest.command("journal")
@click.option(
    "--file",
    "file_",
    metavar="F",
    help="journalctl -o json output (one JSON object per line); '-' for stdin.",
)
@click.option(
    "--journal-file",
    "journal_files",
    multiple=True,
    type=click.Path(path_type=Path),
    help="A binary .journal file, read through journalctl --file (repeatable); a folder: "
    "all its .journal files (journalctl --directory).",
)
@click.option("--follow", is_flag=True, help="Follow the live journal until interrupted.")
@click.option("--unit", "units", multiple=True, help="Only these units (globs allowed).")
@click.option("--since", help="Without a saved cursor, start here (journalctl --since).")
@strict_option
@host_option
@diagnose_option
@json_option
@db_option
def ingest_journal(
    file_: str | None,
    journal_files: tuple[Path, ...],
    follow: bool,
    units: tuple[str, ...],
    since: str | None,
    strict: bool,
    host: str | None,
    diagnose: bool,
    as_json: bool,
    db_url: str | None,
) -> None:
    """journald entries: from a JSON-lines file or stdin, .journal files, or live.

    \b
    Examples:
      advisor ingest journal --file journal.jsonl
      journalctl -u vllm -o json | advisor ingest journal --file -
      advisor ingest journal --follow --unit 'vllm*.service'
    """
    _check_journal_sources(file_, journal_files, follow, units)
    # What is missing is refused before the store is opened (and perhaps created).
    if file_ is None:
        journalctl_path()
        for jf in journal_files:
            if not jf.exists():
                raise InputError(f"--journal-file {jf}: no such file")
    elif file_ != "-":
        input_file(Path(file_))
    adv = advisor_for(db_url)
    sign_heads(adv)  # tamper evidence: docs/integrity.md
    if follow and diagnose:
        adv.diagnose_after(follow=True)
    if file_ == "-":
        report = adv.ingest_journal_stream(sys.stdin.buffer, strict=strict, default_host=host)
    elif file_ is not None:
        path = Path(file_)
        with byte_progress(f"ingesting {path.name}") as progress:
            report = adv.ingest_journal_file(
                path, strict=strict, default_host=host, progress=progress
            )
    else:
        followed = _read_journalctl(
            adv,
            files=journal_files,
            units=units,
            follow=follow,
            since=since,
            strict=strict,
            default_host=host,
        )
        if followed is None:  # stopped by a signal
            return
        report = followed
    print_report(report, as_json, adv.diagnose_after() if diagnose else None)


def _read_journalctl(adv: Advisor, **options: Any) -> IngestReport | None:
    """`.journal` files or the live journal through journalctl; None when a signal stopped
    it (SIGTERM or Ctrl-C: between two entries, what was read committed; a second: at once)."""
    stop = threading.Event()
    try:
        with signals_set(stop):
            report = adv.ingest_journalctl(stop=stop, **options)
    except KeyboardInterrupt:
        return None
    return None if stop.is_set() else report


@ingest.command("text")
@click.argument("file_", metavar="FILE", type=click.Path(path_type=Path))
@click.option(
    "--service",
    required=True,
    help="The unit the log belongs to (UNIT or HOST/UNIT; `vllm` means vllm.service, "
    "as in systemctl).",
)
@strict_option
@host_option
@diagnose_option
@json_option
@db_option
def ingest_text(
    file_: Path,
    service: str,
    strict: bool,
    host: str | None,
    diagnose: bool,
    as_json: bool,
    db_url: str | None,
) -> None:
    """A plain text log (docker logs, a server's log file, pasted terminal output).

    \b
    Examples:
      advisor ingest text vllm.log --service vllm-llama70b
      advisor ingest text docker.log --service gpu-node-07/vllm-llama70b --strict
    """
    from_service, unit = parse_service(service)
    host = service_host(service, from_service, host)
    text_file(file_)  # before the store is opened (and perhaps created)
    adv = advisor_for(db_url)
    sign_heads(adv)  # tamper evidence: docs/integrity.md
    with byte_progress(f"ingesting {file_.name}") as progress:
        report = adv.ingest_text(
            file_, unit, settings(host=host).host, strict=strict, progress=progress
        )
    print_report(report, as_json, adv.diagnose_after() if diagnose else None)


@ingest.command("nvidia-smi")
@click.argument("file_", metavar="FILE", type=click.Path(path_type=Path))
@click.option(
    "--timezone",
    "tz",
    default="UTC",
    show_default=True,
    help="Time zone the log's timestamps were written in.",
)
@strict_option
@host_option
@diagnose_option
@json_option
@db_option
def ingest_nvidia_smi(
    file_: Path,
    tz: str,
    strict: bool,
    host: str | None,
    diagnose: bool,
    as_json: bool,
    db_url: str | None,
) -> None:
    """A CSV log written by nvidia-smi --query-gpu=... --format=csv -l N.

    The samples are filed under --host; without it, under this host, unless the store's
    journal is all of one other host (a post-mortem of its files): that is refused, exit 4.

    \b
    Examples:
      advisor ingest nvidia-smi gpus.csv --host gpu-node-07 --timezone Europe/Berlin
    """
    input_file(file_)
    adv = advisor_for(db_url)
    host = samples_host(adv, host)
    sign_heads(adv)  # tamper evidence: docs/integrity.md
    with byte_progress(f"ingesting {file_.name}") as progress:
        report = adv.ingest_nvidia_smi(file_, host, tz=tz, strict=strict, progress=progress)
    print_report(report, as_json, adv.diagnose_after() if diagnose else None)


@ingest.command("gpu")
@click.option(
    "--interval",
    type=seconds(0.05),
    default=1.0,
    show_default=True,
    help="Seconds between samples.",
)
@click.option("--count", type=COUNT, help="Stop after N samples.")
@click.option("--duration", type=seconds(0, DURATION_MAX_S), help="Stop after S seconds.")
@click.option(
    "--process-every",
    type=click.IntRange(1, 10**6),
    default=1,
    show_default=True,
    help="List GPU processes every Nth sample (the costly NVML call).",
)
@click.option(
    "--record",
    "record_path",
    type=click.Path(path_type=Path),
    help="Also append the samples as JSON lines to this file.",
)
@click.option(
    "--replay",
    "replay_path",
    type=click.Path(path_type=Path),
    help="Ingest a recording made with --record instead of sampling.",
)
@strict_option
@host_option
@diagnose_option
@json_option
@db_option
def ingest_gpu(
    interval: float,
    count: int | None,
    duration: float | None,
    process_every: int,
    record_path: Path | None,
    replay_path: Path | None,
    strict: bool,
    host: str | None,
    diagnose: bool,
    as_json: bool,
    db_url: str | None,
) -> None:
    """NVML samples of every GPU: memory, utilisation, temperature, power, processes.

    \b
    Examples:
      advisor ingest gpu --interval 1 --count 60
      advisor ingest gpu --replay samples.jsonl
    """
    from advisor.front import Advisor

    if replay_path is not None:
        if record_path is not None:
            raise click.UsageError("--record and --replay exclude each other")
        input_file(replay_path)
        adv = advisor_for(db_url)
        sign_heads(adv)  # tamper evidence: docs/integrity.md
        with byte_progress(f"replaying {replay_path.name}") as progress:
            report = adv.replay_gpu(replay_path, strict=strict, progress=progress)
        print_report(report, as_json, adv.diagnose_after() if diagnose else None)
        return
    # Open NVML before anything else: without a GPU nothing may be written.
    with Advisor.gpu_sampler(settings(host=host).host, process_every) as sampler:
        adv = advisor_for(db_url)
        sign_heads(adv)  # tamper evidence: docs/integrity.md
        with ExitStack() as stack:
            record = stack.enter_context(open(record_path, "ab")) if record_path else None
            try:
                with sigterm_as_interrupt():
                    report = adv.sample_gpus(
                        sampler,
                        interval_s=interval,
                        count=count,
                        duration_s=duration,
                        record=record,
                    )
            except KeyboardInterrupt:
                return
    print_report(report, as_json)


@ingest.command("watch")
@click.argument("folder", type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.option(
    "--service",
    help="File every text log under this unit (UNIT or HOST/UNIT; "
    "`vllm` means vllm.service; default: the file name without "
    ".log and rotation suffixes).",
)
@click.option(
    "--timezone",
    "tz",
    default="UTC",
    show_default=True,
    help="Time zone of nvidia-smi CSV timestamps.",
)
@host_option
@db_option
def ingest_watch(
    folder: Path, service: str | None, tz: str, host: str | None, db_url: str | None
) -> None:
    """Watch FOLDER; ingest new and appended journal JSON, text, nvidia-smi and GPU
    recording files until interrupted (SIGINT or SIGTERM).

    \b
    Examples:
      advisor ingest watch /var/log/inference --service vllm-llama70b
    """
    unit = None
    if service is not None:
        from_service, unit = parse_service(service)
        host = service_host(service, from_service, host)
    adv = advisor_for(db_url)
    sign_heads(adv)  # tamper evidence: docs/integrity.md
    adv.diagnose_after(follow=True)

    def reported(path: Path, report: IngestReport) -> None:
        click.echo(
            f"{safe_text(str(path))}: stored {report.appended} new events, "
            f"{report.malformed_count} malformed"
        )

    def failed(path: Path, message: str) -> None:
        click.echo(f"Error: {safe_text(message)}", err=True)

    watcher = adv.folder_watcher(
        folder.resolve(),
        host=settings(host=host).host,
        service=unit,
        tz=tz,
        on_report=reported,
        on_error=failed,
    )
    stop = threading.Event()
    try:
        with signals_set(stop):
            watcher.run(stop)
    except KeyboardInterrupt:
        pass
    click.echo(f"stopped: {watcher.stats.appended} events stored")
