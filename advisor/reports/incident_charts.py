"""The post-mortem's figure: one shared time axis (UTC) with the incident's timeline on top —
one labelled row per kind of event, the phases as bars, actions as diamonds — and below it GPU
memory in GiB as small multiples, one panel per GPU (eight identical GPUs never hide one
another), each with the phases shaded behind it; the failures (red, dashed) and the actions
(grey, dotted) are vertical lines through every panel. Hovering shows each point's time and
value. Without GPU samples only the timeline is drawn, over the times it holds.

The time axis stays on the incident: an action decided after the incident's window (its last
logged line + 30 s, or its last GPU sample) is drawn as an arrow at the axis' right edge in its
own row, with its time written beside it ("at 16:43:24 →"), not at its time; actions decided
more than an hour after the log's last line (an old log diagnosed today) are left to the text.

The marks (failure and action lines, phase bands) are built here as plain shape dicts and set
with one layout update: plotly's `add_vline`/`add_vrect` validate every shape again on each
call, which made a figure with a few dozen marks take seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Final

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from advisor.core.statuses import ActionStatus
from advisor.reports.chart_base import (
    ACTION,
    COLOURS,
    FAILURE,
    HEALTHY,
    TIME_TITLE,
    base_layout,
    label,
    new_figure,
    when,
)
from advisor.reports.timeline import HEALTHY_STEPS, PHASE_ENDS, TimelineEntry, TimelineKind

GpuSeries = dict[str, list[tuple[int, float]]]

LANE_PX: Final = 24
GPU_PX: Final = 110
LATE_US: Final = 3600 * 1_000_000  # actions later than this after the log: not drawn
# The incident's window ends this long after its last logged line (as its GPU samples do,
# `postmortem`), or at its last GPU sample: actions after it are arrows at the axis' edge.
WINDOW_AFTER_US: Final = 30 * 1_000_000
LANE_CHARS: Final = 60  # a row's label, at most (the rows' labels are our own words)
_ACTION: Final = TimelineKind.ACTION


@dataclass(frozen=True)
class Phase:
    name: str
    start_us: int
    end_us: int


def events_of(report: dict[str, Any]) -> list[TimelineEntry]:
    """The report's timeline, each entry at the time the text prints (to the millisecond)."""
    entries: list[TimelineEntry] = report["timeline"]
    return [replace(e, time_us=e.time_us - e.time_us % 1000) for e in entries]


def drawn(events: list[TimelineEntry]) -> tuple[list[TimelineEntry], list[TimelineEntry]]:
    """The events the chart draws, and those it leaves to the text: actions decided more
    than `LATE_US` after the log's last event (an old log diagnosed today) would stretch the
    time axis over months and squash the incident into a line."""
    logged = [e.time_us for e in events if e.kind is not _ACTION]
    if not logged:
        return events, []
    last = max(logged) + LATE_US
    return [e for e in events if e.time_us <= last], [e for e in events if e.time_us > last]


def _ends_phase(e: TimelineEntry) -> bool:
    """The run's next phase, or a lifecycle step that ends the phase it was in."""
    return e.kind is TimelineKind.PHASE or (
        e.kind is TimelineKind.LIFECYCLE and e.name in PHASE_ENDS
    )


def phases_of(events: list[TimelineEntry]) -> list[Phase]:
    """Each run's phases, each from its line to the run's next phase or end (its last event
    when nothing followed it)."""
    out: list[Phase] = []
    for n, event in enumerate(events):
        if event.kind is not TimelineKind.PHASE:
            continue
        later = [e for e in events[n + 1 :] if e.run == event.run]
        end = next(
            (e.time_us for e in later if _ends_phase(e)),
            later[-1].time_us if later else event.time_us,
        )
        out.append(Phase(event.name, event.time_us, end))
    return out


def _phase_colours(phases: list[Phase]) -> dict[str, str]:
    names = list(dict.fromkeys(p.name for p in phases))
    return {name: COLOURS[i % len(COLOURS)] for i, name in enumerate(names)}


def _colour(e: TimelineEntry) -> str:
    """A lifecycle step's or action's colour: red for failures, green for health, else grey."""
    if e.kind is _ACTION:
        if e.status == ActionStatus.SUCCEEDED:
            return HEALTHY
        return FAILURE if e.status == ActionStatus.FAILED else ACTION
    if e.name in HEALTHY_STEPS:
        return HEALTHY
    return FAILURE if e.failure else ACTION


def _firsts(events: list[TimelineEntry]) -> dict[str, TimelineEntry]:
    """Each row's first entry, by the row's words, in the order the rows first appear."""
    firsts: dict[str, TimelineEntry] = {}
    for e in events:
        firsts.setdefault(e.what, e)
    return firsts


def _lane_traces(events: list[TimelineEntry], phases: list[Phase]) -> list[go.Scatter]:
    """The timeline rows: a bar per phase, a marker per lifecycle event or action."""
    colours = _phase_colours(phases)
    traces = []
    for name, colour in colours.items():
        xs: list[Any] = []
        ys: list[Any] = []
        for p in (p for p in phases if p.name == name):
            xs += [when(p.start_us), when(max(p.end_us, p.start_us + 50_000)), None]
            ys += [label(f"phase {name}", LANE_CHARS)] * 2 + [None]
        traces.append(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines",
                line={"color": colour, "width": 14},
                name=label(f"phase {name}", LANE_CHARS),
                hovertemplate="%{y}<br>%{x|%H:%M:%S.%L}<extra></extra>",
                showlegend=False,
            )
        )
    others = [e for e in events if e.kind is not TimelineKind.PHASE]
    for what, first in _firsts(others).items():
        times = [when(e.time_us) for e in others if e.what == what]
        action = first.kind is _ACTION
        traces.append(
            go.Scatter(
                x=times,
                y=[label(what, LANE_CHARS)] * len(times),
                mode="markers",
                marker={
                    "color": _colour(first),
                    "size": 11,
                    "symbol": "diamond" if action else "circle",
                },
                name=label(what, LANE_CHARS),
                hovertemplate="%{y}<br>%{x|%H:%M:%S.%L}<extra></extra>",
                showlegend=False,
            )
        )
    return traces


def _gpu_trace(gpu: str, points: list[tuple[int, float]], total_gib: float | None) -> go.Scatter:
    scale, unit = (total_gib, "GiB") if total_gib else (100.0, "%")
    of = f" of {total_gib:.0f} GiB" if total_gib else ""
    return go.Scatter(
        x=[when(t) for t, _ in points],
        y=[round(v * scale, 2) for _, v in points],
        mode="lines",
        line={"color": COLOURS[0], "width": 2},
        fill="tozeroy",
        fillcolor="rgba(31,119,180,0.12)",
        name=label(f"gpu{gpu}"),
        hovertemplate=(
            f"{label(f'gpu{gpu}')}<br>%{{x|%H:%M:%S.%L}}<br>%{{y:.1f}} {unit}{of}<extra></extra>"
        ),
        showlegend=False,
    )


def after_window(
    events: list[TimelineEntry], end_us: int | None
) -> tuple[list[TimelineEntry], list[TimelineEntry]]:
    """The events on the time axis, and the actions decided after `end_us` (the end of the
    incident's window: `WINDOW_AFTER_US` after its last logged line, or its last GPU sample
    if later), which must not stretch it."""
    if end_us is None:
        return events, []
    late = [e.kind is _ACTION and e.time_us > end_us for e in events]
    return (
        [e for e, out in zip(events, late, strict=True) if not out],
        [e for e, out in zip(events, late, strict=True) if out],
    )


def _after_traces(after: list[TimelineEntry], edge_us: int, day: str) -> list[go.Scatter]:
    """Actions decided after the window: an arrow at the axis' right edge (`edge_us`, the
    last time drawn) in the action's own row, its time written beside it (the date too when
    it is not `day`); hovering tells the time in full."""
    traces = []
    for what, first in _firsts(after).items():
        times = [when(e.time_us) for e in after if e.what == what]
        last = times[-1]
        shown = f"{last:%H:%M:%S}" if f"{last:%Y-%m-%d}" == day else f"{last:%Y-%m-%d %H:%M:%S}"
        many = f"{len(times)}×, last " if len(times) > 1 else ""
        full = ", ".join(f"{t:%Y-%m-%d %H:%M:%S.%f}"[:-3] for t in times)
        traces.append(
            go.Scatter(
                x=[when(edge_us)],
                y=[label(what, LANE_CHARS)],
                mode="markers+text",
                marker={"color": _colour(first), "size": 12, "symbol": "arrow-right"},
                text=[f"{many}at {shown} →"],
                textposition="middle left",
                textfont={"color": ACTION},
                customdata=[f"at {full} UTC, after the incident's window"],
                name=label(what, LANE_CHARS),
                hovertemplate="%{y}<br>%{customdata}<extra></extra>",
                showlegend=False,
            )
        )
    return traces


def _shapes(events: list[TimelineEntry], phases: list[Phase], rows: int) -> list[dict[str, Any]]:
    """Failures and actions as lines through every panel (one line per panel, each within
    its panel), phases shaded behind the GPU panels (rows 2 to `rows`): the shapes
    `add_vline`/`add_vrect` would add, as dicts for one layout update."""
    refs = [("x", "y"), *((f"x{n}", f"y{n}") for n in range(2, rows + 1))]
    shapes: list[dict[str, Any]] = []
    for e in events:
        if e.failure or e.kind is _ACTION:
            failure = e.kind is not _ACTION
            t = when(e.time_us)
            shapes += [
                {
                    "type": "line",
                    "x0": t,
                    "x1": t,
                    "xref": x,
                    "y0": 0,
                    "y1": 1,
                    "yref": f"{y} domain",
                    "line": {
                        "color": FAILURE if failure else ACTION,
                        "dash": "dash" if failure else "dot",
                        "width": 1.5 if failure else 1,
                    },
                }
                for x, y in refs
            ]
    colours = _phase_colours(phases)
    for p in phases:
        shapes += [
            {
                "type": "rect",
                "x0": when(p.start_us),
                "x1": when(max(p.end_us, p.start_us + 50_000)),
                "xref": x,
                "y0": 0,
                "y1": 1,
                "yref": f"{y} domain",
                "fillcolor": colours[p.name],
                "opacity": 0.10,
                "line": {"width": 0},
                "layer": "below",
            }
            for x, y in refs[1:]
        ]
    return shapes


def _time_axes(fig: go.Figure, rows: int, day: str) -> None:
    """Dates on every x axis, the times written above the timeline and below the last GPU
    (`rows` panels), the day in the axis title."""
    fig.update_xaxes(
        type="date",
        showgrid=True,
        tickformatstops=[
            {"dtickrange": [None, 1000], "value": "%H:%M:%S.%L"},
            {"dtickrange": [1000, 86_400_000], "value": "%H:%M:%S"},
            {"dtickrange": [86_400_000, None], "value": "%Y-%m-%d %H:%M"},
        ],
    )
    fig.update_xaxes(row=1, col=1, showticklabels=True, side="top")
    fig.update_xaxes(
        row=rows,
        col=1,
        showticklabels=True,
        title={"text": TIME_TITLE + (f", {day}" if day else "")},
    )


def incident_figures(report: dict[str, Any], samples: GpuSeries) -> list[go.Figure]:
    """The post-mortem's figures (one, with a shared time axis): `report` is
    `postmortem.build`'s, `samples` the GPU series it filled (time µs, used fraction)."""
    events, _ = drawn(events_of(report))
    gpus = sorted((g for g, pts in samples.items() if pts), key=lambda g: (len(g), g))
    logged = [e.time_us for e in events if e.kind is not _ACTION]
    sampled = [t for g in gpus for t, _ in samples[g]]
    end_us = max([max(logged) + WINDOW_AFTER_US, *sampled]) if logged else None
    events, after = after_window(events, end_us)
    phases = phases_of(events)
    day = f"{when(events[0].time_us):%Y-%m-%d}" if events else ""
    lanes = _lane_traces(events, phases)
    if after:  # at the right edge: the last time drawn (a logged line is never after)
        lanes += _after_traces(after, max([e.time_us for e in events] + sampled), day)
    lane_count = max(1, len({t.name for t in lanes}))
    lane_px = 30 + LANE_PX * lane_count
    rows = 1 + len(gpus)
    fig = make_subplots(
        rows=rows,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.02 if gpus else 0.0,
        row_heights=[lane_px] + [GPU_PX] * len(gpus),
        figure=new_figure(),
    )
    for trace in lanes:
        fig.add_trace(trace, row=1, col=1)
    fig.update_yaxes(
        row=1, col=1, type="category", autorange="reversed", automargin=True, showgrid=True
    )
    memory = report.get("gpu_memory", {})
    for row, gpu in enumerate(gpus, start=2):
        total = memory.get(gpu, {}).get("total_gib")
        fig.add_trace(_gpu_trace(gpu, samples[gpu], total), row=row, col=1)
        fig.update_yaxes(
            row=row,
            col=1,
            range=[0, (total or 100.0) * 1.05],
            title={
                "text": label(f"gpu{gpu}") + (f"<br>GiB of {total:.0f}" if total else "<br>%"),
                "standoff": 4,
            },
            automargin=True,
            nticks=4,
        )
    fig.update_layout(shapes=_shapes(events, phases if gpus else [], rows))
    _time_axes(fig, rows, day)
    base_layout(fig, height=lane_px + GPU_PX * len(gpus) + 110)
    fig.update_layout(hovermode="closest", margin={"t": 40})
    return [fig]
