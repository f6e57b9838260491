"""`advisor actions`, `approve`, `reject`, `rollback`, `remediate`, `replan`, `auto`: plans,
their approval, and carrying them out."""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import orjson

from advisor.cli.common import (
    db_option,
    echo_json,
    handle_errors,
    json_option,
    seconds,
    store_for,
)
from advisor.core.render import safe_text

if TYPE_CHECKING:
    from advisor.execution.backends import Backend
    from advisor.execution.run import ExecReport
    from advisor.pipeline.auto import AutoReport
    from advisor.store import EventStore

# Exit status of `remediate` / `replan` when the plan did not complete (a script can tell).
PLAN_STOPPED_EXIT = 1


def _who() -> str:
    try:
        return f"human:{getpass.getuser()}"
    except (KeyError, OSError):
        return "human:unknown"


def _describe(row: dict[str, Any]) -> str:
    spec = orjson.loads(row["spec"])
    what = row["kind"]
    if spec.get("flag"):
        what += f" {spec['flag']} {spec.get('value')}"
    elif spec.get("option"):
        what += f" {spec['option']}={spec.get('value')}"
    elif spec.get("seconds"):
        what += f" up to {spec['seconds']:.0f} s"
    alt = " (alternative)" if row["alternative"] else ""
    return safe_text(f"{row['action_id']}  {row['status']:<10} {what}{alt} — {spec['why']}")


backend_option = click.option(
    "--backend", type=click.Choice(["systemd", "dry-run"]), default="systemd",
    show_default=True,
    help="Where actions take effect; dry-run: say what would be done, change and record "
         "nothing (the plan stays to be approved and run).")
root_option = click.option(
    "--systemd-root", type=click.Path(path_type=Path), default=Path("/etc/systemd/system"),
    show_default=True, help="Folder for the unit drop-ins advisor writes.")
gpus_option = click.option(
    "--gpus-from", "gpus_from", type=click.Path(path_type=Path), envvar="ADVISOR_GPU_TWIN",
    default=None, metavar="FILE",
    help="Read GPU memory from this NVML twin file (a simulated node's driver) instead of "
         "NVML. Env: ADVISOR_GPU_TWIN.")


def _backend(name: str, root: Path, gpus_from: Path | None = None) -> Backend | None:
    """The backend to act through; None for a dry run."""
    if name == "dry-run":
        return None
    from advisor.pipeline.backends import systemd_backend

    return systemd_backend(root, gpu_twin=gpus_from)


def _observer(root: Path, gpus_from: Path | None) -> Backend | None:
    """A systemd backend to *read* units with, for a dry run; None if systemd is not there."""
    from advisor.core.errors import AdvisorError
    from advisor.pipeline.backends import systemd_backend

    try:
        backend = systemd_backend(root, gpu_twin=gpus_from)
        backend.bus.probe()
    except AdvisorError:
        return None
    return backend


@click.command("actions")
@click.option("--pending", is_flag=True, help="Only actions waiting for a decision.")
@json_option
@db_option
@handle_errors
def actions_cmd(pending: bool, as_json: bool, db_url: str | None) -> None:
    """Proposed actions and what became of them, by plan and step."""
    from advisor.views.projections import Projector, read_rows

    store = store_for(db_url)
    Projector(store).catch_up()
    rows = read_rows(store, "actions")
    if pending:
        rows = [r for r in rows if r["status"] == "proposed"]
    if as_json:
        for row in rows:
            row["spec"] = orjson.loads(row["spec"])
            row["state_after"] = orjson.loads(row["state_after"]) if row["state_after"] else None
        echo_json(rows)
        return
    for row in rows:
        click.echo(_describe(row))


@click.command()
@click.argument("ident")
@db_option
@handle_errors
def approve(ident: str, db_url: str | None) -> None:
    """Approve action ID, or every (non-alternative) proposed step of plan ID. Approving an
    alternative chooses it instead of the step it stands in for."""
    from advisor.execution.run import approve as approve_

    approved = approve_(store_for(db_url), ident, _who())
    click.echo(f"approved {len(approved)} action(s): {', '.join(approved) or '-'}")


@click.command()
@click.argument("action_id")
@click.option("--why", required=True, help="Why it must not run (recorded with the decision).")
@db_option
@handle_errors
def reject(action_id: str, why: str, db_url: str | None) -> None:
    """Reject action ACTION_ID: it will never run."""
    from advisor.execution.run import reject as reject_

    reject_(store_for(db_url), action_id, _who(), why)
    click.echo(f"rejected {action_id}")


@click.command()
@click.argument("action_id")
@root_option
@db_option
@handle_errors
def rollback(action_id: str, systemd_root: Path, db_url: str | None) -> None:
    """Put back the drop-in a set_flag / set_unit_option action wrote, as it was before."""
    from advisor.execution.run import rollback as rollback_

    backend = _backend("systemd", systemd_root)
    assert backend is not None
    click.echo(rollback_(store_for(db_url), backend, action_id, root=systemd_root))


def _show_plan(store: EventStore, incident: dict[str, Any], plan_id: str) -> list[dict[str, Any]]:
    from advisor.execution.run import plan_rows

    rows = plan_rows(store, plan_id)
    click.echo(f"{safe_text(plan_id)}: {incident['label']} ({incident['confidence']:.2f}), "
               f"{incident['runs']} run(s)")
    for row in rows:
        click.echo("  " + _describe(row))
        for line in orjson.loads(row["spec"]).get("arithmetic", []):
            click.echo(f"      {safe_text(line)}")
    return rows


def _decide(store: EventStore, rows: list[dict[str, Any]], yes: bool, plan_id: str) -> None:
    """Approve the plan (--yes) or ask step by step; a step declined is recorded rejected."""
    from advisor.execution.run import approve as approve_
    from advisor.execution.run import reject as reject_

    if yes:
        approve_(store, plan_id, _who())
        return
    who = _who()
    by_step = {r["step"]: r for r in rows}
    for row in rows:
        if row["status"] != "proposed" or row["alternative"]:
            continue
        alternative = by_step.get(row["step"] + 1)
        has_alt = alternative is not None and alternative["alternative"] and \
            alternative["status"] == "proposed"
        choices = ["y", "n", "all", "q"] + (["a"] if has_alt else [])
        text = (f"Run step {row['step']} ({row['kind']})? y yes, n no (reject), all (this and "
                f"the rest), q stop asking{', a the alternative' if has_alt else ''}")
        answer = click.prompt(text, type=click.Choice(choices), default="n",
                              show_choices=False)
        if answer == "all":
            approve_(store, plan_id, who)
            return
        if answer == "q":
            return
        if answer == "y":
            approve_(store, row["action_id"], who)
        elif answer == "a":
            assert alternative is not None
            approve_(store, alternative["action_id"], who)
        else:
            reject_(store, row["action_id"], who, "declined at the prompt")
            return


def _report(report: ExecReport) -> None:
    click.echo(f"ran {len(report.ran)} step(s), skipped {len(report.skipped)}; plan "
               f"{report.state}{': ' + safe_text(report.why) if report.why else ''}")


@click.command()
@click.argument("service")
@click.option("--yes", is_flag=True, help="Approve the plan's main steps without asking.")
@click.option("--dry-run", is_flag=True,
              help="Say what each step would do now (the unit read from systemd); change and "
                   "record nothing.")
@backend_option
@root_option
@gpus_option
@db_option
@handle_errors
def remediate(service: str, yes: bool, dry_run: bool, backend: str, systemd_root: Path,
              gpus_from: Path | None, db_url: str | None) -> None:
    """Show the plan for SERVICE's open incident (UNIT or HOST/UNIT, as systemctl takes it),
    ask step by step (or --yes), and carry it out."""
    from advisor.core.errors import InputError
    from advisor.core.units import parse_service
    from advisor.execution.preview import preview
    from advisor.execution.recovery import current_plan, open_incident, recover
    from advisor.execution.run import execute

    store = store_for(db_url)
    host, unit = parse_service(service)
    incident = open_incident(store, host, unit)
    plan_id = current_plan(store, incident["incident_id"])
    if plan_id is None:
        raise InputError(f"{service}: the open incident has no plan")
    rows = _show_plan(store, incident, plan_id)
    if dry_run or backend == "dry-run":
        for line in preview(store, plan_id, _observer(systemd_root, gpus_from)):
            click.echo(f"dry run: {safe_text(line)}")
        return
    chosen = _backend(backend, systemd_root, gpus_from)
    assert chosen is not None
    if any(r["status"] == "proposed" for r in rows):
        _decide(store, rows, yes, plan_id)
    report = execute(store, chosen, plan_id)
    _report(report)
    again = recover(store, chosen, report)
    if again is not None:
        click.echo(f"proposed a new plan from the unit's current state: {again.new_plan} "
                   f"(`advisor remediate {service}`)")
    if report.state not in ("done", "waiting"):
        raise SystemExit(PLAN_STOPPED_EXIT)


@click.command()
@click.argument("service")
@root_option
@gpus_option
@db_option
@handle_errors
def replan(service: str, systemd_root: Path, gpus_from: Path | None,
           db_url: str | None) -> None:
    """Close SERVICE's stopped or interrupted plan, lift advisor's hold on restarts, and
    propose a new plan from the unit's current state."""
    from advisor.core.units import parse_service
    from advisor.execution.recovery import replan as replan_

    store = store_for(db_url)
    host, unit = parse_service(service)
    chosen = _backend("systemd", systemd_root, gpus_from)
    assert chosen is not None
    done = replan_(store, chosen, host, unit)
    for note in done.notes:
        click.echo(safe_text(note))
    click.echo(f"new plan {safe_text(done.new_plan)} for {safe_text(done.incident_id)} "
               f"(see `advisor remediate {service}`)")


def say_auto(report: AutoReport, reported: dict[str, str], err: bool = False) -> None:
    """What one auto pass did; a plan left or previewed is said once, not every pass."""
    for plan_id in report.applied:
        click.echo(f"applied {safe_text(plan_id)}", err=err)
    for plan_id in report.replanned:
        click.echo(f"proposed again after an interruption: {safe_text(plan_id)}", err=err)
    said = [(p, f"dry run: would apply {safe_text(p)}") for p in report.would] + [
        (p, f"left for a person: {safe_text(p)}: {safe_text(why)}")
        for p, why in report.left.items()]
    for plan_id, line in said:
        if reported.get(plan_id) != line:
            click.echo(line, err=err)
            reported[plan_id] = line


@click.command()
@click.option("--policy", "policy_path", required=True, type=click.Path(path_type=Path),
              help="The policy file (TOML): allowed kinds per unit pattern, limits, bounds.")
@click.option("--interval", type=seconds(0.1), default=5.0, show_default=True,
              help="Seconds between passes.")
@click.option("--once", is_flag=True, help="One pass, then exit.")
@backend_option
@root_option
@gpus_option
@db_option
@handle_errors
def auto(policy_path: Path, interval: float, once: bool, backend: str, systemd_root: Path,
         gpus_from: Path | None, db_url: str | None) -> None:
    """Apply what the policy allows, until SIGINT or SIGTERM; leave the rest for a person."""
    import time

    from advisor.cli.common import sigterm_as_interrupt
    from advisor.pipeline.auto import auto_once
    from advisor.planning.policy import load_policy

    policy = load_policy(policy_path)
    store = store_for(db_url)
    chosen = _backend(backend, systemd_root, gpus_from)
    reported: dict[str, str] = {}
    try:
        with sigterm_as_interrupt():
            while True:
                say_auto(auto_once(store, chosen, policy, policy_path.name), reported)
                if once:
                    return
                time.sleep(interval)
    except KeyboardInterrupt:
        return
