"""`advisor demo`: the seed scenario on the simulated node."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

from advisor.cli_common import db_option, handle_errors, store_for


@click.command()
@click.option("--yes", is_flag=True, help="Grant the approvals it asks for.")
@click.option("--workdir", type=click.Path(path_type=Path),
              help="Where the simulated node keeps its journal, GPU samples and claims "
                   "(default: a temporary folder).")
@db_option
@handle_errors
def demo(yes: bool, workdir: Path | None, db_url: str | None) -> None:
    """Crash, restart loop, wedged stop, diagnosis, approval, fix, healthy — on a simulated
    GPU node — then the post-mortem. The store it leaves answers `advisor explain` and
    `advisor events` afterwards."""
    from advisor.demo import UNIT, run_demo
    from advisor.report import build, render_text

    store = store_for(db_url)

    def ask(plan: str) -> bool:
        click.echo(plan)
        if yes:
            click.echo("approved (--yes)")
            return True
        return click.confirm("Approve this plan?", default=False)

    with tempfile.TemporaryDirectory(prefix="advisor-demo-") as tmp:
        result = run_demo(store, workdir or Path(tmp) / "node", ask=ask, say=click.echo)
    if not result.healthy:
        raise SystemExit(1)
    first = result.incidents[0] if result.incidents else None
    click.echo(f"\nhealthy after {result.seconds:.1f} s; the post-mortem:\n")
    click.echo(render_text(build(store, UNIT, first)), nl=False)
    click.echo(f"\nstore: {store.display_url} (try `advisor explain {UNIT}`, `advisor events`)")
