"""`advisor install` and `advisor uninstall`: this host's agent in one command (the unit with
metrics on, the settings and policy examples, enabled and started), and gone again."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from advisor.cli.common import echo_json, json_option

if TYPE_CHECKING:
    from advisor.fleet.install import Report

_WORDS = {
    "written": "wrote",
    "unchanged": "unchanged",
    "created": "made",
    "removed": "removed",
    "absent": "not there",
}


def _layout_options(f: click.decorators.FC) -> click.decorators.FC:
    for option in (
        click.option(
            "--state-dir",
            type=click.Path(path_type=Path),
            default=None,
            help="The agent's state folder, where its store lives. Default: /var/lib/advisor.",
        ),
        click.option(
            "--config-dir",
            type=click.Path(path_type=Path),
            default=None,
            help="Where the settings and the policy example go. Default: /etc/advisor.",
        ),
        click.option(
            "--root",
            type=click.Path(path_type=Path),
            default=None,
            metavar="DIR",
            help="Write everything under DIR instead of / (a package's staging folder): the "
            "files say the host's paths, and systemd only enables the unit there "
            "(`systemctl --root`), starting nothing.",
        ),
    ):
        f = option(f)
    return f


def _tell(report: Report, as_json: bool, nothing: str) -> None:
    if as_json:
        echo_json(report.to_json())
        return
    for warning in report.warnings:
        click.echo(f"warning: {warning}", err=True)
    for path, what in report.files:
        if what == "kept":
            click.echo(f"kept      {path} (yours: not overwritten)")
        else:
            click.echo(f"{_WORDS.get(what, what):<9} {path}")
    for argv in report.systemctl:
        click.echo("ran       " + " ".join(argv))
    if not report.changed:
        click.echo(nothing)


@click.command()
@click.option(
    "--central",
    metavar="URL",
    help="Ship this host's events to this central PostgreSQL store (a drop-in setting the "
    "agent's ship_to; the role's password in PGPASSFILE, docs/fleet.md).",
)
@click.option(
    "--metrics",
    metavar="HOST:PORT",
    default="127.0.0.1:9750",
    show_default=True,
    help="Where the agent serves Prometheus metrics.",
)
@click.option("--no-start", is_flag=True, help="Enable the agent but do not start it.")
@click.option(
    "--upgrade",
    is_flag=True,
    help="After `pipx upgrade advisor`: rewrite what changed and restart the agent.",
)
@_layout_options
@json_option
def install(
    central: str | None,
    metrics: str,
    no_start: bool,
    upgrade: bool,
    root: Path | None,
    config_dir: Path | None,
    state_dir: Path | None,
    as_json: bool,
) -> None:
    """Install this host's agent, as root: the advisor-watch unit (running this `advisor`,
    metrics on), /etc/advisor/advisor.toml (never over yours) and policy.toml.example, the
    state folder; then enable and start it. Run again, it changes nothing.

    \b
    Examples:
      sudo advisor install
      sudo advisor install --central postgresql+psycopg://advisor_ship_gpu_node_07@central/fleet
      sudo advisor install --upgrade
    """
    from advisor.front import Advisor

    report = Advisor(None).install(
        root=root,
        config_dir=config_dir,
        state_dir=state_dir,
        metrics=metrics,
        central=central,
        start=not no_start,
        upgrade=upgrade,
    )
    _tell(report, as_json, "nothing to change: the agent is installed")


@click.command()
@click.option(
    "--purge",
    is_flag=True,
    help="Also remove the settings folder and the state folder (the store).",
)
@_layout_options
@json_option
def uninstall(
    purge: bool,
    root: Path | None,
    config_dir: Path | None,
    state_dir: Path | None,
    as_json: bool,
) -> None:
    """Stop, disable and remove the agent's units, as root; keep /etc/advisor and the store
    unless --purge.

    \b
    Examples:
      sudo advisor uninstall
      sudo advisor uninstall --purge
    """
    from advisor.front import Advisor

    report = Advisor(None).uninstall(
        root=root, config_dir=config_dir, state_dir=state_dir, purge=purge
    )
    _tell(report, as_json, "nothing to remove: the agent is not installed")
