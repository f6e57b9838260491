"""The `advisor` command line: a thin layer that parses options, calls the library, prints.

The root group imports a command's module only when that command runs (or shows its help):
`COMMANDS` names each one's module and the summary `advisor --help` lists, so that listing
them, and starting any one of them, imports none of the others (docs/speed.md, start-up).
"""

from __future__ import annotations

import click

from advisor.cli.common import COUNT, advisor_for, answer, db_option, echo_json, json_option
from advisor.cli.group import AdvisorGroup, Lazy, LazyGroup

# name → where the command is, and the first paragraph of its help (tests/cli/test_startup.py
# checks each against the command itself).
COMMANDS: dict[str, Lazy] = {
    "actions": Lazy(
        "advisor.cli.actions:actions_cmd",
        "Proposed actions and what became of them, by plan and step (short ids: any prefix of "
        "one, or of the whole id, is taken by approve, reject and rollback).",
    ),
    "approve": Lazy(
        "advisor.cli.actions:approve",
        "Approve action ID, or every (non-alternative) proposed step of plan ID. Approving an "
        "alternative chooses it instead of the step it stands in for.",
    ),
    "auto": Lazy(
        "advisor.cli.actions:auto",
        "Apply what the policy allows, until SIGINT or SIGTERM; leave the rest for a person.",
    ),
    "classify": Lazy(
        "advisor.cli.diagnose:classify",
        "Classify a log FILE (journalctl -o json, or plain text; - for stdin).",
    ),
    "demo": Lazy(
        "advisor.cli.demo:demo",
        "Crash, restart loop, wedged stop, diagnosis, approval, fix, healthy — on a simulated "
        "GPU node (or under real systemd with --systemd) — then the post-mortem. It keeps its "
        "own store (printed at the start), so the simulated host never enters your real one; "
        "with `--db` that store answers `advisor explain` and `advisor events` afterwards.",
    ),
    "diagnose": Lazy(
        "advisor.cli.projections:diagnose",
        "Bring the projections up to date and diagnose the runs not diagnosed yet (what `ingest"
        " --no-diagnose` left).",
    ),
    "explain": Lazy(
        "advisor.cli.projections:explain",
        "The post-mortem of SERVICE's latest incident (UNIT or HOST/UNIT; `vllm` means "
        "vllm.service, as in systemctl): the one last seen failing or acted on. The others are "
        "listed at the end with their short ids (`--incident ID` shows one).",
    ),
    "export": Lazy("advisor.cli.analytics:export_group", "Export the history for other tools."),
    "fetch": Lazy(
        "advisor.cli.central:fetch",
        "Bring a central post-mortem the lines the host kept (HOST/UNIT): the routine serving "
        "lines of the incident's last ten minutes and the host's GPU samples there, asked of "
        "the host's agent, checked against the hashes it shipped for them, and folded in.",
    ),
    "fold": Lazy(
        "advisor.cli.central:fold",
        "Bring the projections up to date without diagnosing: the central store's fold (its "
        "shippers may not write the projections, and the hosts diagnosed what they shipped).",
    ),
    "hosts": Lazy(
        "advisor.cli.central:hosts",
        "Every host of the store: newest event and heartbeat, agent version, ship lag, GPUs, "
        "open incidents and GPU faults; a host silent for over twice its heartbeat interval is "
        "flagged SILENT.",
    ),
    "incidents": Lazy(
        "advisor.cli.projections:incidents",
        "Incidents: a failed run, or a run of failed restarts counted once.",
    ),
    "ingest": Lazy("advisor.cli.ingest:ingest", "Bring observations into the event store."),
    "install": Lazy(
        "advisor.cli.install:install",
        "Install this host's agent, as root: the advisor-watch unit (running this `advisor`, "
        "metrics on), /etc/advisor/advisor.toml (never over yours) and policy.toml.example, "
        "the state folder; then enable and start it. Run again, it changes nothing.",
    ),
    "label": Lazy(
        "advisor.cli.actions:label",
        "Correct incident INCIDENT's diagnosis: it is LABEL (one of docs/taxonomy.md's). The "
        "diagnosis stays; `explain` shows both, and `model train --store` learns from it.",
    ),
    "model": Lazy("advisor.cli.diagnose:model_group", "Train and evaluate the learned model."),
    "query": Lazy(
        "advisor.cli.analytics:query",
        "Run DuckDB SQL over the views events, log_lines, gpu_samples, runs, incidents, "
        "actions. The store is attached read-only and, unless --allow-files, the SQL reaches "
        "nothing else: no files, no extensions, no settings.",
    ),
    "rebuild": Lazy(
        "advisor.cli.projections:rebuild",
        "Drop the projections (runs, incidents, GPU samples) and rebuild them from events.",
    ),
    "reject": Lazy("advisor.cli.actions:reject", "Reject action ACTION_ID: it will never run."),
    "remediate": Lazy(
        "advisor.cli.remediate:remediate",
        "Show the plan for SERVICE's open incident (UNIT or HOST/UNIT, as systemctl takes it), "
        "ask step by step (or --yes), and carry it out.",
    ),
    "replan": Lazy(
        "advisor.cli.remediate:replan",
        "Close SERVICE's stopped or interrupted plan, lift advisor's hold on restarts, and "
        "propose a new plan from the unit's current state.",
    ),
    "retention": Lazy(
        "advisor.cli.analytics:retention",
        "Central PostgreSQL store: export old partitions of events to Parquet, record that as a"
        " store.retained event, and detach them.",
    ),
    "rollback": Lazy(
        "advisor.cli.actions:rollback",
        "Put back the drop-in a set_flag / set_unit_option action wrote, as it was before.",
    ),
    "rules": Lazy("advisor.cli.diagnose:rules_group", "Inspect and try the rule files."),
    "runs": Lazy(
        "advisor.cli.projections:runs",
        "Service runs: each start of a unit until its end, with how it went.",
    ),
    "serve": Lazy(
        "advisor.cli.serve:serve",
        "The web console: incidents (pending approvals first), each with its timeline, "
        "evidence, charts and plan to approve, reject, roll back and run; the fleet's figures "
        "and charts; Prometheus metrics at /metrics. It refreshes as events arrive. Runs until "
        "SIGINT or SIGTERM.",
    ),
    "ship": Lazy(
        "advisor.cli.analytics:ship",
        "Copy this host's events to a central store: resumable, idempotent, in order, checked "
        "against what the central store already holds for this host.",
    ),
    "stats": Lazy(
        "advisor.cli.analytics:stats",
        "Crashes by label, service and week; time to recovery; restart loops; GPU headroom per "
        "service; GPU memory release after a kill, per host.",
    ),
    "uninstall": Lazy(
        "advisor.cli.install:uninstall",
        "Stop, disable and remove the agent's units, as root; keep /etc/advisor and the store "
        "unless --purge.",
    ),
    "verify": Lazy(
        "advisor.cli.verify:verify",
        "Walk the hash chain; name the first event that does not match (exit 3). In a central "
        "store, also walk each host's own chain as it was shipped. With --heads, also compare "
        "it with the heads the host signed (exit 3 on a mismatch, a cut tail or a deleted "
        "store).",
    ),
    "watch": Lazy(
        "advisor.cli.watch:watch",
        "Follow the journal and the GPUs, diagnose as lines arrive, propose plans (and apply "
        "what the policy allows with --auto). Stops on SIGINT or SIGTERM, committing what it "
        "has.",
    ),
}


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
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


@cli.group(cls=AdvisorGroup)
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
@json_option
@db_option
def db_upgrade(shared_schema: bool, as_json: bool, db_url: str | None) -> None:
    """Create the store or bring its schema up to date.

    \b
    Examples:
      advisor db upgrade
      advisor db upgrade --db postgresql+psycopg://advisor@central/fleet --json
    """
    adv = advisor_for(db_url, shared_schema=shared_schema)
    revision = adv.upgrade()
    result = {"store": adv.store.display_url, "revision": revision}
    answer(as_json, result, f"{adv.store.display_url}: schema at revision {revision}")


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
    import orjson

    from advisor.core.timefmt import parse_time_us
    from advisor.reports.render import event_json, event_line

    since_us = None if since is None else parse_time_us(since)
    adv = advisor_for(db_url, read_only=True)
    for event in adv.events(stream=stream, type_=type_, since_us=since_us, limit=limit):
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
    from advisor.core.timefmt import format_us
    from advisor.reports.render import safe_text

    st, skipped = advisor_for(db_url, read_only=True).status()
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


def main() -> None:
    cli(prog_name="advisor")


if __name__ == "__main__":
    main()
