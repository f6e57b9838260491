"""`advisor fold`: the central store's owner folds what the hosts shipped; `advisor hosts`:
every host of a store and how it is doing; `advisor fetch`: the lines a host kept, for a
central post-mortem (docs/fleet.md)."""

from __future__ import annotations

from typing import Any

import click

from advisor.cli.common import (
    advisor_for,
    db_option,
    echo_json,
    incident_option,
    json_option,
    seconds,
)
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


NOT_YET_EXIT = 75  # EX_TEMPFAIL: the host has not answered yet; run the command again later


@click.command()
@click.argument("service")
@incident_option
@click.option(
    "--wait",
    "wait_s",
    type=seconds(0, 3600),
    default=30.0,
    show_default=True,
    help="Seconds to wait for the host's answer (its agent answers each round of shipping, "
    "every 5 s); 0: ask and return.",
)
@click.option(
    "--last",
    "last_s",
    type=seconds(0, 366 * 86_400),
    default=600.0,  # advisor.reports.keptlines.LAST_S, what the post-mortem counts
    show_default=True,
    help="The seconds before the incident's end to fetch (0: its runs whole).",
)
@json_option
@db_option
def fetch(
    service: str,
    incident_id: str | None,
    wait_s: float,
    last_s: float,
    as_json: bool,
    db_url: str | None,
) -> None:
    """Bring a central post-mortem the lines the host kept (HOST/UNIT): the routine serving
    lines of the incident's last ten minutes and the host's GPU samples there, asked of the
    host's agent, checked against the hashes it shipped for them, and folded in.

    Exit 75 when the host has not answered within --wait (run it again later), 1 when it
    could not send some (why, on stderr).

    \b
    Examples:
      advisor fetch gpu-node-07/vllm --db postgresql+psycopg://advisor@central/fleet
      advisor fetch gpu-node-07/vllm --incident 3f9a1c2b7d4e --wait 0 --json
    """
    asked = advisor_for(db_url).fetch(service, incident_id, wait_s, last_s)
    result = {
        "host": asked.host,
        "stream": asked.stream,
        "ranges": len(asked.ranges),
        "fetched_ranges": len(asked.fetched),
        "fetched_lines": asked.lines(fetched=True),
        "lines_on_host": asked.lines(fetched=False),
        "waiting": [r.key for r in asked.waiting],
        "declined": {str(k): v for k, v in asked.declined.items()},
        "asked": asked.added,
    }
    if as_json:
        echo_json(result)
    elif not asked.ranges:
        click.echo(f"{safe_text(asked.host)} kept none of these runs' lines: nothing to fetch")
    else:
        click.echo(
            f"{result['fetched_lines']:,} lines of {safe_text(asked.stream)} are here "
            f"({result['fetched_ranges']} of {result['ranges']} kept ranges fetched); "
            f"{result['lines_on_host']:,} still on {safe_text(asked.host)} only"
        )
    for key, why in asked.declined.items():
        click.echo(f"range ending at host seq {key}: {safe_text(why)}", err=True)
    if asked.declined:
        raise SystemExit(1)
    if asked.waiting:
        if not as_json:
            click.echo(
                f"{len(asked.waiting)} range(s) not answered yet: the host's agent answers "
                "each round of its shipping (watch --ship-to); run this again later",
                err=True,
            )
        raise SystemExit(NOT_YET_EXIT)
