"""`advisor remediate` and `advisor replan`: carry out SERVICE's plan, asking step by step
(or --yes), and propose a new plan from the unit's current state. With `--json`, one JSON
object on stdout says what became of the plan; the plan and the prompts go to stderr."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from advisor.cli.actions import describe
from advisor.cli.common import (
    advisor_for,
    backend_option,
    db_option,
    echo_json,
    gpus_option,
    json_option,
    root_option,
    say_for,
    with_short,
)
from advisor.core.ids import short_id, shorten_ids
from advisor.core.statuses import ActionStatus
from advisor.front import human
from advisor.reports.render import safe_text

if TYPE_CHECKING:
    from advisor.execution.run import ExecReport
    from advisor.front import Advisor
    from advisor.pipeline.remediate import OpenPlan
    from advisor.views.read.rows import ActionRow

# Exit status of `remediate` / `replan` when the plan did not complete (a script can tell).
PLAN_STOPPED_EXIT = 1


def _show_plan(plan: OpenPlan, say: Callable[[str], None]) -> None:
    incident = plan.incident
    say(
        f"{short_id(plan.plan_id)} ({safe_text(plan.plan_id)}): {incident['label']} "
        f"({incident['confidence']:.2f}), "
        f"{incident['runs']} run(s)"
    )
    for row in plan.rows:
        say("  " + describe(row))
        for line in row.spec.get("arithmetic", []):
            say(f"      {safe_text(line)}")


def _plan_json(adv: Advisor, plan: OpenPlan) -> dict[str, Any]:
    """The plan as `remediate --json` gives it: its ids, its incident and its steps now."""
    return {
        **with_short("plan_id", plan.plan_id),
        "incident": with_short("incident_id", str(plan.incident["incident_id"])),
        "label": plan.incident["label"],
        "confidence": plan.incident["confidence"],
        "steps": [
            {
                **with_short("action_id", r.action_id),
                "step": r.step,
                "kind": r.kind,
                "status": r.status,
                "alternative": r.alternative,
            }
            for r in adv.plan_steps(plan.plan_id)
        ],
        "store": adv.store.display_url,
    }


def _decide(
    adv: Advisor, rows: list[ActionRow], yes: bool, plan_id: str, err: bool = False
) -> None:
    """Approve the plan (--yes) or ask step by step (on stderr with `err`); a step declined
    is recorded rejected."""
    if yes:
        adv.approve(plan_id)
        return
    who = human()
    by_step = {r.step: r for r in rows}
    for row in rows:
        if row.status != ActionStatus.PROPOSED or row.alternative:
            continue
        alternative = by_step.get(row.step + 1)
        has_alt = (
            alternative is not None
            and alternative.alternative
            and alternative.status == ActionStatus.PROPOSED
        )
        choices = ["y", "n", "all", "q"] + (["a"] if has_alt else [])
        text = (
            f"Run step {row.step} ({row.kind})? y yes, n no (reject), all (this and "
            f"the rest), q stop asking{', a the alternative' if has_alt else ''}"
        )
        answer = click.prompt(
            text, type=click.Choice(choices), default="n", show_choices=False, err=err
        )
        if answer == "all":
            adv.approve(plan_id, who)
            return
        if answer == "q":
            return
        if answer == "y":
            adv.approve(row.action_id, who)
        elif answer == "a":
            assert alternative is not None
            adv.approve(alternative.action_id, who)
        else:
            adv.reject(row.action_id, "declined at the prompt", who)
            return


def _report(report: ExecReport, say: Callable[[str], None]) -> None:
    say(
        f"ran {len(report.ran)} step(s), skipped {len(report.skipped)}; plan "
        f"{report.state}{': ' + safe_text(report.why) if report.why else ''}"
    )


def _outcome_json(report: ExecReport) -> dict[str, Any]:
    """How the plan ended, as `remediate --json` gives it."""
    return {
        "state": report.state,
        "why": report.why,
        "ran": [with_short("action_id", a) for a in report.ran],
        "skipped": [with_short("action_id", a) for a in report.skipped],
    }


def _dry_run(adv: Advisor, service: str, systemd_root: Path, as_json: bool) -> None:
    """`remediate --dry-run`: the plan, and what each step would do now; nothing changed."""
    say = say_for(as_json)
    plan = adv.plan(service)
    _show_plan(plan, say)
    conf = adv.settings
    lines = adv.preview(plan.plan_id, systemd_root, conf.gpu_twin, conf.host)
    for line in lines:
        say(f"dry run: {safe_text(line)}")
    if as_json:
        echo_json({**_plan_json(adv, plan), "dry_run": lines})


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
@json_option
@db_option
def remediate(
    service: str,
    yes: bool,
    dry_run: bool,
    backend: str,
    systemd_root: Path,
    gpus_from: Path | None,
    as_json: bool,
    db_url: str | None,
) -> None:
    """Show the plan for SERVICE's open incident (UNIT or HOST/UNIT, as systemctl takes it),
    ask step by step (or --yes), and carry it out.

    \b
    Examples:
      advisor remediate vllm-minimax-m25
      advisor remediate vllm-minimax-m25 --dry-run
      advisor remediate vllm-minimax-m25 --yes --json
    """
    adv = advisor_for(db_url, gpu_twin=gpus_from)
    if dry_run or backend == "dry-run":
        _dry_run(adv, service, systemd_root, as_json)
        return
    say = say_for(as_json)
    chosen = adv.backend(backend, systemd_root)
    assert chosen is not None
    plan, renewed = adv.plan_anew(chosen, service)
    if renewed is not None:
        say(safe_text(shorten_ids(renewed)))
    _show_plan(plan, say)
    if any(r.status == ActionStatus.PROPOSED for r in plan.rows):
        _decide(adv, plan.rows, yes, plan.plan_id, err=as_json)
    outcome = adv.run(chosen, plan.plan_id)
    _report(outcome.report, say)
    again = outcome.again.new_plan if outcome.again is not None else None
    if again is not None:
        say(
            f"proposed a new plan from the unit's current state: {short_id(again)} "
            f"(`advisor remediate {service}`)"
        )
    still = adv.still_failing(chosen, str(plan.incident["unit"])) if outcome.settled else None
    if still is not None:
        say(f"the unit is still failing: {safe_text(still)}")
    if as_json:
        echo_json(
            {
                **_plan_json(adv, plan),
                **_outcome_json(outcome.report),
                "new_plan": None if again is None else with_short("plan_id", again),
                "still_failing": still,
            }
        )
    if not outcome.settled or still is not None:
        raise SystemExit(PLAN_STOPPED_EXIT)


@click.command()
@click.argument("service")
@root_option
@gpus_option
@json_option
@db_option
def replan(
    service: str, systemd_root: Path, gpus_from: Path | None, as_json: bool, db_url: str | None
) -> None:
    """Close SERVICE's stopped or interrupted plan, lift advisor's hold on restarts, and
    propose a new plan from the unit's current state.

    \b
    Examples:
      advisor replan vllm-minimax-m25
    """
    adv = advisor_for(db_url, gpu_twin=gpus_from)
    chosen = adv.backend("systemd", systemd_root)
    assert chosen is not None
    done = adv.replan(chosen, service)
    say = say_for(as_json)
    for note in done.notes:
        say(safe_text(note))
    if as_json:
        echo_json(
            {
                "incident": with_short("incident_id", done.incident_id),
                "old_plan": None if done.old_plan is None else with_short("plan_id", done.old_plan),
                "new_plan": with_short("plan_id", done.new_plan),
                "notes": done.notes,
                "store": adv.store.display_url,
            }
        )
        return
    click.echo(
        f"new plan {safe_text(done.new_plan)} for {safe_text(done.incident_id)} "
        f"(see `advisor remediate {service}`)"
    )
