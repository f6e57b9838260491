"""The figures of `advisor.reports.charts` as data: phases cut per run, weeks filled in,
count axes that a count of 1 does not fill, hostile text escaped, fragments that carry
plotly.js only when asked and never a CDN; the marks set as shapes in one go, actions after the
incident's window at the axis' edge, the vendored plotly.js the one its README names."""

from __future__ import annotations

import hashlib
from datetime import date, datetime
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs_version

import advisor.reports
from advisor.core.statuses import ActionStatus
from advisor.core.timefmt import parse_iso_us
from advisor.reports import timeline
from advisor.reports.chart_base import ACTION, COLOURS, FAILURE, HEALTHY, count_range, label
from advisor.reports.charts import plotly_js, plotly_js_version, script_tag, to_html_fragment
from advisor.reports.html import render
from advisor.reports.incident_charts import Phase, drawn, events_of, incident_figures, phases_of
from advisor.reports.stats_charts import stats_figures, weekly_counts
from advisor.reports.timeline import TimelineEntry

STATIC = Path(advisor.reports.__file__).parent / "static"
T0 = 1_771_633_980_000_000  # 2026-02-21T00:33:00Z in µs
SUCCEEDED = ActionStatus.SUCCEEDED
at = parse_iso_us


def test_a_phase_lasts_until_the_next_phase_or_end_of_its_own_run() -> None:
    events = [
        timeline.phase(1, "a", "weights_loading"),
        timeline.lifecycle(2, "b", "start"),
        timeline.phase(3, "a", "sampler_warmup"),
        timeline.phase(5, "b", "weights_loading"),
        timeline.lifecycle(7, "a", "exit"),
        timeline.lifecycle(9, "b", "failed"),
    ]
    assert phases_of(events) == [
        Phase("weights_loading", 1, 3),
        Phase("sampler_warmup", 3, 7),
        Phase("weights_loading", 5, 9),
    ]


def test_weeks_without_a_crash_are_zero_and_the_axis_starts_at_zero() -> None:
    rows = [{"week": "2026-W52", "incidents": 2}, {"week": "2027-W02", "incidents": 1}]
    assert weekly_counts(rows) == [
        (date(2026, 12, 21), 2),
        (date(2026, 12, 28), 0),
        (date(2027, 1, 4), 0),
        (date(2027, 1, 11), 1),
    ]
    assert count_range(1) == [0, 5.0] and count_range(40) == [0, 44]


def test_hostile_text_reaches_plotly_escaped_and_shortened_at_a_word() -> None:
    assert label("<b>x</b> & \x1b[31m") == "&lt;b&gt;x&lt;/b&gt; &amp; \\x1b[31m"
    long = label("word " * 60, limit=40)
    assert long.endswith("word…") and len(long) <= 40


def test_fragments_carry_plotly_js_only_when_asked() -> None:
    report = {
        "crashes_by_label": [{"label": "<script>", "incidents": 1, "failed_runs": 1}],
        "crashes_by_service": [],
        "crashes_by_week": [{"week": "2026-W08", "incidents": 1}],
    }
    figures = stats_figures(report)
    assert list(figures) == ["crashes_by_label", "crashes_by_service", "crashes_by_week"]
    bare = to_html_fragment(figures["crashes_by_label"], div_id="by-label")
    # one script, plotly's own, drawing into the div; the label inside it escaped
    assert 'id="by-label"' in bare and bare.count("<script") == bare.count("</script>") == 1
    assert '"y":["&lt;script&gt;"]' in bare
    full = to_html_fragment(figures["crashes_by_label"], include_js=True)
    assert len(full) > len(bare) + 1_000_000 and "src=" not in full.split("</script>")[0][:200]


def test_one_panel_per_gpu_and_none_without_samples() -> None:
    report = {
        "timeline": [
            timeline.phase(T0, "r", "weights_loading"),
            timeline.lifecycle(T0 + 10_000_000, "r", "failed"),
        ],
        "gpu_memory": {str(g): {"total_gib": 96.0} for g in range(8)},
    }
    samples = {str(g): [(1_771_634_000_000_000, 0.5)] for g in range(8)}
    (fig,) = incident_figures(report, samples)
    assert len(fig.data) == 2 + 8  # the phase row, the failure row, eight GPUs
    assert fig.layout.yaxis9.title.text == "gpu7<br>GiB of 96"
    (bare,) = incident_figures(report, {})
    assert len(bare.data) == 2 and "yaxis2" not in bare.to_plotly_json()["layout"]


def test_actions_long_after_an_old_log_are_left_to_the_text() -> None:
    """An old log diagnosed and acted on today: the axis keeps the incident's own span."""
    report: dict[str, Any] = {
        "incident": {
            "incident_id": "i",
            "short_id": "0123456789ab",
            "host": "h",
            "unit": "u.service",
            "label": "wedged_stop",
            "confidence": 0.9,
            "phase": None,
            "runs": 1,
            "status": "open",
        },
        "opened": "2026-02-21T00:33:10.000Z",
        "config": {},
        "facts": {},
        "evidence": [],
        "timeline": [
            timeline.lifecycle(T0, "r", "started"),
            timeline.lifecycle(T0 + 10_000_000, "r", "failed"),
            timeline.action(at("2026-02-21T00:40:00.000Z"), "kill", SUCCEEDED),
            timeline.action(at("2026-12-02T13:00:00.000Z"), "restart", SUCCEEDED),
        ],
        "plan": [],
        "gpu_memory": {},
        "similar": [],
    }
    kept, late = drawn(events_of(report))
    assert [e.what for e in kept][-1] == "action kill succeeded"
    assert [e.what for e in late] == ["action restart succeeded"]
    (fig,) = incident_figures(report, {})
    assert {str(x)[:7] for trace in fig.data for x in trace.x if x is not None} == {"2026-02"}
    page = render(report, {})
    assert 'id="late-actions"' in page and "1 action(s) decided more than an hour" in page
    assert 'id="late-actions"' not in render({**report, "timeline": report["timeline"][:3]}, {})


def _incident(entries: list[TimelineEntry]) -> dict[str, Any]:
    return {
        "timeline": entries,
        "gpu_memory": {str(g): {"total_gib": 96.0} for g in range(2)},
    }


INCIDENT = [
    timeline.phase(at("2026-02-21T00:33:00.000Z"), "r", "weights_loading"),
    timeline.phase(at("2026-02-21T00:33:05.000Z"), "r", "sampler_warmup"),
    timeline.lifecycle(at("2026-02-21T00:33:10.000Z"), "r", "failed"),
    timeline.action(at("2026-02-21T00:33:11.000Z"), "kill", SUCCEEDED),
]


def test_the_marks_are_the_shapes_add_vline_and_add_vrect_would_add() -> None:
    """One layout update with the shapes as dicts draws what one `add_vline` per failure or
    action (through every panel) and one `add_vrect` per phase and GPU panel drew."""
    samples = {g: [(T0 + n * 1_000_000, 0.1 * n) for n in range(15)] for g in ("0", "1")}
    (fig,) = incident_figures(_incident(INCIDENT), samples)
    ours = fig.to_plotly_json()["layout"]["shapes"]
    # the same figure marked the slow way, as before
    slow = go.Figure(fig)
    slow.layout.shapes = ()
    for t, dash, colour, width in (
        ("2026-02-21 00:33:10", "dash", FAILURE, 1.5),
        ("2026-02-21 00:33:11", "dot", ACTION, 1),
    ):
        x = datetime.fromisoformat(t)
        slow.add_vline(x=x, line={"color": colour, "dash": dash, "width": width})
    for start, end, colour in (
        ("00:33:00", "00:33:05", COLOURS[0]),
        ("00:33:05", "00:33:10", COLOURS[1]),
    ):
        for row in (2, 3):
            slow.add_vrect(
                x0=datetime.fromisoformat(f"2026-02-21 {start}"),
                x1=datetime.fromisoformat(f"2026-02-21 {end}"),
                fillcolor=colour,
                opacity=0.10,
                line_width=0,
                layer="below",
                row=row,
                col=1,
            )
    assert ours == slow.to_plotly_json()["layout"]["shapes"]
    assert len(ours) == 2 * 3 + 2 * 2  # two lines through three panels, two phases on two GPUs
    # the first failure line is in the timeline, the phase bands only behind the GPUs
    assert (ours[0]["xref"], ours[0]["yref"]) == ("x", "y domain")
    assert {(s["xref"], s["yref"]) for s in ours if s["type"] == "rect"} == {
        ("x2", "y2 domain"),
        ("x3", "y3 domain"),
    }


def test_actions_after_the_window_are_arrows_at_its_edge() -> None:
    """An action decided after the incident's last line and sample (a person approved it
    later) does not stretch the time axis: it is an arrow at the right edge in its own row,
    its time written beside it, and no line is drawn for it."""
    report = _incident(
        [*INCIDENT, timeline.action(at("2026-02-21T00:50:07.250Z"), "restart", SUCCEEDED)]
    )
    samples = {"0": [(T0 + n * 1_000_000, 0.5) for n in range(20)]}  # to 00:33:19
    (fig,) = incident_figures(report, samples)
    xs = [x for trace in fig.data for x in trace.x if x is not None]
    assert max(xs) == datetime(2026, 2, 21, 0, 33, 19)  # the last sample: the window's end
    (arrow,) = [t for t in fig.data if t.name == "action restart succeeded"]
    assert list(arrow.x) == [datetime(2026, 2, 21, 0, 33, 19)] and arrow.marker.symbol == (
        "arrow-right"
    )
    assert list(arrow.text) == ["at 00:50:07 →"]
    late = "at 2026-02-21 00:50:07.250 UTC, after the incident's window"
    assert list(arrow.customdata) == [late]
    lines = [s.x0 for s in fig.layout.shapes if s.type == "line"]
    assert lines and all(x <= "2026-02-21T00:33:19" for x in map(str, lines))
    # the action within the window keeps its diamond and its line; two late ones of a kind
    # are one arrow; on another day the date is written too
    assert [t.name for t in fig.data].count("action kill succeeded") == 1
    twice = [
        timeline.action(at("2026-02-21T00:40:00.000Z"), "restart", SUCCEEDED),
        timeline.action(at("2026-02-21T01:30:00.000Z"), "restart", SUCCEEDED),
    ]
    (fig,) = incident_figures(_incident([*INCIDENT, *twice]), {})
    (arrow,) = [t for t in fig.data if t.name == "action restart succeeded"]
    assert list(arrow.text) == ["2×, last at 01:30:00 →"]
    # without samples the window ends 30 s after the last line (the kill, 1 s after the
    # failure, keeps its place); the arrow is at the last time drawn
    assert list(arrow.x) == [datetime(2026, 2, 21, 0, 33, 11)]
    midnight = [
        timeline.lifecycle(at("2026-02-21T23:59:50.000Z"), "r", "failed"),
        timeline.action(at("2026-02-22T00:05:00.000Z"), "restart", SUCCEEDED),
    ]
    (fig,) = incident_figures(_incident(midnight), {})
    assert [list(t.text) for t in fig.data if t.text] == [["at 2026-02-22 00:05:00 →"]]


def test_an_action_is_coloured_by_its_status_not_its_words() -> None:
    """The rows are told apart by kind and status: `reset_failed` in a step's name does not
    make it a failure (it did while the chart read the sentence the text prints)."""
    entries = [
        *INCIDENT,
        timeline.action(T0 + 12_000_000, "reset_failed", ActionStatus.SKIPPED),
        timeline.action(T0 + 13_000_000, "restart", ActionStatus.FAILED),
    ]
    (fig,) = incident_figures(_incident(entries), {})
    colours = {t.name: t.marker.color for t in fig.data if t.mode == "markers"}
    assert colours == {
        "failed": FAILURE,
        "action kill succeeded": HEALTHY,
        "action reset_failed skipped": ACTION,
        "action restart failed": FAILURE,
    }


def test_the_vendored_plotly_js_is_the_one_its_readme_names() -> None:
    """The bundle inlined and served is the file the README names (sha256, version), and its
    major version is the one the installed plotly writes figures for."""
    text = plotly_js()
    readme = (STATIC / "README.md").read_text(encoding="utf-8")
    sha = hashlib.sha256((STATIC / "plotly-basic.min.js").read_bytes()).hexdigest()
    assert f"`{sha}`" in readme and f"version {plotly_js_version()}" in readme
    assert text.startswith("/**\n* plotly.js (basic - minified) v") and "MIT" in text[:300]
    assert plotly_js_version().split(".")[0] == get_plotlyjs_version().split(".")[0]
    assert len(text.encode()) < 1_300_000  # not the full bundle (4.6 MiB)
    assert script_tag().count(text) == 1


def test_every_figure_is_written_with_plotly_white_and_built_without_a_template() -> None:
    """Figures are made without a template (building one is most of a page's chart time);
    the look is added as they are written: the JSON plotly.js reads holds `plotly_white`
    exactly as plotly's own template object writes it."""
    import json

    import plotly.io as pio

    from advisor.reports.chart_base import finished

    report = {
        "crashes_by_label": [{"label": "sampler", "incidents": 2, "failed_runs": 3}],
        "crashes_by_service": [],
        "crashes_by_week": [{"week": "2026-W08", "incidents": 1}],
    }
    white = json.loads(pio.to_json(go.Figure(layout={"template": "plotly_white"})))
    for fig in stats_figures(report).values():
        assert "layout" not in fig.layout.template.to_plotly_json()  # no look built in
        assert finished(fig)["layout"]["template"] == white["layout"]["template"]
    fragment = to_html_fragment(stats_figures(report)["crashes_by_week"])
    assert '"template":{' in fragment and '"colorway"' in fragment
