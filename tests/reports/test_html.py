"""The HTML post-mortem and fleet page, rendered in real headless Chromium: the vendored
plotly.js drew the charts (one panel per GPU, times on the axis, the labels in full, every
failure line and phase band, later actions at the axis' edge), the pages ask the network for
nothing (Chromium's every request goes to a recording proxy on 127.0.0.1, which must see
none), hostile text is shown as text, and the screenshots are kept in the test's folder."""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from click.testing import CliRunner

from advisor.cli.main import cli
from advisor.core.statuses import ActionStatus
from advisor.core.timefmt import parse_iso_us
from advisor.reports import timeline
from advisor.reports.charts import plotly_js
from advisor.reports.html import render, render_stats
from tests.conftest import run_advisor
from tests.reports.seeded import UNIT, seeded

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium is needed (Debian package chromium; .ci/run installs it)",
)
# Every request a page could make leaves through the proxy; Chromium's own background
# traffic is switched off, and loopback is not exempt ("<-loopback>").
QUIET = (
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--no-first-run",
    "--no-default-browser-check",
    "--proxy-bypass-list=<-loopback>",
    "--disable-features=NetworkTimeServiceQuerying",
)
# What Chromium itself asks for whatever the page (updates, sign-in, time): not the page's.
BROWSER_OWN = re.compile(r"^(?:CONNECT |[A-Z]+ https?://)[^/:]*\.(?:google|googleapis)\.com[:/]")
HOSTILE = '<script>document.title="pwned"</script><img src="http://127.0.0.1:9/x.png">'


class _Recorder(BaseHTTPRequestHandler):
    seen: ClassVar[list[str]] = []

    def _record(self) -> None:
        self.seen.append(f"{self.command} {self.path}")
        self.send_error(404)

    do_GET = do_POST = do_HEAD = do_CONNECT = _record

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def proxy() -> Iterator[tuple[str, list[str]]]:
    """A real HTTP proxy on 127.0.0.1 that records each request and answers 404."""
    seen: ClassVar[list[str]] = []
    handler = type("Recorder", (_Recorder,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def _chromium(proxy: str, *args: str) -> str:
    assert CHROMIUM is not None
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--virtual-time-budget=15000",
            f"--proxy-server=http://{proxy}",
            *QUIET,
            *args,
        ],
        capture_output=True,
        timeout=180,
        check=True,
    )
    return done.stdout.decode()


def _page_and_shot(proxy: tuple[str, list[str]], page: Path, size: str) -> str:
    """The DOM after the page's scripts ran (their source left out), with a screenshot and
    the DOM kept beside the page; the proxy must have seen no request of the page's."""
    address, seen = proxy
    dom = _chromium(address, "--dump-dom", page.as_uri())
    shot = page.with_suffix(".png")
    _chromium(address, f"--screenshot={shot}", f"--window-size={size}", page.as_uri())
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 30_000  # a blank page is a few kB
    assert [r for r in seen if not BROWSER_OWN.match(r)] == []
    page.with_suffix(".dom.html").write_text(dom)  # kept beside the screenshot
    return re.sub(r"<script\b[^>]*>.*?</script>", "<script></script>", dom, flags=re.S)


def _self_contained(html: str) -> None:
    """No element loads anything from elsewhere, and the policy forbids it anyway."""
    assert not re.search(r"""<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=""", html)
    assert "Content-Security-Policy" in html and "default-src 'none'" in html


def _subplots(dom: str) -> dict[str, str]:
    """Each plotly subplot's id (`xy`, `x2y2`, …) → its part of the DOM."""
    parts = re.split(r'<g class="subplot ([a-z0-9]+)">', dom)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def _texts(dom: str, kind: str) -> list[str]:
    """The tick labels of plotly's `xtick` or `ytick` groups."""
    return re.findall(rf'<g class="{kind}"><text[^>]*>([^<]*)</text>', dom)


def _times(dom: str) -> list[str]:
    """The time tick labels of every x axis (plotly's `xtick`, `x2tick`, …)."""
    return [
        t
        for t in re.findall(r'<g class="x\d*tick"><text[^>]*>([^<]*)</text>', dom)
        if re.fullmatch(r"\d\d:\d\d:\d\d", t)
    ]


@needs_chromium
def test_the_post_mortem_draws_one_panel_per_gpu_on_a_time_axis(
    sqlite_url: str,
    seed_journal: Path,
    seed_csv: Path,
    tmp_path: Path,
    proxy: tuple[str, list[str]],
) -> None:
    seeded(sqlite_url, seed_journal, seed_csv)
    page = tmp_path / "post-mortem.html"
    result = CliRunner().invoke(
        cli, ["explain", UNIT, "--format", "html", "--out", str(page), "--db", sqlite_url]
    )
    assert result.exit_code == 0, result.output
    html = page.read_text()
    _self_contained(html)
    # plotly.js's basic bundle, inlined once: the page is a quarter of the full bundle's size
    assert html.count(plotly_js()) == 1 and "plotly.js (basic - minified)" in html
    assert page.stat().st_size < 1_500_000
    dom = _page_and_shot(proxy, page, "1200,1800")
    assert dom.count('class="plotly-graph-div js-plotly-plot"') == 1
    subplots = _subplots(dom)
    # the timeline, then eight GPUs: each its own panel, each with its own line of samples
    assert list(subplots) == ["xy", *(f"x{n}y{n}" for n in range(2, 10))]
    for n in range(8):
        assert f'data-unformatted="gpu{n}&lt;br&gt;GiB of 96"' in dom
        line = re.search(r'<path class="js-line" d="([^"]+)"', subplots[f"x{n + 2}y{n + 2}"])
        # plotly draws a flat stretch as one segment: the four GPUs the model used rise
        # and fall, the four idle ones are one flat line at 0
        assert line is not None and line.group(1).count("L") > (10 if n < 4 else 0), n
    # above the timeline and below the last GPU: the same times
    times = _times(dom)
    assert (
        len(times) >= 8
        and "00:35:00" in times
        and times[: len(times) // 2] == times[len(times) // 2 :]
    )
    rows = _texts(dom, "ytick")
    for label in (
        "stop timed out: SIGKILL",
        "phase kv_cache_allocation",
        "phase sampler_warmup",
        "failed",
        "main process exited",
    ):
        assert label in rows, label
    gib = re.findall(r'<g class="y(\d+)tick"><text[^>]*>([^<]*)</text>', dom)
    for axis in range(2, 10):  # GiB on every GPU's own axis
        assert {"0", "50"} <= {t for a, t in gib if a == str(axis)}, axis
    # the failures: red dashed lines through every panel (two `failed`, one `stop timed out`
    # through 9 panels); the 8 phases shaded behind each of the 8 GPUs; nothing else
    shapes = re.findall(r'<path data-index="\d+"[^>]*style="([^"]*)"', dom)
    dashed = [s for s in shapes if re.search(r"stroke: rgb\(214, 39, 40\).*stroke-dasharray", s)]
    bands = [s for s in shapes if "opacity: 0.1;" in s and "stroke-width: 0px" in s]
    assert (len(dashed), len(bands), len(shapes)) == (3 * 9, 8 * 8, 3 * 9 + 8 * 8)
    assert "wedged_stop" in dom and "No GPU samples" not in dom


# Appended to a copy of the page: hover the highest point of one trace, as a mouse would.
HOVER = (
    '<script>window.addEventListener("load", function () {{'
    'var d = document.getElementById("incident-0");'
    'var n = d.data.findIndex(function (t) {{ return t.name === "{name}"; }});'
    "var y = d.data[n].y.map(function (v) {{ return typeof v === 'number' ? v : 0; }});"
    "Plotly.Fx.hover(d, [{{curveNumber: n, pointNumber: y.indexOf(Math.max.apply(null, y))}}],"
    ' "{subplot}");}});</script>'
)


def _hover_text(proxy: tuple[str, list[str]], page: Path, name: str, subplot: str) -> list[str]:
    """The lines of the tooltip plotly draws when the pointer is on trace `name`."""
    hovered = page.with_name(f"{page.stem}-hover-{subplot}.html")
    hover = HOVER.format(name=name, subplot=subplot)
    hovered.write_text(page.read_text().replace("</body>", hover + "</body>"))
    dom = _page_and_shot(proxy, hovered, "1200,1800")
    box = re.search(r'<g class="hovertext".*?</g>', dom, flags=re.S)
    assert box is not None, name
    return re.findall(r'<tspan class="line"[^>]*>([^<]*)</tspan>', box.group(0))


@needs_chromium
def test_hovering_shows_the_time_and_the_value(
    sqlite_url: str,
    seed_journal: Path,
    seed_csv: Path,
    tmp_path: Path,
    proxy: tuple[str, list[str]],
) -> None:
    seeded(sqlite_url, seed_journal, seed_csv)
    page = tmp_path / "post-mortem.html"
    argv = ["explain", UNIT, "--format", "html", "--out", str(page), "--db", sqlite_url]
    assert CliRunner().invoke(cli, argv).exit_code == 0
    gpu, time, value = _hover_text(proxy, page, "gpu0", "x2y2")
    assert gpu == "gpu0" and re.fullmatch(r"00:3\d:\d\d\.\d{3}", time)
    assert re.fullmatch(r"\d+\.\d GiB of 96 GiB", value) and float(value.split()[0]) > 80
    what, when = _hover_text(proxy, page, "stop timed out: SIGKILL", "xy")
    assert what == "stop timed out: SIGKILL" and when == "00:35:17.000"


@needs_chromium
def test_without_gpu_samples_only_the_timeline_is_drawn(
    sqlite_url: str, seed_journal: Path, tmp_path: Path, proxy: tuple[str, list[str]]
) -> None:
    seeded(sqlite_url, seed_journal, None)
    page = tmp_path / "post-mortem.html"
    result = CliRunner().invoke(
        cli, ["explain", UNIT, "--format", "html", "--out", str(page), "--db", sqlite_url]
    )
    assert result.exit_code == 0, result.output
    dom = _page_and_shot(proxy, page, "1200,900")
    assert list(_subplots(dom)) == ["xy"] and 'id="no-gpu-samples"' in dom
    assert "stop timed out: SIGKILL" in _texts(dom, "ytick")
    # the axis spans the timeline's own times (00:35), not an empty frame around them
    times = _times(dom)
    assert times and all(t.startswith("00:3") for t in times)


def _bar_lengths(dom: str) -> list[float]:
    return [
        float(w) for w in re.findall(r'<g class="point"><path d="M0,[\d.]+V[\d.]+H([\d.]+)V', dom)
    ]


def _plot_widths(dom: str) -> list[float]:
    return [
        float(w)
        for w in re.findall(
            r'<rect class="nsewdrag drag" data-subplot="xy"[^>]*width="([\d.]+)"', dom
        )
    ]


@needs_chromium
def test_the_fleet_page_draws_scaled_bars_and_a_weekly_trend(
    sqlite_url: str,
    seed_journal: Path,
    seed_csv: Path,
    tmp_path: Path,
    proxy: tuple[str, list[str]],
) -> None:
    seeded(sqlite_url, seed_journal, seed_csv)
    page = tmp_path / "fleet.html"
    done = run_advisor("stats", "--format", "html", "--out", str(page), "--db", sqlite_url)
    assert done.returncode == 0, done.stderr
    _self_contained(page.read_text())
    dom = _page_and_shot(proxy, page, "1200,1600")
    assert dom.count('class="plotly-graph-div js-plotly-plot"') == 3
    for div in ("crashes-by-label", "crashes-by-service", "crashes-by-week"):
        assert f'id="{div}"' in dom
    # 2 labels and 1 service, one incident and one failed run each: a count of 1 is a bar of
    # at most a fifth of the plot, not its whole width
    bars, widths = _bar_lengths(dom), _plot_widths(dom)
    assert len(bars) == 2 * 2 + 2 * 1 and all(b > 0 for b in bars)
    # counts against an axis from 0 to 5: by label 1 each (a fifth of the plot), by service 2
    assert [round(b / widths[0], 2) for b in bars[:4]] == [0.2] * 4
    assert [round(b / widths[1], 2) for b in bars[4:]] == [0.4] * 2
    assert "sampler_warmup_oom" in dom and "gpu-node-07/vllm-minimax-m25.service" in dom
    assert "2026-W08" in _texts(dom, "xtick")
    headers = re.findall(r"<th>([^<]*)</th>", dom)
    for human in (
        "mean",
        "90th percentile",
        "tightest 10 % of runs",
        "kills",
        "measured (the run held GPU memory)",
    ):
        assert human in headers, human
    assert not {"mean_s", "p90_s", "p10", "p50", "p95_s"} & set(headers)
    assert "4.9 s" in dom  # the seed's kill: its GPUs free 4.9 s later
    assert 'id="crashes_by_week"' not in dom  # a trend chart, not a table


@needs_chromium
def test_hostile_text_is_drawn_as_text(tmp_path: Path, proxy: tuple[str, list[str]]) -> None:
    """A label or service name with markup: the charts and tables show its characters; no
    script runs, nothing is fetched."""
    report: dict[str, list[dict[str, Any]]] = {
        "crashes_by_label": [{"label": HOSTILE, "incidents": 1, "failed_runs": 2}],
        "crashes_by_service": [{"host": "h<b>", "unit": HOSTILE, "incidents": 1, "failed_runs": 2}],
        "crashes_by_week": [{"week": "2026-W08", "incidents": 1}],
        "gpu_release_after_kill": [{"host": HOSTILE, "kills": 1, "p50_s": 4.9, "p95_s": 4.9}],
    }
    page = tmp_path / "hostile-fleet.html"
    page.write_text(render_stats(report))
    post_mortem = tmp_path / "hostile-post-mortem.html"
    post_mortem.write_text(render(_hostile_incident(), {"0": [(1_000_000, 0.5), (2_000_000, 0.9)]}))
    for path in (page, post_mortem):
        html = path.read_text()
        _self_contained(html)
        dom = _page_and_shot(proxy, path, "1000,900")
        title = re.search(r"<title>([^<]*)</title>", dom)
        assert title is not None and title.group(1) != "pwned"  # no script of theirs ran
        assert "<img" not in dom and "<b>" not in dom
        # drawn by plotly (a tick label) as the characters it holds
        assert any('&lt;script&gt;document.title="pwned"' in t for t in _texts(dom, "ytick"))


def _hostile_incident() -> dict[str, Any]:
    return {
        "incident": {
            "incident_id": "i",
            "short_id": HOSTILE,
            "host": "h",
            "unit": "u.service",
            "label": HOSTILE,
            "confidence": 0.5,
            "phase": HOSTILE,
            "runs": 1,
            "status": "open",
        },
        "opened": "1970-01-01T00:00:01.000Z",
        "config": {"flag": HOSTILE},
        "facts": {},
        "evidence": [{"time": None, "seq": 1, "text": HOSTILE}],
        "timeline": [
            timeline.phase(1_000_000, "r", HOSTILE),
            timeline.lifecycle(2_000_000, "r", "failed"),
        ],
        "plan": [],
        "gpu_memory": {"0": {"peak_fraction": 0.9, "total_gib": 80.0, "sparkline": "▁█"}},
        "similar": [],
    }


@needs_chromium
def test_actions_after_the_incident_are_arrows_at_the_axis_edge(
    tmp_path: Path, proxy: tuple[str, list[str]]
) -> None:
    """An action approved 17 minutes after the failure: the axis keeps the incident's 20
    seconds, and the action's row ends in an arrow with its time beside it."""
    report = _hostile_incident()
    report["incident"] |= {"short_id": "0123456789ab", "label": "wedged_stop", "phase": None}
    report["evidence"], report["config"] = [], {}
    t0 = 1_771_633_980_000_000  # 00:33:00
    report["timeline"] = [
        timeline.phase(t0, "r", "weights_loading"),
        timeline.lifecycle(t0 + 10_000_000, "r", "failed"),
        timeline.action(t0 + 12_000_000, "kill", ActionStatus.SUCCEEDED),
        timeline.action(
            parse_iso_us("2026-02-21T00:50:07.250Z"), "restart", ActionStatus.SUCCEEDED
        ),
    ]
    page = tmp_path / "late-post-mortem.html"
    page.write_text(render(report, {"0": [(t0 + n * 1_000_000, 0.5) for n in range(20)]}))
    dom = _page_and_shot(proxy, page, "1200,900")
    times = _times(dom)
    assert times and all(t.startswith("00:33:") for t in times), times
    assert "action restart succeeded" in _texts(dom, "ytick")
    assert re.search(r'<g class="textpoint"[^>]*><text[^>]*>at 00:50:07 →</text>', dom)
    assert 'id="late-actions"' not in dom  # within the hour: drawn, at the edge


@needs_chromium
def test_the_proxy_sees_what_a_page_fetches(tmp_path: Path, proxy: tuple[str, list[str]]) -> None:
    """The control for the tests above: a page that loads an image from elsewhere is seen."""
    page = tmp_path / "leaky.html"
    page.write_text('<!doctype html><img src="http://leaky.example/x.png">')
    _chromium(proxy[0], "--dump-dom", page.as_uri())
    assert [r for r in proxy[1] if not BROWSER_OWN.match(r)] == ["GET http://leaky.example/x.png"]
