"""The HTML post-mortem and fleet page, rendered in headless Chromium: the charts drew, the
labels are there, and a screenshot is kept in the test's folder."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from advisor.cli.main import cli

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium is needed (Debian package chromium; .ci/run installs it)",
)
UNIT = "vllm-minimax-m25.service"


def _chromium(*args: str) -> subprocess.CompletedProcess[bytes]:
    assert CHROMIUM is not None
    return subprocess.run(
        [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
        capture_output=True,
        timeout=120,
        check=True,
    )


def _store(sqlite_url: str, seed_journal: Path, seed_csv: Path) -> None:
    runner = CliRunner()
    for argv in (
        ["ingest", "nvidia-smi", str(seed_csv), "--host", "gpu-node-07"],
        ["ingest", "journal", "--file", str(seed_journal)],
    ):
        assert runner.invoke(cli, [*argv, "--db", sqlite_url]).exit_code == 0


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


@needs_chromium
def test_the_post_mortem_page_draws_its_charts(
    sqlite_url: str, seed_journal: Path, seed_csv: Path, tmp_path: Path
) -> None:
    _store(sqlite_url, seed_journal, seed_csv)
    page = tmp_path / "post-mortem.html"
    result = CliRunner().invoke(
        cli, ["explain", UNIT, "--format", "html", "--out", str(page), "--db", sqlite_url]
    )
    assert result.exit_code == 0, result.output
    html = page.read_text()
    assert (
        "http://" not in html.replace("http://www.w3.org/2000/svg", "") and "<script" not in html
    )  # self-contained: nothing fetched, nothing run
    dom = _chromium("--dump-dom", page.as_uri()).stdout.decode()
    paths = re.findall(r'<path class="gpu-line" d="([^"]+)"', dom)
    assert len(paths) == 8 and all(p.count("L") > 50 for p in paths)
    assert len(re.findall(r'<circle class="dot"', dom)) >= 8
    for label in (
        "GPU memory per GPU",
        "Restart timeline",
        "gpu0",
        "stop timed out: SIGKILL",
        "wedged_stop",
        "phase kv_cache_allocation",
    ):
        assert label in dom, label
    shot = tmp_path / "post-mortem.png"
    _chromium(f"--screenshot={shot}", "--window-size=1000,1400", page.as_uri())
    assert _png_size(shot) == (1000, 1400)
    assert shot.stat().st_size > 40_000  # a blank page compresses to a few kB


@needs_chromium
def test_the_fleet_page_draws_its_bars(
    sqlite_url: str, seed_journal: Path, seed_csv: Path, tmp_path: Path
) -> None:
    _store(sqlite_url, seed_journal, seed_csv)
    page = tmp_path / "fleet.html"
    result = CliRunner().invoke(
        cli, ["stats", "--format", "html", "--out", str(page), "--db", sqlite_url]
    )
    assert result.exit_code == 0, result.output
    dom = _chromium("--dump-dom", page.as_uri()).stdout.decode()
    widths = [
        float(w)
        for w in re.findall(
            r'<rect class="bar" x="280" y="[\d.]+" '
            r'width="([\d.]+)"',
            dom,
        )
    ]
    assert len(widths) == 3 and all(w > 0 for w in widths)  # 2 labels, 1 service
    assert "sampler_warmup_oom" in dom and "gpu-node-07/vllm-minimax-m25.service" in dom
    shot = tmp_path / "fleet.png"
    _chromium(f"--screenshot={shot}", "--window-size=1000,900", page.as_uri())
    assert shot.stat().st_size > 10_000
