"""The console's charts: the figures of `advisor.reports.charts` (the post-mortem's, the
fleet's) as JSON that a page holds in a `data-figure` attribute, and plotly.js, which the
console serves itself (`/plotly.js`, cached for a year: its URL names the version): the same
vendored bundle the HTML post-mortem inlines (`advisor.reports.charts.plotly_js`).

No page carries an inline script: console.js draws every `[data-figure]` with
`Plotly.newPlot`, on load and again after a refresh swaps the page's main part in. The text
in the figures is escaped for plotly by `chart_base.label`; the JSON is escaped once more
for the attribute by the templates' autoescaping.
"""

from __future__ import annotations

import gzip
import json
from functools import cache
from typing import TYPE_CHECKING, Any, Final

from starlette.requests import Request
from starlette.responses import Response

if TYPE_CHECKING:
    import plotly.graph_objects as go

PATH: Final = "/plotly.js"
YEAR_S: Final = 365 * 86_400


@cache
def plotly_src() -> str:
    """The URL the pages load plotly.js from: the bundle's version in it, so that a new
    bundle is a new URL and the long cache never serves an old one."""
    from advisor.reports.charts import plotly_js_version

    return f"{PATH}?v={plotly_js_version()}-basic"


@cache
def _bundle(gzipped: bool) -> bytes:
    from advisor.reports.charts import plotly_js

    raw = plotly_js().encode()
    return gzip.compress(raw, mtime=0) if gzipped else raw


def plotly_script(request: Request) -> Response:
    """plotly.js (the basic bundle the post-mortem inlines: 1.2 MB, about 0.4 gzipped), for
    every page that draws a chart."""
    gzipped = "gzip" in request.headers.get("accept-encoding", "")
    headers = {"Cache-Control": f"public, max-age={YEAR_S}, immutable", "Vary": "Accept-Encoding"}
    if gzipped:
        headers["Content-Encoding"] = "gzip"
    return Response(_bundle(gzipped), media_type="text/javascript; charset=utf-8", headers=headers)


def figure_json(fig: go.Figure) -> str:
    """A figure and its config as the JSON `data-figure` holds: {data, layout, config}."""
    from advisor.reports.chart_base import CONFIG, finished

    return json.dumps({**finished(fig), "config": CONFIG}, separators=(",", ":"))


def warm() -> None:
    """Draw a small figure once, as a page's charts are drawn: plotly builds its template's
    objects and imports most of its classes the first time (~0.3 s), which the first page
    would otherwise wait for."""
    import plotly.graph_objects as go

    from advisor.reports.chart_base import base_layout, new_figure

    fig = new_figure(go.Scatter(x=[0, 1], y=[0, 1]))
    base_layout(fig, height=100, title="warm")
    figure_json(fig)


def incident_charts(
    report: dict[str, Any], samples: dict[str, list[tuple[int, float]]]
) -> list[str]:
    """The incident page's figures (the timeline and a panel per GPU with samples)."""
    from advisor.reports.incident_charts import incident_figures

    return [figure_json(fig) for fig in incident_figures(report, samples)]


def fleet_charts(report: dict[str, list[dict[str, Any]]]) -> dict[str, str]:
    """The fleet page's figures by report section; a section without rows has none."""
    from advisor.reports.stats_charts import stats_figures

    return {
        section: figure_json(fig)
        for section, fig in stats_figures(report).items()
        if report.get(section)
    }
