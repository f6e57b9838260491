"""`advisor actions`, `approve`, `reject`, `rollback`, `auto`: plans, their approval, and
carrying them out by policy (`remediate` and `replan`: advisor.cli.remediate); and `label`,
an operator's correction of an incident's diagnosis."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from advisor.cli.common import (
    advisor_for,
    answer,
    backend_option,
    db_option,
    echo_json,
    gpus_option,
    json_option,
    root_option,
    seconds,
    with_short,
)
from advisor.core.ids import short_id, shorten_ids
from advisor.reports.render import safe_text

if TYPE_CHECKING:
    from advisor.views.read.rows import ActionRow


def describe(row: ActionRow) -> str:
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
    rows = advisor_for(db_url).actions(pending=pending)
    if as_json:
        echo_json([{**row.columns(), "short_id": short_id(row.action_id)} for row in rows])
        return
    for row in rows:
        click.echo(describe(row))


@click.command()
@click.argument("ident")
@json_option
@db_option
def approve(ident: str, as_json: bool, db_url: str | None) -> None:
    """Approve action ID, or every (non-alternative) proposed step of plan ID. Approving an
    alternative chooses it instead of the step it stands in for.

    \b
    Examples:
      advisor approve 3f9a1c2b7d4e      # every main step of a plan (a short id)
      advisor approve 3f9a1c2b7d4e#2    # one step: an alternative chooses it
      advisor approve 3f9a1c2b7d4e --json
    """
    adv = advisor_for(db_url)
    approved = adv.approve(ident)
    result = {
        "approved": [with_short("action_id", a) for a in approved],
        "count": len(approved),
        "store": adv.store.display_url,
    }
    words = f"approved {len(approved)} action(s): {', '.join(approved) or '-'}"
    answer(as_json, result, shorten_ids(words))


@click.command()
@click.argument("action_id")
@click.option("--why", required=True, help="Why it must not run (recorded with the decision).")
@json_option
@db_option
def reject(action_id: str, why: str, as_json: bool, db_url: str | None) -> None:
    """Reject action ACTION_ID: it will never run.

    \b
    Examples:
      advisor reject 3f9a1c2b7d4e#1 --why 'not during business hours'
    """
    adv = advisor_for(db_url)
    rejected = adv.reject(action_id, why)
    result = {
        "rejected": with_short("action_id", rejected),
        "why": why,
        "store": adv.store.display_url,
    }
    answer(as_json, result, shorten_ids(f"rejected {rejected}"))


@click.command()
@click.argument("incident")
@click.argument("label")
@click.option("--why", default="", help="Why (recorded with the correction; 2000 characters).")
@json_option
@db_option
def label(incident: str, label: str, why: str, as_json: bool, db_url: str | None) -> None:
    """Correct incident INCIDENT's diagnosis: it is LABEL (one of docs/taxonomy.md's). The
    diagnosis stays; `explain` shows both, and `model train --store` learns from it.

    \b
    Examples:
      advisor label 3f9a1c2b7d4e kv_cache_oom --why 'the KV cache, not the weights'
      advisor label 3f9a1c2b7d4e healthy --json
    """
    adv = advisor_for(db_url)
    done = adv.label(incident, label, why)
    p = done.payload
    result = {
        **with_short("incident_id", p.incident_id),
        **done.as_json(),
        "store": adv.store.display_url,
    }
    was = p.replaces or "no label"
    answer(as_json, result, shorten_ids(f"labelled {p.incident_id} {p.label} (was {was})"))


@click.command()
@click.argument("action_id")
@root_option
@json_option
@db_option
def rollback(action_id: str, systemd_root: Path, as_json: bool, db_url: str | None) -> None:
    """Put back the drop-in a set_flag / set_unit_option action wrote, as it was before.

    \b
    Examples:
      advisor rollback 3f9a1c2b7d4e#1
    """
    adv = advisor_for(db_url)
    backend = adv.systemd_backend(systemd_root)
    whole = adv.resolve_action(action_id)
    detail = adv.rollback(whole, backend, systemd_root)
    result = {
        "rolled_back": with_short("action_id", whole),
        "detail": detail,
        "store": adv.store.display_url,
    }
    answer(as_json, result, shorten_ids(detail))


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
    adv = advisor_for(db_url, gpu_twin=gpus_from, policy=policy_path)
    if adv.settings.policy is None:
        raise click.UsageError("auto needs a policy: --policy FILE, or `policy` in the settings")
    adv.auto(backend, systemd_root, interval_s=interval, once=once, say=click.echo)
