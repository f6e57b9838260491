"""The `advisor` command line: a thin layer that parses options, calls the library, prints."""

from __future__ import annotations

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
from advisor.cli.common import COUNT, db_option, echo_json, json_option, store_for
from advisor.cli.demo import demo
from advisor.cli.diagnose import classify, model_group, rules_group
from advisor.cli.group import AdvisorGroup
from advisor.cli.ingest import ingest
from advisor.cli.projections import diagnose, explain, incidents, rebuild, runs
from advisor.cli.serve import serve
from advisor.cli.verify import verify
from advisor.cli.watch import watch
from advisor.core.render import event_json, event_line, safe_text
from advisor.core.timefmt import format_us, parse_time_us
from advisor.store import EventFilter


@click.group(cls=AdvisorGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="advisor")
def cli() -> None:
    """Crash analytics and recovery advisor for GPU LLM inference servers.

    Exit codes: 0 ok, 1 error, 2 bad usage or a missing prerequisite (no GPU, no
    journalctl), 3 the store's hash chain does not verify, 4 unusable input, 130
    interrupted.

    \b
    Examples:
      advisor demo --yes
      advisor classify crash.log
      advisor explain vllm-llama70b
    """


@cli.group()
def db() -> None:
    """Manage the event store's schema.

    \b
    Examples:
      advisor db upgrade --db sqlite:///var/lib/advisor/events.db
    """


@db.command("upgrade")
@click.option(
    "--shared-schema",
    is_flag=True,
    help="Create the tables even where the database (PostgreSQL: the schema) "
    "already holds other tables.",
)
@db_option
def db_upgrade(shared_schema: bool, db_url: str | None) -> None:
    """Create the store or bring its schema up to date.

    \b
    Examples:
      advisor db upgrade
      advisor db upgrade --db postgresql+psycopg://advisor@central/fleet
    """
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
def events(
    stream: str | None,
    type_: str | None,
    since: str | None,
    limit: int | None,
    as_json: bool,
    db_url: str | None,
) -> None:
    """List stored events, oldest first (with --json: one JSON object per line).

    \b
    Examples:
      advisor events --since -2h --limit 50
      advisor events --stream gpu-node-07/vllm.service --type log.recorded --json
    """
    flt = EventFilter(
        stream=stream,
        type=type_,
        limit=limit,
        since_us=None if since is None else parse_time_us(since),
    )
    store = store_for(db_url, read_only=True)
    for event in store.read(flt):
        if as_json:
            click.echo(orjson.dumps(event_json(event)).decode())
        else:
            click.echo(event_line(event))


@cli.command()
@json_option
@db_option
def status(as_json: bool, db_url: str | None) -> None:
    """Store URL, schema revision, counts per type and stream, last position per source.

    \b
    Examples:
      advisor status
      advisor status --json
    """
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
    click.echo(
        "skipped:   "
        + ", ".join(f"{stage} {n}" for stage, n in skipped.items())
        + "  (events the fold, runs the diagnoser could not use: pipeline.skipped)"
    )
    for title, counts in (("by type", st.by_type), ("by stream", st.by_stream)):
        click.echo(f"{title}:")
        for name, count in counts.items():
            click.echo(f"  {safe_text(name):<48} {count:>10}")
    click.echo("checkpoints:")
    for name, pos in st.checkpoints.items():
        shown = {k: v for k, v in pos.items() if k not in ("updated_time_us", "header")}
        click.echo(
            f"  {safe_text(name)}  {safe_text(str(shown))}  "
            f"(at {format_us(pos['updated_time_us'])})"
        )


cli.add_command(ingest)
cli.add_command(classify)
cli.add_command(rules_group)
cli.add_command(model_group)
cli.add_command(runs)
cli.add_command(incidents)
cli.add_command(rebuild)
cli.add_command(diagnose)
for command in (
    verify,
    actions_cmd,
    approve,
    reject,
    rollback,
    remediate,
    replan,
    explain,
    auto,
    watch,
    demo,
    query,
    export_group,
    stats,
    ship,
    fold,
    retention,
    serve,
):
    cli.add_command(command)


def main() -> None:
    cli(prog_name="advisor")


if __name__ == "__main__":
    main()
