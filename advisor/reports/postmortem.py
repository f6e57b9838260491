"""The post-mortem of an incident, from the store: what `advisor explain` prints.

Built as one plain dict (`build`), then rendered as text, Markdown or JSON, so the three say
the same thing. Everything in it comes from events and the projections folded from them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from advisor.core.errors import InputError
from advisor.core.events import LogRecorded
from advisor.core.render import markdown_code, markdown_code_block, markdown_text, safe_text
from advisor.core.timefmt import format_us
from advisor.core.units import parse_service
from advisor.parsing.lines import line_from_payload
from advisor.parsing.sequence import parse
from advisor.store import EventFilter, EventStore
from advisor.views.actions import plan_actions
from advisor.views.incidents import incident_rows
from advisor.views.projector import Projector
from advisor.views.reading import read_rows, run_log_events
from advisor.views.rows import ActionRow, IncidentView, RunView
from advisor.views.runs import unit_runs

SPARK: Final = "▁▂▃▄▅▆▇█"
SPARK_WIDTH: Final = 48
_TIMELINE_EVENTS: Final = {
    "start": "start requested",
    "started": "started",
    "stop_requested": "stop requested",
    "stop_timeout": "stop timed out: SIGKILL",
    "exit": "main process exited",
    "failed": "failed",
    "restart_scheduled": "restart scheduled",
    "deactivated": "stopped cleanly",
    "still_around": "processes survived SIGKILL",
}


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


def _run_timeline(store: EventStore, run: RunView) -> list[tuple[int, str]]:
    """(time, what) for the run's start, phases, failure line and lifecycle steps."""
    lines = [
        line_from_payload(event.seq, event.payload.model_dump(), event.time_us)
        for event in run_log_events(store, run)
        if isinstance(event.payload, LogRecorded)
    ]
    out: list[tuple[int, str]] = []
    seen: set[str] = set()
    for p in parse(lines):
        t = p.line.time_us or run.started_us
        if p.facts.phase and p.facts.phase not in seen:
            seen.add(p.facts.phase)
            out.append((t, f"phase {p.facts.phase}"))
        step = p.facts.event
        if step is not None and step in _TIMELINE_EVENTS and step not in seen:
            seen.add(step)
            out.append((t, _TIMELINE_EVENTS[step]))
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


def _incident(store: EventStore, service: str, incident_id: str | None) -> IncidentView:
    """The `incidents` row the post-mortem is about: SERVICE's latest that is not superseded,
    or `incident_id` (an error if that one is superseded). The projections are caught up
    first."""
    host, unit = parse_service(service)
    Projector(store).catch_up()
    incidents = incident_rows(store, unit=unit, host=host)
    if incident_id is not None:
        incidents = [i for i in incidents if i.incident_id == incident_id]
        if incidents and incidents[0].status == "superseded":  # no incident (docs/fold.md)
            by = incidents[0].superseded_by
            raise InputError(
                f"{service}: incident {incident_id} is superseded"
                + (f" by {by}" if by else ": its run is cut differently now")
            )
    else:
        incidents = [i for i in incidents if i.status != "superseded"]
    if not incidents:
        raise InputError(f"{service}: no incident" + (f" {incident_id}" if incident_id else ""))
    return incidents[-1]


def _timeline(
    store: EventStore, window: list[RunView], plan: list[ActionRow]
) -> list[dict[str, Any]]:
    """The runs' timelines and the plan's decided steps, in time order."""
    timeline: list[dict[str, Any]] = []
    for run in window:
        for t, what in _run_timeline(store, run):
            timeline.append({"time_us": t, "run": run.run_id, "what": what})
    for row in plan:
        if row.status != "proposed":
            timeline.append(
                {"time_us": row.updated_us, "run": None, "what": f"action {row.kind} {row.status}"}
            )
    timeline.sort(key=lambda e: e["time_us"])
    return timeline


def _gpu_memory(
    store: EventStore,
    host: str,
    window: list[RunView],
    series: dict[str, list[tuple[int, float]]] | None,
) -> dict[int, list[float]]:
    """Per GPU, the used fractions of the samples from the window's start to 30 s after its
    end; with `series`, (time µs, fraction) go there too."""
    start = window[0].started_us
    end = max((r.ended_us or r.started_us) for r in window) + 30_000_000
    samples = [
        s for s in read_rows(store, "gpu_samples", host=host) if start <= s["time_us"] <= end
    ]
    gpus: dict[int, list[float]] = {}
    for s in samples:
        fraction = s["used_bytes"] / s["total_bytes"] if s["total_bytes"] else 0.0
        gpus.setdefault(s["gpu"], []).append(fraction)
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


_INCIDENT_KEYS: Final = (
    "incident_id",
    "host",
    "unit",
    "label",
    "confidence",
    "phase",
    "runs",
    "status",
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
    incident = _incident(store, service, incident_id)
    runs = unit_runs(store, incident.unit, incident.host)
    first = next(i for i, r in enumerate(runs) if r.run_id == incident.first_run_id)
    last = next(i for i, r in enumerate(runs) if r.run_id == incident.last_run_id)
    window = runs[max(0, first - 1) : last + 2]
    plan = plan_actions(store, incident.incident_id)  # its rows only, not every plan's
    timeline = _timeline(store, window, plan)
    gpus = _gpu_memory(store, incident.host, window, series)
    return {
        "incident": {k: getattr(incident, k) for k in _INCIDENT_KEYS},
        "opened": format_us(incident.opened_us),
        "config": dict(runs[first].config),
        "facts": {k: v for k, v in (incident.facts or {}).items() if v is not None},
        "evidence": _evidence(store, incident),
        "timeline": [
            {"time": format_us(e["time_us"]), "what": e["what"], "run": e["run"]} for e in timeline
        ],
        "plan": [_plan_step(r) for r in plan],
        "gpu_memory": {
            str(g): {"peak_fraction": round(max(v), 4), "sparkline": sparkline(v)}
            for g, v in sorted(gpus.items())
        },
        "similar": _similar(store, incident),
    }


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


def _similar(store: EventStore, incident: IncidentView) -> list[dict[str, Any]]:
    """The host's other incidents with the same label, superseded ones left out."""
    return [
        {
            "incident_id": i.incident_id,
            "unit": i.unit,
            "opened": format_us(i.opened_us),
            "runs": i.runs,
            "status": i.status,
        }
        for i in incident_rows(store, host=incident.host)
        if i.incident_id != incident.incident_id
        and i.label == incident.label
        and i.status != "superseded"
    ]


def render_text(report: dict[str, Any], markdown: bool = False) -> str:
    """The post-mortem as text for a terminal, or as Markdown: there every line that comes
    from the logs (and all the rest below the headings) is in a fenced code block that no text
    can close, and the summary's names in code spans, so no log line can bring raw HTML,
    links or Markdown structure into the page."""
    inc = report["incident"]
    sections = _sections(report)
    summary = (
        f"{inc['runs']} failed run(s), {inc['status']}; failing phase: {inc['phase'] or 'unknown'}"
    )
    if markdown:
        return _render_markdown(report, summary, sections)
    out = [
        safe_text(
            f"{inc['host']}/{inc['unit']}: {inc['label']} (confidence {inc['confidence']:.2f})"
        ),
        safe_text(f"incident {inc['incident_id']}, opened {report['opened']}, {summary}"),
    ]
    for title, lines in sections:
        out.append(f"\n{title}\n" + "-" * len(title))
        out += [safe_text(line) for line in lines]
    return "\n".join(out) + "\n"


def _render_markdown(
    report: dict[str, Any], summary: str, sections: list[tuple[str, list[str]]]
) -> str:
    """The post-mortem as Markdown: names in code spans, each section in a code block."""
    inc = report["incident"]
    service = f"{inc['host']}/{inc['unit']}"
    out = [
        f"# {markdown_code(service)}: "
        f"{markdown_text(str(inc['label']))} (confidence {inc['confidence']:.2f})",
        "",
        f"incident {markdown_code(str(inc['incident_id']))}, opened {report['opened']}, "
        f"{markdown_text(summary)}",
    ]
    for title, lines in sections:
        out += ["", f"## {title}", "", markdown_code_block(lines) if lines else "none"]
    return "\n".join(out) + "\n"


def _sections(report: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """The report's sections below the summary, as (title, lines)."""
    sections: list[tuple[str, list[str]]] = []
    sections.append(("Timeline", [f"{e['time']}  {e['what']}" for e in report["timeline"]]))
    sections.append(("Config", [f"{k}: {v}" for k, v in sorted(report["config"].items())]))
    sections.append(
        (
            "Evidence",
            [f"{e['time'] or '?'}  #{e['seq']}  {e['text'][:300]}" for e in report["evidence"]],
        )
    )
    if report["facts"]:
        sections.append(("Facts", [f"{k}: {v}" for k, v in sorted(report["facts"].items())]))
    sections.append(("Plan", _plan_lines(report["plan"])))
    if report["gpu_memory"]:
        sections.append(
            (
                "GPU memory (used / total, over the incident)",
                [
                    f"gpu{g}  {v['sparkline']}  peak {v['peak_fraction']:.0%}"
                    for g, v in report["gpu_memory"].items()
                ],
            )
        )
    sections.append(
        (
            "Similar incidents on this host",
            [
                f"{s['opened']}  {s['unit']}  {s['runs']} run(s), {s['status']}"
                for s in report["similar"]
            ]
            or ["none"],
        )
    )
    return sections


def _plan_lines(steps: list[dict[str, Any]]) -> list[str]:
    """The plan's steps, each with its arithmetic and outcome indented below it."""
    plan: list[str] = []
    for step in steps:
        what = step["kind"] + (f" {step['flag']} {step['value']}" if step.get("flag") else "")
        what += f" {step['option']}={step['value']}" if step.get("option") else ""
        alt = " (alternative)" if step["alternative"] else ""
        plan.append(f"[{step['status']}] {what}{alt}: {step.get('why', '')}")
        plan += [f"    {line}" for line in step.get("arithmetic", ())]
        if step.get("detail"):
            plan.append(f"    → {step['detail']}")
    return plan
