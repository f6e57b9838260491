"""`advisor actions`, `approve`, `reject`, `rollback`, `remediate`: plans and their approval."""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import orjson

from advisor.cli_common import db_option, echo_json, handle_errors, json_option, store_for
from advisor.render import safe_text

if TYPE_CHECKING:
    from advisor.executor.backends import Backend


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
    show_default=True, help="Where actions take effect (dry-run: only record).")
root_option = click.option(
    "--systemd-root", type=click.Path(path_type=Path), default=Path("/etc/systemd/system"),
    show_default=True, help="Folder for the unit drop-ins advisor writes.")


def _backend(name: str, root: Path) -> Backend:
    from advisor.executor.backends import DryRunBackend, SystemdBackend

    if name == "dry-run":
        return DryRunBackend()
    return SystemdBackend(root=root)


@click.command("actions")
@click.option("--pending", is_flag=True, help="Only actions waiting for a decision.")
@json_option
@db_option
@handle_errors
def actions_cmd(pending: bool, as_json: bool, db_url: str | None) -> None:
    """Proposed actions and what became of them, by plan and step."""
    from advisor.projections import Projector, read_rows

    store = store_for(db_url)
    Projector(store).catch_up()
    rows = read_rows(store, "actions")
    if pending:
        rows = [r for r in rows if r["status"] == "proposed"]
    if as_json:
        for row in rows:
            row["spec"] = orjson.loads(row["spec"])
        echo_json(rows)
        return
    for row in rows:
        click.echo(_describe(row))


@click.command()
@click.argument("ident")
@db_option
@handle_errors
def approve(ident: str, db_url: str | None) -> None:
    """Approve action ID, or every (non-alternative) proposed step of plan ID."""
    from advisor.executor.run import approve as approve_

    approved = approve_(store_for(db_url), ident, _who())
    click.echo(f"approved {len(approved)} action(s): {', '.join(approved) or '-'}")


@click.command()
@click.argument("action_id")
@click.option("--why", required=True, help="Why it must not run (recorded with the decision).")
@db_option
@handle_errors
def reject(action_id: str, why: str, db_url: str | None) -> None:
    """Reject action ACTION_ID: it will never run."""
    from advisor.executor.run import reject as reject_

    reject_(store_for(db_url), action_id, _who(), why)
    click.echo(f"rejected {action_id}")


@click.command()
@click.argument("action_id")
@backend_option
@root_option
@db_option
@handle_errors
def rollback(action_id: str, backend: str, systemd_root: Path, db_url: str | None) -> None:
    """Put back the unit file a set_flag / set_unit_option action changed."""
    from advisor.executor.run import rollback as rollback_

    click.echo(rollback_(store_for(db_url), _backend(backend, systemd_root), action_id))


@click.command()
@click.argument("service")
@click.option("--yes", is_flag=True, help="Approve the plan without asking.")
@backend_option
@root_option
@db_option
@handle_errors
def remediate(service: str, yes: bool, backend: str, systemd_root: Path,
              db_url: str | None) -> None:
    """Show the plan for SERVICE's open incident (UNIT or HOST/UNIT), ask, and apply it."""
    from advisor.errors import InputError
    from advisor.executor.run import approve as approve_
    from advisor.executor.run import execute, plan_rows
    from advisor.projections import Projector, read_rows

    store = store_for(db_url)
    Projector(store).catch_up()
    host, _, unit = service.rpartition("/")
    open_ = [i for i in read_rows(store, "incidents", unit=unit, host=host or None)
             if i["status"] == "open"]
    if not open_:
        raise InputError(f"{service}: no open incident")
    incident = open_[-1]
    rows = plan_rows(store, incident["incident_id"])
    if not rows:
        raise InputError(f"{service}: the open incident has no plan")
    click.echo(f"{safe_text(incident['incident_id'])}: {incident['label']} "
               f"({incident['confidence']:.2f}), {incident['runs']} run(s)")
    for row in rows:
        click.echo("  " + _describe(row))
        for line in orjson.loads(row["spec"]).get("arithmetic", []):
            click.echo(f"      {safe_text(line)}")
    if any(r["status"] == "proposed" for r in rows):
        if not yes and not click.confirm("Approve and apply this plan?", default=False):
            raise SystemExit(1)
        approve_(store, incident["incident_id"], _who())
    report = execute(store, _backend(backend, systemd_root), incident["incident_id"])
    click.echo(f"ran {len(report.ran)} step(s); plan {report.state}"
               f"{': ' + report.why if report.why else ''}")
    if report.state == "stopped":
        raise SystemExit(1)


@click.command()
@click.option("--policy", "policy_path", required=True, type=click.Path(path_type=Path),
              help="The policy file (TOML): allowed kinds per unit pattern, limits, bounds.")
@click.option("--interval", type=click.FloatRange(min=0.1), default=5.0, show_default=True,
              help="Seconds between passes.")
@click.option("--once", is_flag=True, help="One pass, then exit.")
@backend_option
@root_option
@db_option
@handle_errors
def auto(policy_path: Path, interval: float, once: bool, backend: str, systemd_root: Path,
         db_url: str | None) -> None:
    """Apply what the policy allows, until SIGINT or SIGTERM; leave the rest for a person."""
    import time

    from advisor.auto import auto_once
    from advisor.cli_common import sigterm_as_interrupt
    from advisor.policy import load_policy

    policy = load_policy(policy_path)
    store = store_for(db_url)
    chosen = _backend(backend, systemd_root)
    reported: dict[str, str] = {}
    try:
        with sigterm_as_interrupt():
            while True:
                report = auto_once(store, chosen, policy, policy_path.name)
                for plan_id in report.applied:
                    click.echo(f"applied {safe_text(plan_id)}")
                for plan_id in report.would:
                    click.echo(f"dry run: would apply {safe_text(plan_id)}")
                for plan_id, why in report.left.items():
                    if reported.get(plan_id) != why:  # say it once, not every pass
                        click.echo(f"left for a person: {safe_text(plan_id)}: {safe_text(why)}")
                        reported[plan_id] = why
                if once:
                    return
                time.sleep(interval)
    except KeyboardInterrupt:
        return
