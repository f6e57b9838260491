"""`advisor runs`, `advisor incidents`, `advisor rebuild`: the projections."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import orjson

from advisor.cli.common import (
    advisor_for,
    answer,
    db_option,
    echo_json,
    emit,
    incident_option,
    json_option,
)
from advisor.core.ids import short_id
from advisor.core.timefmt import format_us
from advisor.core.units import parse_service
from advisor.reports.render import safe_text


def _split_service(service: str | None) -> tuple[str | None, str | None]:
    """`HOST/UNIT` or a bare `UNIT`, the unit named as systemctl takes it (`vllm` means
    `vllm.service`); InputError when it is not a unit name."""
    if service is None:
        return None, None
    return parse_service(service)


@click.command()
@click.option(
    "--service",
    help="Only runs of this unit (UNIT or HOST/UNIT; `vllm` means vllm.service, as in systemctl).",
)
@json_option
@db_option
def runs(service: str | None, as_json: bool, db_url: str | None) -> None:
    """Service runs: each start of a unit until its end, with how it went.

    \b
    Examples:
      advisor runs --service vllm-llama70b
      advisor runs --service gpu-node-07/vllm-llama70b --json
    """
    host, unit = _split_service(service)
    rows = advisor_for(db_url, read_only=True).runs(unit=unit, host=host)
    if as_json:
        for row in rows:
            row["phases"] = orjson.loads(row["phases"])
            row["config"] = orjson.loads(row["config"])
        echo_json(rows)
        return
    for r in rows:
        peak = ""
        if r["peak_gpu_used_bytes"] is not None and r["peak_gpu_total_bytes"]:
            peak = f" peak GPU {r['peak_gpu_used_bytes'] / r['peak_gpu_total_bytes']:.0%}"
        label = f" {r['label']} ({r['confidence']:.2f})" if r["label"] else ""
        click.echo(
            f"{format_us(r['started_us'])}  {safe_text(r['stream'])}  {r['outcome']:<8} "
            f"phase={r['last_phase'] or '-'}{label}{peak}"
        )


@click.command()
@click.option(
    "--service",
    help="Only incidents of this unit (UNIT or HOST/UNIT; `vllm` "
    "means vllm.service, as in systemctl).",
)
@click.option("--open", "only_open", is_flag=True, help="Only incidents not resolved yet.")
@json_option
@db_option
def incidents(service: str | None, only_open: bool, as_json: bool, db_url: str | None) -> None:
    """Incidents: a failed run, or a run of failed restarts counted once.

    \b
    Examples:
      advisor incidents --open
      advisor incidents --service vllm-llama70b --json
    """
    host, unit = _split_service(service)
    rows = advisor_for(db_url, read_only=True).incidents(unit=unit, host=host, only_open=only_open)
    if as_json:
        for row in rows:
            for key in ("facts", "evidence", "candidates"):
                row[key] = orjson.loads(row[key]) if row[key] else None
            row["short_id"] = short_id(row["incident_id"])
        echo_json(rows)
        return
    for r in rows:
        click.echo(
            f"{short_id(r['incident_id'])}  {format_us(r['opened_us'])}  "
            f"{safe_text(r['host'])}/{safe_text(r['unit'])}  "
            f"{_label_words(r)}  phase={r['phase'] or '-'}"
            f"  runs={r['runs']}  {r['status']}"
        )


def _label_words(row: dict[str, Any]) -> str:
    """An incident's label as the list shows it: the diagnosis's and its confidence, or, for
    an incident an operator corrected, the operator's label first, as `explain` says it."""
    label, confidence = row["label"] or "?", row["confidence"] or 0
    said = row.get("operator")
    if not said:
        return f"{label} ({confidence:.2f})"
    by = safe_text(str(said["by"]))
    diagnosis = f"{label}, {confidence:.2f}"
    return f"{said['label']} (operator label, by {by}; the diagnosis said {diagnosis})"


@click.command()
@json_option
@db_option
def diagnose(as_json: bool, db_url: str | None) -> None:
    """Bring the projections up to date and diagnose the runs not diagnosed yet (what
    `ingest --no-diagnose` left).

    \b
    Examples:
      advisor ingest journal --file big.jsonl --no-diagnose && advisor diagnose
    """
    report = advisor_for(db_url).diagnose()
    if as_json:
        echo_json(report.as_dict())
        return
    click.echo(
        f"folded {report.folded} events, diagnosed {report.diagnosed} runs, "
        f"{report.diagnosis_events} new diagnosis events"
    )


@click.command()
@json_option
@db_option
def rebuild(as_json: bool, db_url: str | None) -> None:
    """Drop the projections (runs, incidents, GPU samples) and rebuild them from events.

    \b
    Examples:
      advisor rebuild --db sqlite:///var/lib/advisor/events.db
      advisor rebuild --json
    """
    adv = advisor_for(db_url)
    folded = adv.rebuild()
    result = {"events": folded, "store": adv.store.display_url}
    answer(as_json, result, f"rebuilt projections from {folded} events")


@click.command()
@click.argument("service")
@incident_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "markdown", "json", "html"]),
    default="text",
    show_default=True,
    help="How to print the post-mortem.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the same as --format json).")
@click.option(
    "--out",
    "out",
    type=click.Path(path_type=Path),
    help="Write to this file instead of stdout (with --format html, one self-contained page).",
)
@db_option
def explain(
    service: str,
    incident_id: str | None,
    fmt: str,
    as_json: bool,
    out: Path | None,
    db_url: str | None,
) -> None:
    """The post-mortem of SERVICE's latest incident (UNIT or HOST/UNIT; `vllm` means
    vllm.service, as in systemctl): the one last seen failing or acted on. The others are
    listed at the end with their short ids (`--incident ID` shows one).

    \b
    Examples:
      advisor explain vllm-minimax-m25
      advisor explain vllm-minimax-m25 --incident 3f9a1c2b7d4e --format markdown
      advisor explain gpu-node-07/vllm-minimax-m25 --format html --out postmortem.html
    """
    if as_json:
        if fmt not in ("text", "json"):
            raise click.UsageError(f"--json and --format {fmt} exclude each other")
        fmt = "json"
    # a name that is not a unit is refused before the store is opened
    emit(advisor_for(db_url, read_only=True).explain(service, incident_id, fmt), out)
