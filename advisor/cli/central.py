"""`advisor fold`: the central store's owner folds what the hosts shipped; `advisor hosts`:
every host of a store and how it is doing (docs/fleet.md)."""

from __future__ import annotations

from typing import Any

import click

from advisor.cli.common import advisor_for, db_option, echo_json, json_option
from advisor.core.timefmt import format_us
from advisor.reports.render import safe_text


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
    folded = advisor_for(db_url).fold()
    if as_json:
        echo_json({"folded": folded})
        return
    click.echo(f"folded {folded} events")


@click.command()
@click.option(
    "--check", is_flag=True, help="Exit 1 when a host is silent (for scripts and monitors)."
)
@json_option
@db_option
def hosts(check: bool, as_json: bool, db_url: str | None) -> None:
    """Every host of the store: newest event and heartbeat, agent version, ship lag, GPUs,
    open incidents and GPU faults; a host silent for over twice its heartbeat interval is
    flagged SILENT.

    \b
    Examples:
      advisor hosts --db postgresql+psycopg://advisor@central/fleet
      advisor hosts --json --check
    """
    found = advisor_for(db_url, read_only=True).hosts()
    if as_json:
        echo_json([h.as_dict() for h in found])
    else:
        for h in found:
            for line in host_lines(h.as_dict()):
                click.echo(line)
        if not found:
            click.echo("no hosts")
    if check and any(h.silent for h in found):
        raise SystemExit(1)


def host_lines(h: dict[str, Any]) -> list[str]:
    """A host in words: one line, then one line a GPU."""
    beat = format_us(h["last_heartbeat_us"]) if h["last_heartbeat_us"] else "none"
    last = format_us(h["last_event_us"]) if h["last_event_us"] else "none"
    lag = f"{h['ship_lag_s']:.0f}s" if h["ship_lag_s"] is not None else "-"
    lines = [
        f"{safe_text(h['host'])}  {'SILENT' if h['silent'] else 'ok'}  "
        f"agent {safe_text(h['agent_version'] or '-')}  heartbeat {beat} "
        f"(every {h['interval_s']:g}s)  last event {last}  ship lag {lag}  "
        f"open incidents {h['open_incidents']}  GPU faults {h['gpu_faults']}"
    ]
    for g in h["gpus"]:
        memory = g["memory_total_bytes"]
        size = f"{memory / 2**30:.1f} GiB" if memory is not None else "-"
        lines.append(
            f"  GPU {g['index']}  {safe_text(g['name'] or '-')}  {size}  "
            f"driver {safe_text(g['driver_version'] or '-')}"
        )
    return lines
