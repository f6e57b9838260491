"""`advisor explain`: the post-mortem from the store, in text, Markdown and JSON."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from advisor.cli.main import cli
from advisor.execution.backends import DryRunBackend
from advisor.execution.decisions import approve
from advisor.execution.run import execute
from advisor.reports.postmortem import sparkline
from advisor.store import open_store
from tests.reports.seeded import FIRST, UNIT, seeded


def test_explain_tells_the_story_with_numbers(
    sqlite_url: str, seed_journal: Path, seed_csv: Path
) -> None:
    runner = seeded(sqlite_url, seed_journal, seed_csv)
    text = runner.invoke(cli, ["explain", UNIT, "--incident", FIRST, "--db", sqlite_url]).output
    assert text.startswith(f"gpu-node-07/{UNIT}: sampler_warmup_oom (confidence 0.9")
    for expected in (
        "2026-02-21T00:33:16.013Z  phase sampler_warmup",
        "2026-02-21T00:33:17.200Z  main process exited",
        "2026-02-21T00:33:27.299Z  restart scheduled",
        "failing phase: sampler_warmup",
        "max_num_seqs: 1024",
        "#41  (Worker_TP0 pid=227750) ERROR",
        "[proposed] set_flag --max-num-seqs 256",
        "fits: 90% × 1.17 GiB / 3.82 MiB = 281 → 256",
    ):
        assert expected in text, expected
    gpu_lines = [line for line in text.splitlines() if line.startswith("gpu") and "peak" in line]
    assert len(gpu_lines) == 8 and "peak 99%" in gpu_lines[0] and "peak 0%" in gpu_lines[7]
    first = json.loads(
        runner.invoke(
            cli, ["explain", UNIT, "--incident", FIRST, "--format", "json", "--db", sqlite_url]
        ).output
    )
    assert [(e["seq"], e["time"]) for e in first["evidence"]] == [
        (34, "2026-02-21T00:33:16.006Z"),
        (41, "2026-02-21T00:33:16.013Z"),
        (44, "2026-02-21T00:33:17.200Z"),
        (45, "2026-02-21T00:33:17.200Z"),
    ]
    latest = runner.invoke(
        cli, ["explain", f"gpu-node-07/{UNIT}", "--format", "json", "--db", sqlite_url]
    )
    report = json.loads(latest.output)
    assert report["incident"]["label"] == "wedged_stop"
    assert [s["kind"] for s in report["plan"]][:2] == ["kill", "wait_gpu_free"]
    md = runner.invoke(cli, ["explain", UNIT, "--format", "markdown", "--db", sqlite_url])
    assert "\n## Timeline\n" in md.output and "\n## Plan\n" in md.output


def test_explain_shows_what_the_actions_did(
    sqlite_url: str, seed_journal: Path, seed_csv: Path
) -> None:
    runner = seeded(sqlite_url, seed_journal, seed_csv)
    store = open_store(sqlite_url)
    plan = f"gpu-node-07/{UNIT}@2026-02-21T00:33:27.400000Z"
    approve(store, plan, "human:test")
    assert execute(store, DryRunBackend(), plan).state == "done"
    store.close()
    text = runner.invoke(cli, ["explain", UNIT, "--db", sqlite_url]).output
    assert "[succeeded] kill" in text and f"→ dry run: would kill {UNIT}" in text
    assert "action kill succeeded" in text


def test_explain_errors(sqlite_url: str) -> None:
    missing = CliRunner().invoke(cli, ["explain", "nope.service", "--db", sqlite_url])
    assert missing.exit_code == 1 and "does not exist" in missing.output
    assert CliRunner().invoke(cli, ["db", "upgrade", "--db", sqlite_url]).exit_code == 0
    result = CliRunner().invoke(cli, ["explain", "nope.service", "--db", sqlite_url])
    assert result.exit_code == 4 and "nope.service: no incident" in result.output


def test_sparkline() -> None:
    assert sparkline([0.0, 0.5, 1.0], width=3) == "▁▅█"
    assert len(sparkline([0.1] * 500)) == 48 and sparkline([]) == ""


def test_explain_markdown_shows_hostile_log_text_and_never_runs_it(
    sqlite_url: str, seed_journal: Path, seed_csv: Path, tmp_path: Path
) -> None:
    from markdown_it import MarkdownIt  # CommonMark, as rich (a dependency) ships it

    hostile = (
        "<script>alert(1)</script><img src=x onerror=alert(1)> ```` ~~~\n"
        "# injected\n[click](javascript:alert(1)) **bold** \x1b]8;;http://x\x07 | a |"
    )
    lines = seed_journal.read_text().splitlines()
    entry = json.loads(lines[40])
    message = bytes(entry["MESSAGE"]).decode()
    marker = "[multiproc_executor.py:671] "
    entry["MESSAGE"] = list(message.replace(marker, marker + hostile + " ", 1).encode())
    lines[40] = json.dumps(entry)
    journal = tmp_path / "hostile.jsonl"
    journal.write_text("\n".join(lines) + "\n")
    runner = seeded(sqlite_url, journal, seed_csv)
    md = runner.invoke(
        cli, ["explain", UNIT, "--incident", FIRST, "--format", "markdown", "--db", sqlite_url]
    )
    assert md.exit_code == 0, md.output
    assert "<script>alert(1)</script>" in md.output  # shown, inside a code block
    assert "\x1b" not in md.output and "\x07" not in md.output
    html = MarkdownIt("commonmark", {"html": True}).render(md.output)
    for raw in ("<script", "<img", "<a ", "<strong>", "<h1>injected", "<table"):
        assert raw not in html, raw
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert [line for line in html.splitlines() if line.startswith("<h2>")] == [
        f"<h2>{t}</h2>"
        for t in (
            "Timeline",
            "Config",
            "Evidence",
            "Facts",
            "Plan",
            "GPU memory (used / total, over the incident)",
            "Other incidents of this service",
            "Similar incidents on this host",
        )
    ]
    # the evidence, the GPU memory, and the arithmetic of the plan's steps that have one
    assert html.count("<pre><code") == 6
