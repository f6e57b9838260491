"""The post-mortem of an incident, from the store: what `advisor explain` prints.

Built as one plain dict (`build`), then rendered as text, Markdown or JSON (`report_json`),
so the three say the same thing; its timeline entries are typed (`advisor.reports.timeline`).
Everything in it comes from events and the projections folded from them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from advisor.core.errors import InputError
from advisor.core.ids import resolve_id, short_id
from advisor.core.payloads import LogRecorded
from advisor.core.statuses import ActionStatus, IncidentStatus
from advisor.core.timefmt import format_us
from advisor.core.units import parse_service
from advisor.parsing.lines import line_from_payload
from advisor.parsing.parsed import parse
from advisor.reports import timeline
from advisor.reports.gpufaults import report_faults
from advisor.reports.keptlines import kept_section
from advisor.reports.timeline import LIFECYCLE_WORDS, TimelineEntry
from advisor.reports.writeup import OtherIncident, ReportIncident, SimilarIncident
from advisor.reports.writeup import render_text as render_text  # the text form of `build`
from advisor.store import EventFilter, EventStore
from advisor.views.fold.projector import Projector
from advisor.views.read.actions import all_actions
from advisor.views.read.corrections import latest_corrections
from advisor.views.read.gpufaults import runs_faults
from advisor.views.read.incidents import incident_rows
from advisor.views.read.reading import read_rows, run_log_events
from advisor.views.read.rows import ActionRow, IncidentView, RunView
from advisor.views.read.runs import unit_runs

SPARK: Final = "▁▂▃▄▅▆▇█"
SPARK_WIDTH: Final = 48


def sparkline(values: Sequence[float], width: int = SPARK_WIDTH) -> str:
    """Fractions 0..1 as a row of block characters, `width` buckets (the maximum of each)."""
    if not values:
        return ""
    buckets = [
        max(
            values[
                i * len(values) // width : max(
                    i * len(values) // width + 1, (i + 1) * len(values) // width
                )
            ]
        )
        for i in range(min(width, len(values)))
    ]
    return "".join(SPARK[min(len(SPARK) - 1, int(v * len(SPARK)))] for v in buckets)


def _run_timeline(store: EventStore, run: RunView) -> list[TimelineEntry]:
    """The run's phases and lifecycle steps (each the first of its name), in its order."""
    lines = [
        line_from_payload(event.seq, event.payload.model_dump(), event.time_us)
        for event in run_log_events(store, run)
        if isinstance(event.payload, LogRecorded)
    ]
    out: list[TimelineEntry] = []
    seen: set[str] = set()
    for p in parse(lines):
        t = p.line.time_us or run.started_us
        if p.facts.phase and p.facts.phase not in seen:
            seen.add(p.facts.phase)
            out.append(timeline.phase(t, run.run_id, p.facts.phase))
        step = p.facts.event
        if step is not None and step in LIFECYCLE_WORDS and step not in seen:
            seen.add(step)
            out.append(timeline.lifecycle(t, run.run_id, step))
    return out


def _times_of(store: EventStore, stream: str, seqs: set[int]) -> dict[int, int]:
    """The times of the events `seqs` of `stream`, reading only the span they lie in."""
    times: dict[int, int] = {}
    if not seqs:
        return times
    last = max(seqs)
    for event in store.read(EventFilter(stream=stream, after_seq=min(seqs) - 1)):
        if event.seq > last:
            break
        if event.seq in seqs:
            times[event.seq] = event.time_us
    return times


def _last_seen(incident: IncidentView, plan: list[ActionRow]) -> int:
    """When the incident was last seen: its last failure, or the last step of its plans that
    was decided or run, whichever is later (a step merely proposed is no activity)."""
    acted = [r.updated_us for r in plan if r.status != ActionStatus.PROPOSED]
    return max([incident.opened_us, incident.started_us or 0, *acted])


def _plans_of(actions: list[ActionRow], incident_id: str) -> list[ActionRow]:
    """The steps of the incident's plans (its own, and `INCIDENT~N` after a replan)."""
    return [r for r in actions if r.plan_id.split("~")[0] == incident_id]


@dataclass(frozen=True)
class _Chosen:
    """The incident a post-mortem is about, with its service's incidents on its host and
    their plans' steps (read once: the plan, the latest and the others all come from them)."""

    incident: IncidentView
    incidents: list[IncidentView]
    actions: list[ActionRow]


def _incident(store: EventStore, service: str, incident_id: str | None) -> _Chosen:
    """The `incidents` row the post-mortem is about: SERVICE's latest that is not superseded
    (the one last seen failing or acted on), or `incident_id` (the id, a prefix of it or of
    its short id; an error if that one is superseded). The projections are caught up first."""
    host, unit = parse_service(service)
    Projector(store).catch_up()
    incidents = incident_rows(store, unit=unit, host=host)
    actions = all_actions(store, unit=unit, host=host)
    if incident_id is not None:
        chosen = _named(service, incidents, incident_id)
    else:
        current = [i for i in incidents if i.status != IncidentStatus.SUPERSEDED]
        if not current:
            raise InputError(f"{service}: no incident")
        chosen = max(
            current,
            key=lambda i: (_last_seen(i, _plans_of(actions, i.incident_id)), i.started_us or 0),
        )
    return _Chosen(
        chosen,
        [i for i in incidents if i.host == chosen.host],
        [r for r in actions if r.host == chosen.host],
    )


def incident_runs(
    store: EventStore, service: str, incident_id: str | None = None
) -> tuple[IncidentView, list[RunView]]:
    """The incident SERVICE's post-mortem is about (as `build` chooses it) and its runs."""
    incident = _incident(store, service, incident_id).incident
    runs = unit_runs(store, incident.unit, incident.host)
    ids = [r.run_id for r in runs]
    return incident, runs[ids.index(incident.first_run_id) : ids.index(incident.last_run_id) + 1]


def _named(service: str, incidents: list[IncidentView], incident_id: str) -> IncidentView:
    """The incident `incident_id` names (the id or a prefix); InputError if none or
    superseded."""
    if not incidents:
        raise InputError(f"{service}: no incident {incident_id}")
    try:
        wanted = resolve_id(incident_id, [i.incident_id for i in incidents], "incident")
    except InputError as e:
        raise InputError(f"{service}: {e}") from e
    chosen = next(i for i in incidents if i.incident_id == wanted)
    if chosen.status == IncidentStatus.SUPERSEDED:  # no incident (docs/fold.md)
        by = chosen.superseded_by
        raise InputError(
            f"{service}: incident {wanted} is superseded"
            + (f" by {by}" if by else ": its run is cut differently now")
        )
    return chosen


def _timeline(
    store: EventStore, window: list[RunView], plan: list[ActionRow]
) -> list[TimelineEntry]:
    """The runs' timelines and the plan's decided steps, in time order."""
    entries = [e for run in window for e in _run_timeline(store, run)]
    entries += [
        timeline.action(row.updated_us, row.kind, row.status)
        for row in plan
        if row.status != ActionStatus.PROPOSED
    ]
    entries.sort(key=lambda e: e.time_us)
    return entries


def _gpu_memory(
    store: EventStore,
    host: str,
    window: list[RunView],
    series: dict[str, list[tuple[int, float]]] | None,
    totals: dict[int, int],
) -> dict[int, list[float]]:
    """Per GPU, the used fractions of the samples from the window's start to 30 s after its
    end, and in `totals` its largest total bytes; with `series`, (time µs, fraction) go
    there too."""
    start = window[0].started_us
    end = max((r.ended_us or r.started_us) for r in window) + 30_000_000
    samples = read_rows(store, "gpu_samples", host=host, between_us=(start, end))
    gpus: dict[int, list[float]] = {}
    for s in samples:
        fraction = s["used_bytes"] / s["total_bytes"] if s["total_bytes"] else 0.0
        gpus.setdefault(s["gpu"], []).append(fraction)
        totals[s["gpu"]] = max(totals.get(s["gpu"], 0), s["total_bytes"] or 0)
        if series is not None:
            series.setdefault(str(s["gpu"]), []).append((s["time_us"], fraction))
    return gpus


def _plan_step(row: ActionRow) -> dict[str, Any]:
    return {
        "action_id": row.action_id,
        "kind": row.kind,
        "status": row.status,
        "alternative": row.alternative,
        "detail": row.detail,
        **{
            k: v
            for k, v in row.spec.items()
            if k in ("flag", "value", "option", "seconds", "why", "arithmetic")
        },
    }


def _report_incident(incident: IncidentView) -> ReportIncident:
    return ReportIncident(
        incident_id=incident.incident_id,
        host=incident.host,
        unit=incident.unit,
        label=incident.label,
        confidence=incident.confidence,
        phase=incident.phase,
        runs=incident.runs,
        status=incident.status,
        short_id=short_id(incident.incident_id),
    )


def build(
    store: EventStore,
    service: str,
    incident_id: str | None = None,
    series: dict[str, list[tuple[int, float]]] | None = None,
) -> dict[str, Any]:
    """The post-mortem of SERVICE's latest incident (or of `incident_id`); SERVICE is `UNIT` or
    `HOST/UNIT` as systemctl takes it (`units.parse_service`). With `series`, the
    GPU samples of the incident's window go there too (time µs, used fraction, per GPU)."""
    chosen = _incident(store, service, incident_id)
    incident, actions = chosen.incident, chosen.actions
    runs = unit_runs(store, incident.unit, incident.host)
    first = next(i for i, r in enumerate(runs) if r.run_id == incident.first_run_id)
    last = next(i for i, r in enumerate(runs) if r.run_id == incident.last_run_id)
    window = runs[max(0, first - 1) : last + 2]
    plan = [r for r in actions if r.plan_id == incident.incident_id]
    entries = _timeline(store, window, plan)
    faults = report_faults(runs_faults(store, runs[first : last + 1]))
    entries += [timeline.gpu_fault(f["time_us"], f["title"]) for f in faults]
    entries.sort(key=lambda e: e.time_us)
    totals: dict[int, int] = {}
    gpus = _gpu_memory(store, incident.host, window, series, totals)
    return {
        "incident": _report_incident(incident),
        "opened": format_us(incident.opened_us),
        "config": dict(runs[first].config),
        "facts": {k: v for k, v in (incident.facts or {}).items() if v is not None},
        "evidence": _evidence(store, incident),
        "timeline": entries,
        "plan": [_plan_step(r) for r in plan],
        "gpu_memory": {
            str(g): {
                "peak_fraction": round(max(v), 4),
                "total_gib": round(totals[g] / 2**30, 2),
                "sparkline": sparkline(v),
            }
            for g, v in sorted(gpus.items())
        },
        "gpu_faults": faults,
        "kept": kept_section(store, incident, runs[first : last + 1]),
        "similar": _similar(store, incident),
        "others": _others(chosen),
        "operator": _operator(store, incident.incident_id),
    }


def _operator(store: EventStore, incident_id: str) -> dict[str, Any] | None:
    """The operators' label of the incident (its latest correction), None when none."""
    found = latest_corrections(store, incident_id).get(incident_id)
    return None if found is None else found.as_json()


def report_json(report: dict[str, Any]) -> dict[str, Any]:
    """`build`'s report as JSON values: the timeline entries as {time, what, run}."""
    return {**report, "timeline": [e.as_json() for e in report["timeline"]]}


def _evidence(store: EventStore, incident: IncidentView) -> list[dict[str, Any]]:
    """The incident's evidence lines, each with the time of its event."""
    evidence = incident.evidence or []
    times = _times_of(store, incident.stream, {e["seq"] for e in evidence})
    return [
        {
            "time": format_us(times[e["seq"]]) if e["seq"] in times else None,
            "seq": e["seq"],
            "text": e["text"],
        }
        for e in evidence
    ]


def _similar(store: EventStore, incident: IncidentView) -> list[SimilarIncident]:
    """The host's other incidents with the same label, superseded ones left out."""
    return [
        SimilarIncident(
            incident_id=i.incident_id,
            short_id=short_id(i.incident_id),
            unit=i.unit,
            opened=format_us(i.opened_us),
            runs=i.runs,
            status=i.status,
        )
        for i in incident_rows(store, host=incident.host)
        if i.incident_id != incident.incident_id
        and i.label == incident.label
        and i.status != IncidentStatus.SUPERSEDED
    ]


def _others(chosen: _Chosen) -> list[OtherIncident]:
    """The service's other incidents, superseded ones left out, newest seen first."""
    incident, actions = chosen.incident, chosen.actions
    others = [
        i
        for i in chosen.incidents
        if i.incident_id != incident.incident_id and i.status != IncidentStatus.SUPERSEDED
    ]
    seen = {i.incident_id: _last_seen(i, _plans_of(actions, i.incident_id)) for i in others}
    others.sort(key=lambda i: seen[i.incident_id], reverse=True)
    return [
        OtherIncident(
            incident_id=i.incident_id,
            short_id=short_id(i.incident_id),
            label=i.label,
            opened=format_us(i.opened_us),
            last_seen=format_us(seen[i.incident_id]),
            runs=i.runs,
            status=i.status,
        )
        for i in others
    ]
