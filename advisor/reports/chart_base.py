"""What every chart shares: hostile text made safe for plotly, times as datetimes on a UTC
axis, a count axis that a count of 1 does not fill, and one look (fonts, colours, margins).

Plotly reads a small set of HTML tags in every text it draws (`<b>`, `<br>`, `<a href>`) and
decodes entities: every text that comes from the store goes through `label` first, so a unit
name or a log line with markup is drawn as the characters it holds, never as markup.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from functools import cache
from html import escape
from importlib.resources import files
from typing import Any, Final

import plotly.graph_objects as go

GIB: Final = 2**30
FONT: Final = "system-ui, -apple-system, Segoe UI, Roboto, sans-serif"
COLOURS: Final = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
)
FAILURE: Final = "#d62728"
ACTION: Final = "#444444"
HEALTHY: Final = "#2ca02c"
TIME_TITLE: Final = "time (UTC)"
# The mode bar keeps zoom, pan, reset and the PNG download; nothing in it reaches a server.
CONFIG: Final[dict[str, Any]] = {
    "displaylogo": False,
    "responsive": True,
    "modeBarButtonsToRemove": ["select2d", "lasso2d", "autoScale2d"],
}


def label(text: object, limit: int = 200) -> str:
    """`text` as plotly draws it literally: markup escaped, control characters shown as
    `\\xNN`, at most `limit` characters (cut at a word where there is one, with "…")."""
    plain = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in str(text))
    if len(plain) > limit:
        cut = plain[: limit - 1]
        plain = (cut.rsplit(" ", 1)[0] if " " in cut[limit // 2 :] else cut) + "…"
    return escape(plain, quote=False)


def when(time_us: int) -> datetime:
    """A time in µs since the epoch as the naive UTC datetime plotly puts on a date axis."""
    return datetime.fromtimestamp(time_us / 1e6, tz=UTC).replace(tzinfo=None)


def count_range(top: float) -> list[float]:
    """An axis for counts from 0 to at least 5 and a tenth above the largest: a bar for 1
    is a fifth of the width, not all of it."""
    return [0, max(5.0, math.ceil(top * 1.1))]


def new_figure(data: Any = None) -> go.Figure:
    """A figure without a template. Plotly builds and validates a template's objects for
    every figure (its default at creation, then ours): most of a page's chart time. The look
    (`plotly_white`) is added to the figure's JSON as it is written (`finished`)."""
    return go.Figure(data, layout={"template": {}})


@cache
def _white() -> dict[str, Any]:
    """plotly's `plotly_white` template, as the JSON plotly.js reads (from the package)."""
    path = files("plotly").joinpath("package_data", "templates", "plotly_white.json")
    found: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return found


def finished(fig: go.Figure) -> dict[str, Any]:
    """The figure as plotly.js reads it (validated), with the look every figure shares."""
    import plotly.io as pio

    spec: dict[str, Any] = json.loads(pio.to_json(fig, validate=True))
    spec.setdefault("layout", {})["template"] = _white()
    return spec


def base_layout(fig: go.Figure, *, height: int, title: str | None = None) -> None:
    """The look every figure shares (with the template `finished` adds); `title` is text
    from this program, never from a log."""
    fig.update_layout(
        height=height,
        font={"family": FONT, "size": 13},
        margin={"l": 10, "r": 20, "t": 50 if title else 20, "b": 40},
        hoverlabel={"font": {"family": FONT, "size": 13}},
        title={"text": escape(title, quote=False)} if title else None,
    )
