"""GPU memory release times learned from the host's history feed `wait_gpu_free`."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from advisor.cli.main import cli
from advisor.core.events import NewEvent
from advisor.core.ids import short_id
from advisor.core.payloads import GpuProcess, GpuSampled
from advisor.core.quantiles import p95
from advisor.core.timefmt import parse_iso_us
from advisor.store import open_store
from advisor.views.fold.projector import Projector
from advisor.views.read.history import release_times


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


def test_actions_json_carries_the_short_id_the_text_shows(
    sqlite_url: str, seed_journal: Path
) -> None:
    runner = CliRunner()
    assert (
        runner.invoke(
            cli, ["ingest", "journal", "--file", str(seed_journal), "--db", sqlite_url]
        ).exit_code
        == 0
    )
    rows = json.loads(runner.invoke(cli, ["actions", "--json", "--db", sqlite_url]).output)
    text = runner.invoke(cli, ["actions", "--db", sqlite_url]).output.splitlines()
    assert rows and [r["short_id"] for r in rows] == [line.split()[0] for line in text]
    assert all(r["short_id"] == short_id(r["action_id"]) for r in rows)


def test_p95_nearest_rank() -> None:
    assert p95([]) is None and p95([3.0]) == 3.0
    assert p95([float(i) for i in range(1, 21)]) == 19.0


def _sample(t_us: int, used_fraction: float, unit: str | None) -> NewEvent:
    total = 96 * 2**30
    used = int(total * used_fraction)
    return NewEvent(
        stream="gpu-node-07/gpu0",
        time_us=t_us,
        source="test-nvml",
        key=t_us,
        payload=GpuSampled(
            origin="nvml",
            host="gpu-node-07",
            index=0,
            memory_total_bytes=total,
            memory_used_bytes=used,
            memory_free_bytes=total - used,
            processes=(GpuProcess(pid=7, used_bytes=used, unit=unit),) if unit else (),
        ),
    )


def test_a_kill_of_a_run_holding_little_memory_still_counts_when_nvml_names_its_unit(
    sqlite_url: str, seed_journal: Path
) -> None:
    """The demo's wedged stop is killed while the weights load (7.7% of each GPU): NVML names
    the unit on the GPU, so its release is measured, in Python and in SQL alike."""
    runner = CliRunner()
    argv = ["ingest", "journal", "--file", str(seed_journal), "--db", sqlite_url]
    assert runner.invoke(cli, argv).exit_code == 0
    kill = parse_iso_us("2026-02-21T00:35:17.100Z")
    unit = "vllm-minimax-m25.service"
    store = open_store(sqlite_url)
    try:
        store.append(
            [
                _sample(kill - 3_000_000, 0.077, unit),
                _sample(kill - 1_000_000, 0.077, unit),
                _sample(kill + 1_000_000, 0.077, unit),
                _sample(kill + 2_400_000, 0.0, None),
            ]
        )
        Projector(store).catch_up()
        assert release_times(store, "gpu-node-07") == [2.4]
    finally:
        store.close()
    report = json.loads(runner.invoke(cli, ["stats", "--json", "--db", sqlite_url]).output)
    assert report["gpu_release_after_kill"] == [
        {"host": "gpu-node-07", "kills": 1, "measured": 1, "p50_s": 2.4, "p95_s": 2.4}
    ]


def test_a_gpu_under_the_threshold_that_nvml_does_not_tie_to_the_unit_is_not_waited_for(
    sqlite_url: str, seed_journal: Path
) -> None:
    runner = CliRunner()
    argv = ["ingest", "journal", "--file", str(seed_journal), "--db", sqlite_url]
    assert runner.invoke(cli, argv).exit_code == 0
    kill = parse_iso_us("2026-02-21T00:35:17.100Z")
    store = open_store(sqlite_url)
    try:
        store.append(
            [
                _sample(kill - 1_000_000, 0.077, "other.service"),
                _sample(kill + 2_400_000, 0.0, None),
            ]
        )
        Projector(store).catch_up()
        assert release_times(store, "gpu-node-07") == []
    finally:
        store.close()
    # the kill is counted; no release is timed (a run that held nothing has nothing to free)
    report = json.loads(runner.invoke(cli, ["stats", "--json", "--db", sqlite_url]).output)
    assert report["gpu_release_after_kill"] == [
        {"host": "gpu-node-07", "kills": 1, "measured": 0, "p50_s": None, "p95_s": None}
    ]
