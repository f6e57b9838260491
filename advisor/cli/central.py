"""`advisor fold`: the central store's owner folds what the hosts shipped (docs/fleet.md)."""

from __future__ import annotations

import click

from advisor.cli.common import db_option, echo_json, json_option, store_for


@click.command()
@json_option
@db_option
def fold(as_json: bool, db_url: str | None) -> None:
    """Bring the projections up to date without diagnosing: the central store's fold (its
    shippers may not write the projections, and the hosts diagnosed what they shipped).

    \b
    Examples:
      advisor fold --db postgresql+psycopg://advisor@central/fleet
    """
    from advisor.views.fold.projector import Projector

    folded = Projector(store_for(db_url)).catch_up()
    if as_json:
        echo_json({"folded": folded})
        return
    click.echo(f"folded {folded} events")
