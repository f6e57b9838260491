"""The charts people read, drawn by plotly: one place that builds every figure, for the
self-contained HTML files (`explain --format html`, `stats --format html`) and for any page
that wants the same figures (a web console serves `plotly_js()` once and embeds fragments).

The API:

- `incident_figures(report, samples) -> list[Figure]`: the post-mortem's figure, from
  `postmortem.build`'s report and the GPU series it filled; the timeline and the GPU memory
  per GPU (GiB, small multiples) on one time axis, phases shaded, failures and actions marked
  (`advisor.reports.incident_charts`).
- `stats_figures(report) -> dict[str, Figure]`: the fleet page's figures by report section
  (`crashes_by_label`, `crashes_by_service`, `crashes_by_week`;
  `advisor.reports.stats_charts`).
- `to_html_fragment(fig, include_js=False, div_id=None) -> str`: one `<div>` and the
  `<script>` that draws it; with `include_js`, plotly.js inlined before it (1.2 MB), so the
  fragment draws with no network. A page with several figures inlines the library once
  (`script_tag()`) and embeds each figure without it.
- `plotly_js() -> str`: plotly.js's "basic" bundle (scatter, bar and pie traces: all these
  charts use), vendored in this package (`advisor/reports/static/`, its source, version and
  sha256 in the README there) rather than the full 4.6 MiB bundle of the plotly package, for
  a page to inline or a server to send (never a CDN); `plotly_js_version()` its version.

Text from the store reaches plotly only escaped (`chart_base.label`); plotly writes the
figure's JSON with `<`, `>` and `/` as `\\u` escapes, so nothing in it can close the script.
"""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files
from typing import Final

import plotly.graph_objects as go
import plotly.io as pio

from advisor.reports.chart_base import CONFIG, finished

__all__ = [
    "CSP",
    "plotly_js",
    "plotly_js_version",
    "script_tag",
    "to_html_fragment",
]

# For the <meta http-equiv="Content-Security-Policy"> of a page that holds these charts: no
# request leaves the page (no fetch, no image, no font, no frame); only its own inline script
# and styles run. plotly.js builds some functions at run time, hence 'unsafe-eval'.
CSP: Final = (
    "default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; "
    "style-src 'unsafe-inline'; img-src data:; font-src data:"
)


# plotly.js's partial bundle with the trace types these charts draw (scatter, bar; pie too),
# its licence header kept; the Python plotly package's full bundle also holds 3D, maps and
# the rest, four times the size. Its major version is the one the Python package writes
# figures for (plotly 7 for plotly.js 4).
BUNDLE: Final = "plotly-basic.min.js"


@cache
def plotly_js() -> str:
    """The vendored plotly.js bundle (read once)."""
    return files("advisor.reports").joinpath("static", BUNDLE).read_text(encoding="utf-8")


@cache
def plotly_js_version() -> str:
    """The bundle's version, as its licence header names it (`4.1.1`)."""
    found = re.search(r"^\* plotly\.js \(basic - minified\) v(\S+)$", plotly_js()[:200], re.M)
    if found is None:
        raise RuntimeError(f"{BUNDLE}: no plotly.js version in its header")
    return found.group(1)


def script_tag() -> str:
    """plotly.js inlined as one `<script>` element."""
    return f'<script charset="utf-8">{plotly_js()}</script>'


def to_html_fragment(fig: go.Figure, include_js: bool = False, div_id: str | None = None) -> str:
    """`fig` as a `<div>` and the `<script>` that draws it into that div; `include_js`:
    plotly.js inlined first (else the page must hold it already)."""
    fragment = pio.to_html(
        finished(fig),  # validated there
        config=CONFIG,
        include_plotlyjs=False,
        include_mathjax=False,
        full_html=False,
        div_id=div_id,
        validate=False,
    )
    return (script_tag() if include_js else "") + str(fragment)
