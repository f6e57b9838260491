"""DuckDB over the store (SQLite and PostgreSQL, in place) and over its Parquet export: the
same views, the same answers."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from advisor.cli.main import cli

VIEWS = ("events", "log_lines", "gpu_samples", "runs", "incidents", "actions")


@pytest.fixture
def loaded(store_url: str, seed_journal: Path, seed_csv: Path) -> str:
    runner = CliRunner()
    for argv in (
        ["ingest", "nvidia-smi", str(seed_csv), "--host", "gpu-node-07"],
        ["ingest", "journal", "--file", str(seed_journal)],
    ):
        assert runner.invoke(cli, [*argv, "--db", store_url]).exit_code == 0
    return store_url


def _rows(args: list[str]) -> list[dict[str, object]]:
    result = CliRunner().invoke(cli, ["query", *args, "--json"])
    assert result.exit_code == 0, result.output
    rows: list[dict[str, object]] = json.loads(result.output)
    return rows


def test_views_over_the_store_in_place(loaded: str) -> None:
    counts = _rows(
        ["SELECT type, count(*) AS n FROM events GROUP BY type ORDER BY type", "--db", loaded]
    )
    assert {"type": "log.recorded", "n": 86} in counts
    assert {"type": "gpu.sampled", "n": 1208} in counts
    lines = _rows(
        ["SELECT message FROM log_lines WHERE message LIKE '%dummy requests%'", "--db", loaded]
    )
    assert len(lines) == 1 and "1024 dummy requests" in str(lines[0]["message"])
    assert _rows(["SELECT label, runs FROM incidents ORDER BY opened_seq", "--db", loaded]) == [
        {"label": "sampler_warmup_oom", "runs": 1},
        {"label": "wedged_stop", "runs": 1},
    ]
    result = CliRunner().invoke(
        cli, ["query", "SELECT count(*) AS n FROM runs", "--csv", "--verbose", "--db", loaded]
    )
    assert (
        list(csv.reader(io.StringIO(result.output.split("duckdb:")[0]))) == [["n"], ["2"]]
        or "n\n2\n" in result.output
    )
    assert "scanner" in result.output


def test_the_parquet_export_answers_the_same(loaded: str, tmp_path: Path) -> None:
    folder = tmp_path / "export"
    result = CliRunner().invoke(cli, ["export", "parquet", str(folder), "--db", loaded])
    assert result.exit_code == 0 and "1,310 events" in result.output, result.output
    assert (folder / "events" / "day=2026-02-21" / "host=gpu-node-07").is_dir()
    for view in VIEWS:
        sql = f"SELECT * FROM {view} ORDER BY ALL"
        assert _rows([sql, "--parquet", str(folder)]) == _rows([sql, "--db", loaded]), view
    again = CliRunner().invoke(cli, ["export", "parquet", str(folder), "--db", loaded])
    assert again.exit_code == 4 and "already holds an export" in again.output


def test_bad_sql_and_bad_folders(sqlite_url: str, tmp_path: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(cli, ["db", "upgrade", "--db", sqlite_url]).exit_code == 0
    result = runner.invoke(cli, ["query", "SELEC nonsense", "--db", sqlite_url])
    assert result.exit_code == 4 and result.output.startswith("Error: query: Parser Error")
    result = runner.invoke(cli, ["query", "SELECT 1", "--parquet", str(tmp_path)])
    assert result.exit_code == 4 and "not a Parquet export" in result.output


def test_stats_from_the_store_and_from_the_export(loaded: str, tmp_path: Path) -> None:
    runner = CliRunner()
    report = json.loads(runner.invoke(cli, ["stats", "--json", "--db", loaded]).output)
    assert report["crashes_by_label"] == [
        {"label": "sampler_warmup_oom", "incidents": 1, "failed_runs": 1},
        {"label": "wedged_stop", "incidents": 1, "failed_runs": 1},
    ]
    assert report["crashes_by_week"] == [{"week": "2026-W08", "incidents": 2}]
    # the seed's kill at 00:35:17.1: the four GPUs are under 5% again at 00:35:22.0
    assert report["gpu_release_after_kill"] == [
        {"host": "gpu-node-07", "kills": 1, "measured": 1, "p50_s": 4.9, "p95_s": 4.9}
    ]
    (headroom,) = report["gpu_headroom_by_service"]
    assert headroom["runs"] == 2 and 0 < headroom["p50"] < 0.05
    assert report["time_to_recovery"] == [{"resolved": 0, "mean_s": None, "p90_s": None}]
    folder = tmp_path / "export"
    runner.invoke(cli, ["export", "parquet", str(folder), "--db", loaded])
    assert (
        json.loads(runner.invoke(cli, ["stats", "--json", "--parquet", str(folder)]).output)
        == report
    )
    only = json.loads(
        runner.invoke(cli, ["stats", "--json", "--service", "other.service", "--db", loaded]).output
    )
    assert only["crashes_by_label"] == [] and only["gpu_release_after_kill"] == []
    text = runner.invoke(cli, ["stats", "--since", "2026-02-21T00:33:00Z", "--db", loaded])
    lines = text.output.splitlines()
    assert lines[0] == "Crashes by failure"
    assert lines[1].split() == ["failure", "incidents", "failed", "runs"]
    row = next(line for line in lines if line.lstrip().startswith("wedged_stop"))
    assert row.split() == ["wedged_stop", "1", "1"]
    # each number ends where its column's name ends (right-aligned under it)
    assert row.rstrip().endswith("1") and len(row.rstrip()) == len(lines[1].rstrip())
    # Names people read, numbers aligned under their column, no raw column names.
    assert "failed_runs" not in text.output and "median" in text.output


def test_stats_after_the_demo_sees_the_loop_and_the_recovery(sqlite_url: str) -> None:
    from tests.conftest import run_advisor

    assert run_advisor("demo", "--yes", "--db", sqlite_url, timeout=120).returncode == 0
    report = json.loads(CliRunner().invoke(cli, ["stats", "--json", "--db", sqlite_url]).output)
    assert report["restart_loops"][0]["loops"] == 1 and report["restart_loops"][0]["longest"] >= 2
    recovery = report["time_to_recovery"][0]
    assert recovery["resolved"] == 2 and 0 < recovery["mean_s"] < 60
