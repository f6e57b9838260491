"""`advisor query` and `advisor export parquet`: DuckDB over the store or its export."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import click

from advisor.cli_common import db_option, echo_json, emit, handle_errors
from advisor.render import safe_text
from advisor.settings import default_db_url
from advisor.units import parse_service, service_host


@click.command()
@click.argument("sql")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of row objects.")
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV with a header row.")
@click.option("--parquet", "parquet_dir", type=click.Path(path_type=Path),
              help="Answer from a Parquet export (advisor export parquet) instead of the store.")
@click.option("--verbose", is_flag=True, help="Say how DuckDB reads the data (on stderr).")
@db_option
@handle_errors
def query(sql: str, as_json: bool, as_csv: bool, parquet_dir: Path | None, verbose: bool,
          db_url: str | None) -> None:
    """Run DuckDB SQL over the views events, log_lines, gpu_samples, runs, incidents, actions."""
    from advisor.analytics import connect_parquet, connect_store

    if as_json and as_csv:
        raise click.UsageError("--json and --csv exclude each other")
    conn = (connect_parquet(parquet_dir) if parquet_dir is not None
            else connect_store(db_url or default_db_url()))
    try:
        if verbose:
            click.echo(f"duckdb: reading through the {conn.path}", err=True)
        columns, rows = conn.query(sql)
    finally:
        conn.close()
    if as_json:
        echo_json([dict(zip(columns, row, strict=True)) for row in rows])
    elif as_csv:
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(rows)
    else:
        click.echo("\t".join(columns))
        for row in rows:
            click.echo("\t".join(safe_text("" if v is None else str(v)) for v in row))


@click.group("export")
def export_group() -> None:
    """Export the history for other tools."""


@export_group.command("parquet")
@click.argument("folder", type=click.Path(path_type=Path))
@db_option
@handle_errors
def export_parquet_cmd(folder: Path, db_url: str | None) -> None:
    """Events partitioned by day and host, and the projections, as Parquet under FOLDER."""
    from advisor.analytics import export_parquet

    counts = export_parquet(db_url or default_db_url(), folder)
    click.echo(", ".join(f"{n:,} {name}" for name, n in counts.items()) + f" → {folder}")


@click.command()
@click.option("--service", help="Only this unit (UNIT or HOST/UNIT; `vllm` means vllm.service, "
                                "as in systemctl).")
@click.option("--host", help="Only this host.")
@click.option("--since", help="Only incidents and runs since (ISO 8601, @EPOCH, -7d).")
@click.option("--parquet", "parquet_dir", type=click.Path(path_type=Path),
              help="From a Parquet export instead of the store.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "html"]), default="text",
              show_default=True, help="How to print (html: one self-contained page).")
@click.option("--out", type=click.Path(path_type=Path), help="Write to this file.")
@db_option
@handle_errors
def stats(service: str | None, host: str | None, since: str | None, parquet_dir: Path | None,
          as_json: bool, fmt: str, out: Path | None, db_url: str | None) -> None:
    """Crashes by label, service and week; time to recovery; restart loops; GPU headroom
    per service; GPU memory release after a kill, per host."""
    from advisor.analytics import connect_parquet, connect_store
    from advisor.analytics import stats as stats_
    from advisor.timefmt import parse_time_us

    unit = None
    if service is not None:
        from_service, unit = parse_service(service)
        host = service_host(service, from_service, host)
    conn = (connect_parquet(parquet_dir) if parquet_dir is not None
            else connect_store(db_url or default_db_url()))
    try:
        report = stats_(conn, unit=unit, host=host,
                        since_us=parse_time_us(since) if since else None)
    finally:
        conn.close()
    if fmt == "html":
        from advisor.html import render_stats

        emit(render_stats(report), out)
        return
    if as_json or fmt == "json":
        echo_json(report)
        return
    for section, rows in report.items():
        click.echo(section.replace("_", " "))
        if not rows or all(v in (None, 0) for v in rows[0].values()):
            click.echo("  (none)")
            continue
        columns = list(rows[0])
        click.echo("  " + "  ".join(columns))
        for row in rows:
            click.echo("  " + "  ".join(safe_text(str(row[c])) for c in columns))


@click.command()
@click.option("--to", "central_url", required=True, metavar="URL",
              help="The central store (postgresql+psycopg://...).")
@click.option("--host", help="This host's name in the central store (default: the hostname).")
@click.option("--give-up-after", type=click.FloatRange(min=0), default=300.0,
              show_default=True, help="Seconds to keep retrying an unreachable central store.")
@db_option
@handle_errors
def ship(central_url: str, host: str | None, give_up_after: float, db_url: str | None) -> None:
    """Copy this host's events to a central store: resumable, idempotent, in order."""
    from advisor.cli_common import store_for
    from advisor.settings import this_host
    from advisor.ship import ship as ship_
    from advisor.store import open_store

    local = store_for(db_url)
    central = open_store(central_url)
    try:
        report = ship_(local, central, host or this_host(), give_up_after_s=give_up_after)
    finally:
        central.close()
    click.echo(f"shipped {report.shipped:,} events ({report.duplicates:,} already there, "
               f"{report.retries} retries) to {central.display_url}; local position "
               f"{report.last_seq}")


@click.command()
@click.option("--before", required=True,
              help="Retain partitions whose events were all recorded before this (ISO 8601, "
                   "@EPOCH, or -90d).")
@click.option("--to", "folder", required=True, type=click.Path(path_type=Path),
              help="Write the retained events as Parquet under this folder.")
@click.option("--dry-run", is_flag=True, help="Only list the partitions that would go.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@db_option
@handle_errors
def retention(before: str, folder: Path, dry_run: bool, as_json: bool,
              db_url: str | None) -> None:
    """Central PostgreSQL store: export old partitions of events to Parquet, record that as a
    store.retained event, and detach them."""
    from advisor.cli_common import store_for
    from advisor.retention import retain, retainable
    from advisor.timefmt import parse_time_us

    store = store_for(db_url)
    cutoff = parse_time_us(before)
    if dry_run:
        rows = [{"partition": p.name, "first_seq": p.first_seq, "last_seq": p.last_seq,
                 "events": p.events} for p in retainable(store, cutoff)]
    else:
        rows = [{"partition": r.partition, "first_seq": r.first_seq, "last_seq": r.last_seq,
                 "events": r.events, "files": r.files, "recorded_by_seq": r.event_seq}
                for r in retain(store, cutoff, folder)]
    if as_json:
        echo_json(rows)
        return
    verb = "would retain" if dry_run else "retained"
    for row in rows:
        click.echo(f"{verb} {row['partition']}: seq {row['first_seq']}–{row['last_seq']}, "
                   f"{row['events']:,} events" + ("" if dry_run else f" → {folder}"))
    if not rows:
        click.echo("nothing to retain: no partition holds only events recorded before "
                   f"{before}")
    elif not dry_run:
        click.echo("detached; drop them once the export is kept safe: "
                   + "; ".join(f"DROP TABLE {row['partition']}" for row in rows))
