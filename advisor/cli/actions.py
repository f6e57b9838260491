"""`advisor actions`, `approve`, `reject`, `rollback`, `remediate`, `replan`, `auto`: plans,
their approval, and carrying them out."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from advisor.cli.common import (
    backend_option,
    db_option,
    echo_json,
    gpus_option,
    json_option,
    notices_for,
    root_option,
    seconds,
    settings,
    store_for,
)
from advisor.core.ids import short_id, shorten_ids
from advisor.core.render import safe_text

if TYPE_CHECKING:
    from advisor.execution.run import ExecReport
    from advisor.pipeline.remediate import OpenPlan
    from advisor.store import EventStore
    from advisor.views.rows import ActionRow

# Exit status of `remediate` / `replan` when the plan did not complete (a script can tell).
PLAN_STOPPED_EXIT = 1


def _describe(row: ActionRow) -> str:
    spec = row.spec
    what = row.kind
    if spec.get("flag"):
        what += f" {spec['flag']} {spec.get('value')}"
    elif spec.get("option"):
        what += f" {spec['option']}={spec.get('value')}"
    elif spec.get("seconds"):
        what += f" up to {spec['seconds']:.0f} s"
    alt = " (alternative)" if row.alternative else ""
    return safe_text(f"{short_id(row.action_id)}  {row.status:<10} {what}{alt} — {spec['why']}")


@click.command("actions")
@click.option("--pending", is_flag=True, help="Only actions waiting for a decision.")
@json_option
@db_option
def actions_cmd(pending: bool, as_json: bool, db_url: str | None) -> None:
    """Proposed actions and what became of them, by plan and step (short ids: any prefix of
    one, or of the whole id, is taken by approve, reject and rollback).

    \b
    Examples:
      advisor actions --pending
      advisor actions --json
    """
    from advisor.views.actions import all_actions

    rows = all_actions(store_for(db_url))
    if pending:
        rows = [r for r in rows if r.status == "proposed"]
    if as_json:
        echo_json([{**row.columns(), "short_id": short_id(row.action_id)} for row in rows])
        return
    for row in rows:
        click.echo(_describe(row))


@click.command()
@click.argument("ident")
@db_option
def approve(ident: str, db_url: str | None) -> None:
    """Approve action ID, or every (non-alternative) proposed step of plan ID. Approving an
    alternative chooses it instead of the step it stands in for.

    \b
    Examples:
      advisor approve 3f9a1c2b7d4e      # every main step of a plan (a short id)
      advisor approve 3f9a1c2b7d4e#2    # one step: an alternative chooses it
    """
    from advisor.execution.run import approve as approve_
    from advisor.pipeline.remediate import human

    approved = approve_(store_for(db_url), ident, human())
    click.echo(shorten_ids(f"approved {len(approved)} action(s): {', '.join(approved) or '-'}"))


@click.command()
@click.argument("action_id")
@click.option("--why", required=True, help="Why it must not run (recorded with the decision).")
@db_option
def reject(action_id: str, why: str, db_url: str | None) -> None:
    """Reject action ACTION_ID: it will never run.

    \b
    Examples:
      advisor reject 3f9a1c2b7d4e#1 --why 'not during business hours'
    """
    from advisor.execution.run import reject as reject_
    from advisor.pipeline.remediate import human

    click.echo(shorten_ids(f"rejected {reject_(store_for(db_url), action_id, human(), why)}"))


@click.command()
@click.argument("action_id")
@root_option
@db_option
def rollback(action_id: str, systemd_root: Path, db_url: str | None) -> None:
    """Put back the drop-in a set_flag / set_unit_option action wrote, as it was before.

    \b
    Examples:
      advisor rollback 3f9a1c2b7d4e#1
    """
    from advisor.execution.run import rollback as rollback_
    from advisor.pipeline.remediate import backend_for

    backend = backend_for("systemd", systemd_root, host=settings().host)
    assert backend is not None
    click.echo(shorten_ids(rollback_(store_for(db_url), backend, action_id, root=systemd_root)))


def _show_plan(plan: OpenPlan) -> None:
    incident = plan.incident
    click.echo(
        f"{short_id(plan.plan_id)} ({safe_text(plan.plan_id)}): {incident['label']} "
        f"({incident['confidence']:.2f}), "
        f"{incident['runs']} run(s)"
    )
    for row in plan.rows:
        click.echo("  " + _describe(row))
        for line in row.spec.get("arithmetic", []):
            click.echo(f"      {safe_text(line)}")


def _decide(store: EventStore, rows: list[ActionRow], yes: bool, plan_id: str) -> None:
    """Approve the plan (--yes) or ask step by step; a step declined is recorded rejected."""
    from advisor.execution.run import approve as approve_
    from advisor.execution.run import reject as reject_
    from advisor.pipeline.remediate import human

    if yes:
        approve_(store, plan_id, human())
        return
    who = human()
    by_step = {r.step: r for r in rows}
    for row in rows:
        if row.status != "proposed" or row.alternative:
            continue
        alternative = by_step.get(row.step + 1)
        has_alt = (
            alternative is not None and alternative.alternative and alternative.status == "proposed"
        )
        choices = ["y", "n", "all", "q"] + (["a"] if has_alt else [])
        text = (
            f"Run step {row.step} ({row.kind})? y yes, n no (reject), all (this and "
            f"the rest), q stop asking{', a the alternative' if has_alt else ''}"
        )
        answer = click.prompt(text, type=click.Choice(choices), default="n", show_choices=False)
        if answer == "all":
            approve_(store, plan_id, who)
            return
        if answer == "q":
            return
        if answer == "y":
            approve_(store, row.action_id, who)
        elif answer == "a":
            assert alternative is not None
            approve_(store, alternative.action_id, who)
        else:
            reject_(store, row.action_id, who, "declined at the prompt")
            return


def _report(report: ExecReport) -> None:
    click.echo(
        f"ran {len(report.ran)} step(s), skipped {len(report.skipped)}; plan "
        f"{report.state}{': ' + safe_text(report.why) if report.why else ''}"
    )


@click.command()
@click.argument("service")
@click.option("--yes", is_flag=True, help="Approve the plan's main steps without asking.")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Say what each step would do now (the unit read from systemd); change and record nothing.",
)
@backend_option
@root_option
@gpus_option
@db_option
def remediate(
    service: str,
    yes: bool,
    dry_run: bool,
    backend: str,
    systemd_root: Path,
    gpus_from: Path | None,
    db_url: str | None,
) -> None:
    """Show the plan for SERVICE's open incident (UNIT or HOST/UNIT, as systemctl takes it),
    ask step by step (or --yes), and carry it out.

    \b
    Examples:
      advisor remediate vllm-minimax-m25
      advisor remediate vllm-minimax-m25 --dry-run
      advisor remediate vllm-minimax-m25 --yes
    """
    from advisor.pipeline.remediate import anew, backend_for, carry_out, failing, open_plan, preview

    store = store_for(db_url)
    conf = settings(gpu_twin=gpus_from)
    if dry_run or backend == "dry-run":
        plan = open_plan(store, service)
        _show_plan(plan)
        for line in preview(store, plan.plan_id, systemd_root, conf.gpu_twin, conf.host):
            click.echo(f"dry run: {safe_text(line)}")
        return
    chosen = backend_for(backend, systemd_root, conf.gpu_twin, conf.host, notices=notices_for(conf))
    assert chosen is not None
    plan, renewed = anew(store, chosen, service)
    if renewed is not None:
        click.echo(safe_text(shorten_ids(renewed)))
    _show_plan(plan)
    if any(r.status == "proposed" for r in plan.rows):
        _decide(store, plan.rows, yes, plan.plan_id)
    outcome = carry_out(store, chosen, plan.plan_id)
    _report(outcome.report)
    if outcome.again is not None:
        click.echo(
            f"proposed a new plan from the unit's current state: "
            f"{short_id(outcome.again.new_plan)} (`advisor remediate {service}`)"
        )
    if not outcome.settled:
        raise SystemExit(PLAN_STOPPED_EXIT)
    still = failing(chosen, str(plan.incident["unit"]))
    if still is not None:
        click.echo(f"the unit is still failing: {safe_text(still)}")
        raise SystemExit(PLAN_STOPPED_EXIT)


@click.command()
@click.argument("service")
@root_option
@gpus_option
@db_option
def replan(service: str, systemd_root: Path, gpus_from: Path | None, db_url: str | None) -> None:
    """Close SERVICE's stopped or interrupted plan, lift advisor's hold on restarts, and
    propose a new plan from the unit's current state.

    \b
    Examples:
      advisor replan vllm-minimax-m25
    """
    from advisor.core.units import parse_service
    from advisor.execution.recovery import replan as replan_
    from advisor.pipeline.remediate import backend_for

    store = store_for(db_url)
    host, unit = parse_service(service)
    conf = settings(gpu_twin=gpus_from)
    chosen = backend_for(
        "systemd", systemd_root, conf.gpu_twin, conf.host, notices=notices_for(conf)
    )
    assert chosen is not None
    done = replan_(store, chosen, host, unit)
    for note in done.notes:
        click.echo(safe_text(note))
    click.echo(
        f"new plan {safe_text(done.new_plan)} for {safe_text(done.incident_id)} "
        f"(see `advisor remediate {service}`)"
    )


@click.command()
@click.option(
    "--policy",
    "policy_path",
    type=click.Path(path_type=Path),
    help="The policy file (TOML): allowed kinds per unit pattern, limits, bounds. "
    "Default: the settings' policy.",
)
@click.option(
    "--interval", type=seconds(0.1), default=5.0, show_default=True, help="Seconds between passes."
)
@click.option("--once", is_flag=True, help="One pass, then exit.")
@backend_option
@root_option
@gpus_option
@db_option
def auto(
    policy_path: Path | None,
    interval: float,
    once: bool,
    backend: str,
    systemd_root: Path,
    gpus_from: Path | None,
    db_url: str | None,
) -> None:
    """Apply what the policy allows, until SIGINT or SIGTERM; leave the rest for a person.

    \b
    Examples:
      advisor auto --policy /etc/advisor/policy.toml
      advisor auto --policy policy.toml --once --backend dry-run
    """
    from advisor.pipeline.auto import run_auto
    from advisor.pipeline.remediate import backend_for
    from advisor.planning.policy import load_policy

    conf = settings(gpu_twin=gpus_from, policy=policy_path)
    if conf.policy is None:
        raise click.UsageError("auto needs a policy: --policy FILE, or `policy` in the settings")
    policy = load_policy(conf.policy)
    store = store_for(db_url)
    chosen = backend_for(backend, systemd_root, conf.gpu_twin, conf.host, notices=notices_for(conf))
    run_auto(
        store, chosen, policy, conf.policy.name, interval_s=interval, once=once, say=click.echo
    )
