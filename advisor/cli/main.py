"""The `advisor` command line: a thin layer that parses options, calls the library, prints."""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

import click
import orjson

from advisor.cli.actions import (
    actions_cmd,
    approve,
    auto,
    reject,
    remediate,
    replan,
    rollback,
)
from advisor.cli.analytics import export_group, query, retention, ship, stats
from advisor.cli.central import fold
from advisor.cli.common import (
    COUNT,
    db_option,
    echo_json,
    handle_errors,
    json_option,
    store_for,
)
from advisor.cli.demo import demo
from advisor.cli.diagnose import classify, model_group, rules_group
from advisor.cli.ingest import ingest
from advisor.cli.projections import diagnose, explain, incidents, rebuild, runs
from advisor.cli.watch import watch
from advisor.core.progress import count_progress
from advisor.core.render import event_json, event_line, safe_text
from advisor.core.timefmt import format_us, parse_time_us
from advisor.store import EventFilter


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="advisor")
def cli() -> None:
    """Crash analytics and recovery advisor for GPU LLM inference servers.

    Exit codes: 0 ok, 1 error, 2 bad usage or a missing prerequisite (no GPU, no
    journalctl), 3 the store's hash chain does not verify, 4 unusable input, 130
    interrupted.
    """


@cli.group()
def db() -> None:
    """Manage the event store's schema."""


@db.command("upgrade")
@click.option("--shared-schema", is_flag=True,
              help="Create the tables even where the database (PostgreSQL: the schema) "
                   "already holds other tables.")
@db_option
@handle_errors
def db_upgrade(shared_schema: bool, db_url: str | None) -> None:
    """Create the store or bring its schema up to date."""
    from advisor.store import migrate

    store = store_for(db_url, shared_schema=shared_schema)
    with store.connect() as conn:
        revision = migrate.current_revision(conn)
    click.echo(f"{store.display_url}: schema at revision {revision}")


@cli.command()
@click.option("--stream", help="Only this stream (HOST/UNIT or HOST/gpuN).")
@click.option("--type", "type_", help="Only this event type (log.recorded, gpu.sampled).")
@click.option("--since", help="Only events at or after this time (ISO 8601, @EPOCH, -2h).")
@click.option("--limit", type=COUNT, help="Only the last N matching events.")
@json_option
@db_option
@handle_errors
def events(stream: str | None, type_: str | None, since: str | None, limit: int | None,
           as_json: bool, db_url: str | None) -> None:
    """List stored events, oldest first (with --json: one JSON object per line)."""
    flt = EventFilter(stream=stream, type=type_, limit=limit,
                      since_us=None if since is None else parse_time_us(since))
    store = store_for(db_url, read_only=True)
    for event in store.read(flt):
        if as_json:
            click.echo(orjson.dumps(event_json(event)).decode())
        else:
            click.echo(event_line(event))


@cli.command()
@json_option
@db_option
@handle_errors
def status(as_json: bool, db_url: str | None) -> None:
    """Store URL, schema revision, counts per type and stream, last position per source."""
    from advisor.store import audit
    from advisor.views.skipped import count_skipped

    store = store_for(db_url, read_only=True)
    st = audit.status(store)
    skipped = count_skipped(store)
    if as_json:
        echo_json({**st.__dict__, "skipped": skipped})
        return
    click.echo(f"store:     {st.url}")
    click.echo(f"schema:    {st.revision} (head {st.head_revision})")
    click.echo(f"events:    {st.events} (last seq {st.last_seq})")
    click.echo("skipped:   " + ", ".join(f"{stage} {n}" for stage, n in skipped.items())
               + "  (events the fold, runs the diagnoser could not use: pipeline.skipped)")
    for title, counts in (("by type", st.by_type), ("by stream", st.by_stream)):
        click.echo(f"{title}:")
        for name, count in counts.items():
            click.echo(f"  {safe_text(name):<48} {count:>10}")
    click.echo("checkpoints:")
    for name, pos in st.checkpoints.items():
        shown = {k: v for k, v in pos.items() if k not in ("updated_time_us", "header")}
        click.echo(f"  {safe_text(name)}  {safe_text(str(shown))}  "
                   f"(at {format_us(pos['updated_time_us'])})")


@cli.command()
@click.option("--heads", "with_heads", is_flag=True,
              help="Also compare the chain with the heads this host signed (the heads file, "
                   "the journal): finds a re-chained history, a cut tail, a deleted store.")
@click.option("--key", "key_path", type=click.Path(path_type=Path), metavar="PATH",
              help="The host key the heads must be signed with (implies --heads). Default: "
                   "$ADVISOR_KEY, else /etc/advisor/host-key for root, "
                   "$XDG_CONFIG_HOME/advisor/host-key for others. Never created here.")
@click.option("--heads-file", type=click.Path(path_type=Path), metavar="PATH",
              help="The heads file (implies --heads; default: KEY.heads, beside the key).")
@click.option("--heads-journal-file", "heads_journal_files", multiple=True,
              type=click.Path(path_type=Path), metavar="PATH",
              help="Read heads from this .journal file instead of the system journal "
                   "(repeatable; implies --heads).")
@json_option
@db_option
@handle_errors
def verify(with_heads: bool, key_path: Path | None, heads_file: Path | None,
           heads_journal_files: tuple[Path, ...], as_json: bool, db_url: str | None) -> None:
    """Walk the hash chain; name the first event that does not match (exit 3). In a central
    store, also walk each host's own chain as it was shipped. With --heads, also compare it
    with the heads the host signed (exit 3 on a mismatch, a cut tail or a deleted store)."""
    from advisor.store import audit

    collected = None
    if with_heads or key_path is not None or heads_file is not None or heads_journal_files:
        from advisor.cli.heads import collect, verify_missing_store
        from advisor.core.settings import default_db_url

        collected = collect(db_url or default_db_url(), key_path, heads_file,
                            heads_journal_files)
        if not collected.store_exists and collected.read.heads:
            verify_missing_store(collected, as_json)  # exits 3: the missing store is the finding
    store = store_for(db_url, read_only=True)
    with count_progress("verifying", audit.last_seq(store)) as progress:
        report = audit.verify(store, progress=progress)
    hosts = [audit.verify_host(store, source) for source in audit.shipped_sources(store)]
    heads = None if collected is None else audit.check_heads(
        store, collected.read.heads, collected.trusted_key, str(collected.key_path))
    # A central store: each host's shipped chain against the heads that host signed.
    host_heads = {} if collected is None else audit.central_head_findings(store)
    ok = (report.ok and all(h.ok for h in hosts) and (heads is None or heads.ok)
          and all(f.ok for found in host_heads.values() for f in found))
    if as_json:
        from advisor.cli.heads import heads_json
        from advisor.views.skipped import count_skipped

        echo_json({"ok": ok, **asdict(report),
                   "hosts": [{"ok": h.ok, **asdict(h)} for h in hosts],
                   "skipped": count_skipped(store),
                   **({"host_heads": {host: [asdict(f) for f in found]
                                      for host, found in host_heads.items()}}
                      if host_heads else {}),
                   **({} if collected is None or heads is None
                      else {"heads": heads_json(collected, heads)})})
    else:
        if report.ok:
            click.echo(f"verified {report.checked} events: hash chain intact "
                       f"(last seq {report.last_seq})")
        else:
            click.echo(f"Error: hash chain broken at seq {report.first_bad_seq}: "
                       f"{report.reason}", err=True)
        for h in hosts:
            unchecked = (f"; {h.unchecked} shipped before origins were kept, not checkable"
                         if h.unchecked else "")
            if h.ok:
                click.echo(f"host {h.host}: verified {h.checked} shipped events of its own "
                           f"chain (host seq 1–{h.last_seq}){unchecked}")
            else:
                click.echo(f"Error: host {h.host}: chain broken at its seq {h.first_bad_seq}: "
                           f"{h.reason}", err=True)
        if collected is not None and heads is not None:
            from advisor.cli.heads import print_heads

            print_heads(collected, heads)
        for host, found in host_heads.items():
            for f in found:
                if f.ok:
                    click.echo(f"host {safe_text(host)}: {f.reason}")
                else:
                    click.echo(f"Error: host {safe_text(host)}: {safe_text(f.reason)}",
                               err=True)
    if not ok:
        sys.exit(3)


cli.add_command(ingest)
cli.add_command(classify)
cli.add_command(rules_group)
cli.add_command(model_group)
cli.add_command(runs)
cli.add_command(incidents)
cli.add_command(rebuild)
cli.add_command(diagnose)
for command in (actions_cmd, approve, reject, rollback, remediate, replan, explain, auto, watch,
                demo,
                query, export_group, stats, ship, fold, retention):
    cli.add_command(command)


def main() -> None:
    cli(prog_name="advisor")


if __name__ == "__main__":
    main()
