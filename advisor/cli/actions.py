"""`advisor actions`, `approve`, `reject`, `rollback`, `auto`: plans, their approval, and
carrying them out by policy (`remediate` and `replan`: advisor.cli.remediate)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from advisor.cli.common import (
    answer,
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
    with_short,
)
from advisor.core.ids import short_id, shorten_ids
from advisor.core.render import safe_text
from advisor.core.statuses import ActionStatus

if TYPE_CHECKING:
    from advisor.views.rows import ActionRow


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
    from advisor.views.actions import all_actions

    rows = all_actions(store_for(db_url))
    if pending:
        rows = [r for r in rows if r.status == ActionStatus.PROPOSED]
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
    from advisor.execution.run import approve as approve_
    from advisor.pipeline.remediate import human

    store = store_for(db_url)
    approved = approve_(store, ident, human())
    result = {
        "approved": [with_short("action_id", a) for a in approved],
        "count": len(approved),
        "store": store.display_url,
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
    from advisor.execution.run import reject as reject_
    from advisor.pipeline.remediate import human

    store = store_for(db_url)
    rejected = reject_(store, action_id, human(), why)
    result = {"rejected": with_short("action_id", rejected), "why": why, "store": store.display_url}
    answer(as_json, result, shorten_ids(f"rejected {rejected}"))


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
    from advisor.execution.decisions import resolve_ident
    from advisor.execution.run import rollback as rollback_
    from advisor.pipeline.remediate import backend_for

    backend = backend_for("systemd", systemd_root, host=settings().host)
    assert backend is not None
    store = store_for(db_url)
    whole = resolve_ident(store, action_id, plans=False)
    detail = rollback_(store, backend, whole, root=systemd_root)
    result = {
        "rolled_back": with_short("action_id", whole),
        "detail": detail,
        "store": store.display_url,
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
