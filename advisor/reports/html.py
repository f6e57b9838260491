"""The post-mortem and the fleet figures as self-contained HTML pages: plotly.js inlined once
(no CDN, no network: the page's Content-Security-Policy lets no request out), the charts of
`advisor.reports.charts`, then the text. Every text from the store is escaped here or by
`chart_base.label`."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any, Final

from advisor.reports.charts import CSP, script_tag, to_html_fragment
from advisor.reports.incident_charts import drawn, events_of, incident_figures
from advisor.reports.stats_charts import stats_figures
from advisor.reports.stats_columns import cell, header, heading
from advisor.reports.writeup import ReportIncident

STYLE: Final = (
    "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:2em auto;"
    "max-width:1100px;padding:0 1em;color:#222}"
    "pre{white-space:pre-wrap;background:#f6f6f6;padding:1em}"
    "h2{border-bottom:1px solid #ccc;margin-top:1.6em}"
    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 10px}"
    "th{background:#f3f3f3;text-align:left}td.n{text-align:right}"
    ".note{color:#555;font-style:italic}"
)


def _page(title: str, body: Sequence[str]) -> str:
    """A page: the policy that keeps it offline, plotly.js, then `body` (already escaped)."""
    return "".join(
        [
            '<!doctype html><html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{escape(CSP, quote=False)}">',
            f"<title>{escape(title)}</title><style>{STYLE}</style>",
            script_tag(),
            "</head><body>",
            *body,
            "</body></html>\n",
        ]
    )


def render(report: dict[str, Any], samples: dict[str, list[tuple[int, float]]]) -> str:
    """The post-mortem page: header, the incident's figure, then the text sections."""
    from advisor.reports.writeup import operator_words, render_text

    inc: ReportIncident = report["incident"]
    title = f"{inc['host']}/{inc['unit']}: {inc['label']}"
    has_samples = any(samples.values())
    _, late = drawn(events_of(report))
    return _page(
        title,
        [
            f"<h1>{escape(title)}</h1>",
            f"<p>confidence {inc['confidence']:.2f}, failing phase "
            f"{escape(str(inc['phase']))}, {inc['runs']} failed run(s), "
            f"{escape(inc['status'])}</p>",
            f'<p id="operator-label">{escape(said)}</p>'
            if (said := operator_words(report))
            else "",
            "<h2>Timeline and GPU memory per GPU</h2>",
            ""
            if has_samples
            else '<p class="note" id="no-gpu-samples">No GPU samples in this incident\'s '
            "window: the timeline alone is drawn.</p>",
            f'<p class="note" id="late-actions">{len(late)} action(s) decided more than an '
            "hour after the log's last line are listed in the post-mortem below, not drawn.</p>"
            if late
            else "",
            *(
                to_html_fragment(fig, div_id=f"incident-{n}")
                for n, fig in enumerate(incident_figures(report, samples))
            ),
            "<h2>Post-mortem</h2>",
            f"<pre>{escape(render_text(report))}</pre>",
        ],
    )


def stats_table(section: str, rows: list[dict[str, Any]]) -> str:
    """One section's rows as a table with the names people read; "none" without rows."""
    title = f"<h2>{escape(heading(section))}</h2>"
    if not rows:
        return f'{title}<p class="none">none</p>'
    keys = list(rows[0])
    head = "".join(f"<th>{escape(header(section, k))}</th>" for k in keys)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="{"n" if isinstance(r[k], int | float) else "t"}">'
            f"{escape(cell(section, k, r[k]))}</td>"
            for k in keys
        )
        + "</tr>"
        for r in rows
    )
    return f'{title}<table id="{escape(section)}"><tr>{head}</tr>{body}</table>'


def render_stats(report: dict[str, list[dict[str, Any]]]) -> str:
    """The fleet page: the figures (by failure, by service, per week), then the other
    sections as tables."""
    figures = stats_figures(report)
    body = ["<h1>Crashes across the fleet</h1>"]
    for section, fig in figures.items():
        if report.get(section):
            body.append(to_html_fragment(fig, div_id=section.replace("_", "-")))
        else:
            body.append(stats_table(section, []))
    for section, rows in report.items():
        if section not in figures:
            body.append(stats_table(section, rows))
    return _page("advisor: fleet", body)
