"""The fleet page's figures, from `advisor.reports.stats.stats`'s report: crashes by failure
and by service as horizontal bars against a count axis from 0 (a count of 1 is a short bar,
not the full width), and crashes per ISO week as a trend over every week from the first to
the last (weeks without a crash drawn as 0)."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any, Final

import plotly.graph_objects as go

from advisor.reports.chart_base import (
    COLOURS,
    FAILURE,
    base_layout,
    count_range,
    label,
    new_figure,
)

BAR_PX: Final = 34


def _bars(rows: list[tuple[str, int, int]], title: str, what: str) -> go.Figure:
    """Grouped horizontal bars: incidents and failed runs per `what`."""
    names = [label(name, 80) for name, _, _ in rows]
    fig = new_figure()
    for n, (series, values) in enumerate(
        (("incidents", [i for _, i, _ in rows]), ("failed runs", [r for _, _, r in rows]))
    ):
        fig.add_trace(
            go.Bar(
                y=names,
                x=values,
                orientation="h",
                name=series,
                marker_color=COLOURS[n],
                text=values,
                textposition="outside",
                cliponaxis=False,
                hovertemplate=f"%{{y}}<br>%{{x}} {series}<extra></extra>",
            )
        )
    top = max((max(i, r) for _, i, r in rows), default=0)
    fig.update_xaxes(range=count_range(top), title={"text": "count"}, dtick=1 if top < 10 else None)
    fig.update_yaxes(autorange="reversed", automargin=True, title={"text": what})
    base_layout(fig, height=120 + BAR_PX * 2 * max(1, len(rows)), title=title)
    fig.update_layout(barmode="group", legend={"orientation": "h", "y": -0.25})
    return fig


def week_start(week: str) -> date:
    """The Monday of an ISO week written `2026-W49`."""
    year, number = week.split("-W")
    return date.fromisocalendar(int(year), int(number), 1)


def weekly_counts(rows: list[dict[str, Any]]) -> list[tuple[date, int]]:
    """(Monday, incidents) for every week from the first with a crash to the last."""
    counts = {week_start(str(r["week"])): int(r["incidents"]) for r in rows if r.get("week")}
    if not counts:
        return []
    first, last = min(counts), max(counts)
    weeks = [first + timedelta(weeks=n) for n in range((last - first).days // 7 + 1)]
    return [(w, counts.get(w, 0)) for w in weeks]


def weekly_figure(rows: list[dict[str, Any]]) -> go.Figure:
    """Crashes per ISO week as bars joined by a trend line, one slot per week (weeks with no
    crash as 0, so the slots are evenly spaced in time)."""
    weeks = weekly_counts(rows)
    xs = [f"{w.isocalendar().year}-W{w.isocalendar().week:02d}" for w, _ in weeks]
    ys = [n for _, n in weeks]
    mondays = [w.isoformat() for w, _ in weeks]
    fig = new_figure(
        [
            go.Bar(
                x=xs,
                y=ys,
                customdata=mondays,
                marker_color=FAILURE,
                opacity=0.75,
                name="incidents",
                text=ys,
                textposition="outside",
                cliponaxis=False,
                hovertemplate="%{x} (from Monday %{customdata})<br>%{y} incident(s)<extra></extra>",
            ),
            go.Scatter(x=xs, y=ys, mode="lines+markers", line={"color": "#333"}, hoverinfo="skip"),
        ]
    )
    fig.update_xaxes(type="category", title={"text": "ISO week"})
    fig.update_yaxes(range=count_range(max(ys, default=0)), title={"text": "incidents"})
    base_layout(fig, height=320, title="Crashes per week")
    fig.update_layout(showlegend=False, bargap=0.5 if len(xs) > 1 else 0.8)
    return fig


def stats_figures(report: dict[str, list[dict[str, Any]]]) -> dict[str, go.Figure]:
    """The figures of the fleet page, by the report section each stands for."""
    return {
        "crashes_by_label": _bars(
            [
                (str(r["label"]), int(r["incidents"]), int(r["failed_runs"] or 0))
                for r in report["crashes_by_label"]
            ],
            "Crashes by failure",
            "failure",
        ),
        "crashes_by_service": _bars(
            [
                (f"{r['host']}/{r['unit']}", int(r["incidents"]), int(r["failed_runs"] or 0))
                for r in report["crashes_by_service"]
            ],
            "Crashes by service",
            "service",
        ),
        "crashes_by_week": weekly_figure(report["crashes_by_week"]),
    }
