"""The post-mortem as one self-contained HTML page (no network, no script): the report of
`advisor.reports.postmortem` plus charts drawn as inline SVG — GPU memory per GPU over time with the
run's phases and the failure marked, the restart timeline, and the actions taken."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any, Final

from advisor.core.timefmt import parse_iso_us

W: Final = 900
H: Final = 220
PAD: Final = 40
COLOURS: Final = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
)


def _x(t: int, t0: int, t1: int) -> float:
    return PAD + (W - 2 * PAD) * ((t - t0) / max(1, t1 - t0))


def gpu_chart(
    series: dict[str, list[tuple[int, float]]], marks: Sequence[tuple[int, str]], t0: int, t1: int
) -> str:
    """GPU memory used (fraction) per GPU over time, with vertical marks for events."""
    parts = [
        f'<svg class="chart" id="gpu-memory" width="{W}" height="{H}" '
        f'viewBox="0 0 {W} {H}" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'aria-label="GPU memory per GPU over time">',
        f'<rect x="0" y="0" width="{W}" height="{H}" fill="#ffffff"/>',
        f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - PAD}" y2="{H - PAD}" stroke="#333"/>',
        f'<line x1="{PAD}" y1="{PAD / 2}" x2="{PAD}" y2="{H - PAD}" stroke="#333"/>',
        f'<text x="4" y="{PAD / 2 + 4}" font-size="11">100%</text>',
        f'<text x="4" y="{H - PAD}" font-size="11">0%</text>',
    ]
    for n, (gpu, points) in enumerate(sorted(series.items())):
        if not points:
            continue
        path = " ".join(
            f"{'M' if i == 0 else 'L'}{_x(t, t0, t1):.1f},{H - PAD - (H - 1.5 * PAD) * v:.1f}"
            for i, (t, v) in enumerate(points)
        )
        colour = COLOURS[n % len(COLOURS)]
        parts.append(
            f'<path class="gpu-line" d="{path}" fill="none" stroke="{colour}" stroke-width="2"/>'
        )
        parts.append(
            f'<text x="{W - PAD + 4}" y="{PAD + 14 * n}" font-size="11" '
            f'fill="{colour}">gpu{escape(gpu)}</text>'
        )
    for t, label in marks:
        x = _x(t, t0, t1)
        colour = "#d62728" if "fail" in label or "timed out" in label else "#555"
        parts.append(
            f'<line class="mark" x1="{x:.1f}" y1="{PAD / 2}" x2="{x:.1f}" '
            f'y2="{H - PAD}" stroke="{colour}" stroke-dasharray="3,3"/>'
        )
        parts.append(
            f'<text x="{x + 2:.1f}" y="{H - PAD + 14}" font-size="9" '
            f'transform="rotate(20 {x + 2:.1f} {H - PAD + 14})">{escape(label)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def timeline_chart(
    events: Sequence[tuple[int, str]], t0: int, t1: int, chart_id: str, title: str
) -> str:
    """Events on a time axis, one row per kind of event."""
    kinds = sorted({what for _, what in events})
    height = PAD + 18 * max(1, len(kinds))
    parts = [
        f'<svg class="chart" id="{chart_id}" width="{W}" height="{height}" '
        f'viewBox="0 0 {W} {height}" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'aria-label="{escape(title)}">',
        f'<rect x="0" y="0" width="{W}" height="{height}" fill="#ffffff"/>',
    ]
    for row, kind in enumerate(kinds):
        y = 14 + 18 * row
        parts.append(f'<text x="4" y="{y + 4}" font-size="10">{escape(kind[:28])}</text>')
        for t, what in events:
            if what == kind:
                colour = (
                    "#d62728"
                    if "fail" in what or "timed out" in what
                    else "#2ca02c"
                    if "succeeded" in what or what == "started"
                    else "#1f77b4"
                )
                x = 140 + (W - 140 - PAD) * ((t - t0) / max(1, t1 - t0))
                parts.append(f'<circle class="dot" cx="{x:.1f}" cy="{y}" r="5" fill="{colour}"/>')
    parts.append("</svg>")
    return "".join(parts)


def render(report: dict[str, Any], samples: dict[str, list[tuple[int, float]]]) -> str:
    """The page: header, charts, then the text sections of the post-mortem."""
    from advisor.reports.postmortem import render_text

    inc = report["incident"]
    times = [parse_iso_us(e["time"]) for e in report["timeline"]] or [0]
    all_times = times + [t for pts in samples.values() for t, _ in pts]
    t0, t1 = min(all_times), max(all_times)
    marks = [
        (parse_iso_us(e["time"]), e["what"])
        for e in report["timeline"]
        if e["what"].startswith(
            ("phase", "main process exited", "failed", "stop timed", "started", "action")
        )
    ]
    lifecycle = [
        (parse_iso_us(e["time"]), e["what"])
        for e in report["timeline"]
        if not e["what"].startswith(("phase", "action"))
    ]
    actions = [
        (parse_iso_us(e["time"]), e["what"])
        for e in report["timeline"]
        if e["what"].startswith("action")
    ]
    title = f"{inc['host']}/{inc['unit']}: {inc['label']}"
    return "".join(
        [
            '<!doctype html><html lang="en"><head><meta charset="utf-8">',
            f"<title>{escape(title)}</title>",
            "<style>body{font-family:sans-serif;margin:2em;max-width:960px}"
            "pre{white-space:pre-wrap;background:#f6f6f6;padding:1em}"
            "h2{border-bottom:1px solid #ccc}</style></head><body>",
            f"<h1>{escape(title)}</h1>",
            f"<p>confidence {inc['confidence']:.2f}, failing phase "
            f"{escape(str(inc['phase']))}, {inc['runs']} failed run(s), "
            f"{escape(inc['status'])}</p>",
            "<h2>GPU memory per GPU</h2>",
            gpu_chart(samples, marks, t0, t1),
            "<h2>Restart timeline</h2>",
            timeline_chart(lifecycle, t0, t1, "restart-timeline", "restart timeline"),
            "<h2>Actions</h2>",
            timeline_chart(actions or [(t0, "no action yet")], t0, t1, "actions", "actions"),
            "<h2>Post-mortem</h2>",
            f"<pre>{escape(render_text(report))}</pre>",
            "</body></html>\n",
        ]
    )


def bar_chart(rows: Sequence[tuple[str, float]], chart_id: str, title: str) -> str:
    """Horizontal bars, one per (label, value)."""
    height = PAD + 22 * max(1, len(rows))
    top = max((v for _, v in rows), default=0) or 1
    parts = [
        f'<svg class="chart" id="{chart_id}" width="{W}" height="{height}" '
        f'viewBox="0 0 {W} {height}" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'aria-label="{escape(title)}">',
        f'<rect x="0" y="0" width="{W}" height="{height}" fill="#ffffff"/>',
    ]
    for n, (label, value) in enumerate(rows):
        y = 10 + 22 * n
        width = (W - 320) * (value / top)
        parts.append(f'<text x="4" y="{y + 13}" font-size="12">{escape(label[:40])}</text>')
        parts.append(
            f'<rect class="bar" x="280" y="{y}" width="{width:.1f}" height="16" '
            f'fill="{COLOURS[n % len(COLOURS)]}"/>'
        )
        parts.append(f'<text x="{284 + width:.1f}" y="{y + 13}" font-size="12">{value:g}</text>')
    parts.append("</svg>")
    return "".join(parts)


def render_stats(report: dict[str, list[dict[str, Any]]]) -> str:
    """The fleet view: bars for crashes by label and by service, then every section."""
    by_label = [(str(r["label"]), float(r["incidents"])) for r in report["crashes_by_label"]]
    by_service = [
        (f"{r['host']}/{r['unit']}", float(r["incidents"])) for r in report["crashes_by_service"]
    ]
    tables = []
    for section, rows in report.items():
        tables.append(f"<h2>{escape(section.replace('_', ' '))}</h2>")
        if not rows:
            tables.append("<p>none</p>")
            continue
        head = "".join(f"<th>{escape(str(c))}</th>" for c in rows[0])
        body = "".join(
            "<tr>" + "".join(f"<td>{escape(str(v))}</td>" for v in r.values()) + "</tr>"
            for r in rows
        )
        tables.append(f"<table><tr>{head}</tr>{body}</table>")
    return "".join(
        [
            '<!doctype html><html lang="en"><head><meta charset="utf-8">',
            "<title>advisor: fleet</title><style>body{font-family:sans-serif;margin:2em;"
            "max-width:960px}td,th{border:1px solid #ccc;padding:2px 6px}"
            "table{border-collapse:collapse}</style></head><body><h1>Crashes across the fleet</h1>",
            "<h2>By label</h2>",
            bar_chart(by_label or [("none", 0)], "by-label", "by label"),
            "<h2>By service</h2>",
            bar_chart(by_service or [("none", 0)], "by-service", "by service"),
            *tables,
            "</body></html>\n",
        ]
    )
