"""`advisor demo`: the seed scenario on the simulated node."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

from advisor.cli.common import db_option, store_for


@click.command()
@click.option("--yes", is_flag=True, help="Grant the approvals it asks for.")
@click.option(
    "--workdir",
    type=click.Path(path_type=Path),
    help="Where the simulated node keeps its journal, GPU samples and claims "
    "(default: a temporary folder).",
)
@click.option(
    "--systemd",
    "under_systemd",
    is_flag=True,
    help="Run the story under real systemd, booted in a box of namespaces (needs "
    "root); the advisor acts through its systemd backend.",
)
@db_option
def demo(yes: bool, workdir: Path | None, under_systemd: bool, db_url: str | None) -> None:
    """Crash, restart loop, wedged stop, diagnosis, approval, fix, healthy — on a simulated
    GPU node (or under real systemd with --systemd) — then the post-mortem. The store it
    leaves answers `advisor explain` and `advisor events` afterwards."""
    from advisor.core.errors import PrerequisiteError
    from advisor.demo.simulated import UNIT, run_demo
    from advisor.reports.postmortem import build, render_text

    store = store_for(db_url)

    def ask(plan: str) -> bool:
        click.echo(plan)
        if yes:
            click.echo("approved (--yes)")
            return True
        return click.confirm("Approve this plan?", default=False)

    if under_systemd:
        from advisor.sim.box import unavailable

        reason = unavailable()
        if reason is not None:
            raise PrerequisiteError(f"demo --systemd: {reason} (the default demo runs anywhere)")
    with tempfile.TemporaryDirectory(prefix="advisor-demo-") as tmp:
        if under_systemd:
            from advisor.demo.systemd import run_systemd_demo

            result = run_systemd_demo(store, workdir or Path(tmp) / "host", ask=ask, say=click.echo)
        else:
            result = run_demo(store, workdir or Path(tmp) / "node", ask=ask, say=click.echo)
    if not result.healthy:
        raise SystemExit(1)
    first = result.incidents[0] if result.incidents else None
    click.echo(f"\nhealthy after {result.seconds:.1f} s; the post-mortem:\n")
    click.echo(render_text(build(store, UNIT, first)), nl=False)
    click.echo(f"\nstore: {store.display_url} (try `advisor explain {UNIT}`, `advisor events`)")
