"""`advisor query` and `advisor export parquet`: DuckDB over the store or its export."""

from __future__ import annotations

import csv
import datetime as dt
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import click
import orjson

from advisor.cli.common import advisor_for, db_option, echo_json, emit, json_option
from advisor.cli.group import AdvisorGroup
from advisor.core.units import parse_service, service_host
from advisor.reports.render import escape_controls, safe_text


@click.command()
@click.argument("sql")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of row objects.")
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV with a header row.")
@click.option(
    "--parquet",
    "parquet_dir",
    type=click.Path(path_type=Path),
    help="Answer from a Parquet export (advisor export parquet) instead of the store.",
)
@click.option("--verbose", is_flag=True, help="Say how DuckDB reads the data (on stderr).")
@click.option(
    "--allow-files",
    is_flag=True,
    help="Let the SQL read and write files and load extensions, as DuckDB does "
    "(the store stays attached read-only).",
)
@db_option
def query(
    sql: str,
    as_json: bool,
    as_csv: bool,
    parquet_dir: Path | None,
    verbose: bool,
    allow_files: bool,
    db_url: str | None,
) -> None:
    """Run DuckDB SQL over the views events, log_lines, gpu_samples, runs, incidents, actions.
    The store is attached read-only and, unless --allow-files, the SQL reaches nothing else:
    no files, no extensions, no settings.

    \b
    Examples:
      advisor query "SELECT label, count(*) FROM incidents GROUP BY label"
      advisor query "SELECT host, count(*) FROM events GROUP BY host" --parquet ./export --csv
    """
    if as_json and as_csv:
        raise click.UsageError("--json and --csv exclude each other")
    # bad SQL is refused before the store is opened
    answer = advisor_for(db_url).query(sql, parquet_dir=parquet_dir, sandbox=not allow_files)
    if verbose:
        click.echo(
            f"duckdb: reading through the {answer.path}"
            + ("" if allow_files else " (sandboxed: the store and nothing else)"),
            err=True,
        )
    columns, rows = answer.columns, answer.rows
    if as_json:
        click.echo(
            orjson.dumps(
                [dict(zip(columns, (_plain(v) for v in row), strict=True)) for row in rows],
                option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS,
            ).decode()
        )
    elif as_csv and columns:
        # Quoted as CSV (a newline stays a newline, inside quotes); every other control
        # character from a log (ESC, CR, BEL) shown as \xNN, never sent raw to a terminal.
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow([escape_controls(c) for c in columns])
        writer.writerows([_csv_cell(v) for v in row] for row in rows)
    elif columns:
        click.echo("\t".join(safe_text(c) for c in columns))
        for row in rows:
            click.echo("\t".join(safe_text("" if v is None else str(v)) for v in row))


def _csv_cell(value: Any) -> Any:
    if isinstance(value, str):
        return escape_controls(value)
    if value is None or isinstance(value, int | float | Decimal):
        return value
    return escape_controls(str(value))


def _plain(value: Any) -> Any:
    """A DuckDB value as JSON takes it: DECIMAL as a number, BLOB and INTERVAL as text, an
    integer past 64 bits as text (orjson's limit)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**64 else str(value)
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, bytes):
        return "".join(chr(b) if 0x20 <= b < 0x7F and b != 0x5C else f"\\x{b:02x}" for b in value)
    if isinstance(value, dt.timedelta):
        return str(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {
            k if isinstance(k, str | int | float) else str(k): _plain(v) for k, v in value.items()
        }
    return value


@click.group("export", cls=AdvisorGroup)
def export_group() -> None:
    """Export the history for other tools.

    \b
    Examples:
      advisor export parquet ./export --force
    """


@export_group.command("parquet")
@click.argument("folder", type=click.Path(path_type=Path))
@click.option(
    "--force",
    is_flag=True,
    help="Replace an export already in FOLDER (it stays as it was if this one fails).",
)
@json_option
@db_option
def export_parquet_cmd(folder: Path, force: bool, as_json: bool, db_url: str | None) -> None:
    """Events partitioned by day and host, and the projections, as Parquet under FOLDER.

    \b
    Examples:
      advisor export parquet ./export
      advisor export parquet ./export --force    # replace an earlier export
    """
    adv = advisor_for(db_url)
    counts = adv.export_parquet(folder, force=force)
    if as_json:
        echo_json({"counts": counts, "folder": str(folder), "store": adv.display_url()})
        return
    click.echo(
        ", ".join(f"{n:,} {name}" for name, n in counts.items()) + f" → {safe_text(str(folder))}"
    )


@click.command()
@click.option(
    "--service",
    help="Only this unit (UNIT or HOST/UNIT; `vllm` means vllm.service, as in systemctl).",
)
@click.option("--host", help="Only this host.")
@click.option("--since", help="Only incidents and runs since (ISO 8601, @EPOCH, -7d).")
@click.option(
    "--parquet",
    "parquet_dir",
    type=click.Path(path_type=Path),
    help="From a Parquet export instead of the store.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "html"]),
    default="text",
    show_default=True,
    help="How to print (html: one self-contained page).",
)
@click.option("--out", type=click.Path(path_type=Path), help="Write to this file.")
@db_option
def stats(
    service: str | None,
    host: str | None,
    since: str | None,
    parquet_dir: Path | None,
    as_json: bool,
    fmt: str,
    out: Path | None,
    db_url: str | None,
) -> None:
    """Crashes by label, service and week; time to recovery; restart loops; GPU headroom
    per service; GPU memory release after a kill, per host.

    \b
    Examples:
      advisor stats --since -7d
      advisor stats --service vllm-llama70b --format html --out stats.html
    """
    from advisor.core.timefmt import parse_time_us

    unit = None
    if service is not None:
        from_service, unit = parse_service(service)
        host = service_host(service, from_service, host)
    since_us = parse_time_us(since) if since else None
    adv = advisor_for(db_url)
    report = adv.stats(unit=unit, host=host, since_us=since_us, parquet_dir=parquet_dir)
    if fmt == "html":
        emit(adv.stats_text(report, "html"), out)
        return
    if as_json or fmt == "json":
        echo_json(report)
        return
    click.echo(adv.stats_text(report), nl=False)


@click.command()
@click.option(
    "--to",
    "central_url",
    required=True,
    metavar="URL",
    help="The central store (postgresql+psycopg://...).",
)
@click.option("--host", help="This host's name in the central store (default: the hostname).")
@click.option(
    "--give-up-after",
    type=click.FloatRange(min=0),
    default=300.0,
    show_default=True,
    help="Seconds to keep retrying an unreachable central store.",
)
@click.option(
    "--key",
    "key_path",
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="PATH",
    help="The host key that signs the chain head stored centrally after each batch "
    "(default: the `key` setting ($ADVISOR_KEY), else the key that signs this store's "
    "heads, if it exists).",
)
@click.option(
    "--lines",
    type=click.Choice(["fleet", "all"]),
    default=None,
    help="What to ship: `fleet`, what the fleet needs, each routine serving line kept here "
    "and shipped as a digest of its range; `all`, every event (default: the `ship_lines` "
    "setting, `fleet`).",
)
@json_option
@db_option
def ship(
    central_url: str,
    host: str | None,
    give_up_after: float,
    key_path: Path | None,
    lines: str | None,
    as_json: bool,
    db_url: str | None,
) -> None:
    """Copy this host's events to a central store: resumable, idempotent, in order, checked
    against what the central store already holds for this host.

    \b
    Examples:
      advisor ship --to postgresql+psycopg://advisor_ship_gpu_node_07@central/fleet
      advisor ship --to postgresql+psycopg://advisor_ship_gpu_node_07@central/fleet --json
    """
    from dataclasses import asdict

    adv = advisor_for(db_url, host=host)
    report, central = adv.ship(
        central_url, give_up_after_s=give_up_after, key_path=key_path, lines=lines
    )
    if report.behind:
        click.echo(
            f"the central store held this host's events only up to its seq "
            f"{report.central_seq}, {report.behind:,} behind the local position: "
            "refilled from there (restored from an older backup?)",
            err=True,
        )
    for note in [*report.fetch.declined, *([report.fetch.cannot] if report.fetch.cannot else [])]:
        click.echo(safe_text(note), err=True)
    if as_json:
        echo_json({**asdict(report), "to": central, "store": adv.store.display_url})
        return
    click.echo(
        f"shipped {report.shipped:,} events ({report.duplicates:,} already there, "
        + (f"{report.held:,} routine kept here, " if report.held else "")
        + f"{report.retries} retries) to {central}; local position "
        f"{report.last_seq}"
        + (f"; {report.heads} signed heads stored" if report.heads else "")
        + (
            f"; sent {report.fetch.events:,} kept events of {report.fetch.ranges} range(s) "
            "the central store asked for"
            if report.fetch.ranges
            else ""
        )
        + (
            ""
            if report.folded
            else "; not folded there (the central store's owner folds: advisor fold)"
        )
    )


@click.command()
@click.option(
    "--before",
    required=True,
    help="Retain partitions whose events were all recorded before this (ISO 8601, "
    "@EPOCH, or -90d).",
)
@click.option(
    "--to",
    "folder",
    required=True,
    type=click.Path(path_type=Path),
    help="Write the retained events as Parquet under this folder.",
)
@click.option("--dry-run", is_flag=True, help="Only list the partitions that would go.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@db_option
def retention(before: str, folder: Path, dry_run: bool, as_json: bool, db_url: str | None) -> None:
    """Central PostgreSQL store: export old partitions of events to Parquet, record that as a
    store.retained event, and detach them.

    \b
    Examples:
      advisor retention --before -400d --to /srv/advisor-archive --dry-run --db postgresql+psycopg://advisor@central/fleet
    """
    from advisor.core.timefmt import parse_time_us

    adv = advisor_for(db_url)
    cutoff = parse_time_us(before)
    if dry_run:
        rows = [
            {
                "partition": p.name,
                "first_seq": p.first_seq,
                "last_seq": p.last_seq,
                "events": p.events,
            }
            for p in adv.retainable(cutoff)
        ]
    else:
        rows = [
            {
                "partition": r.partition,
                "first_seq": r.first_seq,
                "last_seq": r.last_seq,
                "events": r.events,
                "files": r.files,
                "recorded_by_seq": r.event_seq,
            }
            for r in adv.retain(cutoff, folder)
        ]
    if as_json:
        echo_json(rows)
        return
    verb = "would retain" if dry_run else "retained"
    for row in rows:
        click.echo(
            f"{verb} {row['partition']}: seq {row['first_seq']}–{row['last_seq']}, "
            f"{row['events']:,} events" + ("" if dry_run else f" → {folder}")
        )
    if not rows:
        click.echo(f"nothing to retain: no partition holds only events recorded before {before}")
    elif not dry_run:
        click.echo(
            "detached; drop them once the export is kept safe: "
            + "; ".join(f"DROP TABLE {row['partition']}" for row in rows)
        )
