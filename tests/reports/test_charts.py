"""The figures of `advisor.reports.charts` as data: phases cut per run, weeks filled in,
count axes that a count of 1 does not fill, hostile text escaped, fragments that carry
plotly.js only when asked and never a CDN."""

from __future__ import annotations

from datetime import date
from typing import Any

from advisor.reports.chart_base import count_range, label
from advisor.reports.charts import incident_figures, stats_figures, to_html_fragment
from advisor.reports.html import render
from advisor.reports.incident_charts import Event, Phase, drawn, events_of, phases_of
from advisor.reports.stats_charts import weekly_counts


def test_a_phase_lasts_until_the_next_phase_or_end_of_its_own_run() -> None:
    events = [
        Event(1, "phase weights_loading", "a"),
        Event(2, "start requested", "b"),
        Event(3, "phase sampler_warmup", "a"),
        Event(5, "phase weights_loading", "b"),
        Event(7, "main process exited", "a"),
        Event(9, "failed", "b"),
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
            {"time": "2026-02-21T00:33:00.000Z", "what": "phase weights_loading", "run": "r"},
            {"time": "2026-02-21T00:33:10.000Z", "what": "failed", "run": "r"},
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
            {"time": "2026-02-21T00:33:00.000Z", "what": "started", "run": "r"},
            {"time": "2026-02-21T00:33:10.000Z", "what": "failed", "run": "r"},
            {"time": "2026-02-21T00:40:00.000Z", "what": "action kill succeeded", "run": None},
            {"time": "2026-12-02T13:00:00.000Z", "what": "action restart succeeded", "run": None},
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
