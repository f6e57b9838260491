"""GPU memory release times learned from the host's history feed `wait_gpu_free`."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from advisor.cli.main import cli
from advisor.store import open_store
from advisor.views.history import p95, release_times


def test_release_time_after_the_seed_kill_and_the_plan_uses_it(
    sqlite_url: str, seed_journal: Path, seed_csv: Path
) -> None:
    runner = CliRunner()
    for argv in (
        ["ingest", "nvidia-smi", str(seed_csv), "--host", "gpu-node-07"],
        ["ingest", "journal", "--file", str(seed_journal)],
    ):
        assert runner.invoke(cli, [*argv, "--db", sqlite_url]).exit_code == 0
    store = open_store(sqlite_url)
    try:
        # killed at 00:35:17.100; the four GPUs are under 5% again at 00:35:22.000
        assert release_times(store, "gpu-node-07") == [4.9]
    finally:
        store.close()
    rows = json.loads(runner.invoke(cli, ["actions", "--json", "--db", sqlite_url]).output)
    wait = next(r for r in rows if r["kind"] == "wait_gpu_free")
    assert wait["spec"]["seconds"] == 5.0
    assert wait["spec"]["arithmetic"] == [
        "bound 5 s: p95 of this host's past releases after a kill is 4.9 s; at least 5 s"
    ]


def test_p95_nearest_rank() -> None:
    assert p95([]) is None and p95([3.0]) == 3.0
    assert p95([float(i) for i in range(1, 21)]) == 19.0
