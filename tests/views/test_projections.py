"""Runs and incidents: folded from events, diagnosed as events, rebuilt identically."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from advisor.cli.main import cli
from advisor.core.events import validate_batch
from advisor.diagnosis.rules import load_rules
from advisor.pipeline.processing import Processor
from advisor.store import EventFilter, EventStore
from advisor.views.read.reading import read_rows
from ingest.journal import json_line_record
from ingest.nvidia_smi import ingest_nvidia_smi_file

TABLES = ("runs", "incidents", "gpu_samples", "actions", "run_labels")


def _journal_events(path: Path) -> list[Any]:
    lines = path.read_bytes().splitlines()
    return validate_batch([json_line_record(line, n).event for n, line in enumerate(lines, 1)])


def _snapshot(store: EventStore) -> dict[str, list[dict[str, Any]]]:
    return {table: read_rows(store, table) for table in TABLES}


def _restart_loop_journal(tmp_path: Path, seed_journal: Path, loops: int) -> Path:
    """The seed's failing run repeated `loops` times (new invocation ids, cursors, times),
    then a healthy run."""
    entries = [json.loads(line) for line in seed_journal.read_text().splitlines()]
    first = [
        e
        for e in entries
        if e.get("_SYSTEMD_INVOCATION_ID", e.get("INVOCATION_ID"))
        == entries[0].get("INVOCATION_ID")
    ]
    out = []
    for loop in range(loops):
        for n, e in enumerate(first):
            e = dict(e)
            shift = loop * 60_000_000
            e["__REALTIME_TIMESTAMP"] = str(int(e["__REALTIME_TIMESTAMP"]) + shift)
            e["__CURSOR"] = f"s=loop;i={loop}-{n}"
            for key in ("INVOCATION_ID", "_SYSTEMD_INVOCATION_ID"):
                if key in e:
                    e[key] = f"{loop:032x}"
            if "restart counter is at" in str(e.get("MESSAGE")):
                e["MESSAGE"] = e["MESSAGE"].replace("at 1.", f"at {loop + 1}.")
            out.append(e)
    base = int(out[-1]["__REALTIME_TIMESTAMP"])
    healthy = [
        ("Started vllm-minimax-m25.service - vLLM.", "1"),
        ("INFO:     Application startup complete.", "227612"),
    ]
    for n, (message, pid) in enumerate(healthy):
        out.append(
            {
                "__CURSOR": f"s=ok;i={n}",
                "__REALTIME_TIMESTAMP": str(base + 10_000_000 + n),
                "_HOSTNAME": "gpu-node-07",
                "MESSAGE": message,
                "_PID": pid,
                "SYSLOG_IDENTIFIER": "systemd" if pid == "1" else "vllm",
                "_TRANSPORT": "journal" if pid == "1" else "stdout",
                "UNIT" if pid == "1" else "_SYSTEMD_UNIT": "vllm-minimax-m25.service",
                "INVOCATION_ID" if pid == "1" else "_SYSTEMD_INVOCATION_ID": "f" * 32,
            }
        )
    path = tmp_path / "loop.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in out))
    return path


def test_seed_is_diagnosed_and_rebuild_is_identical_row_for_row(
    store_url: str, opener: Callable[[str], EventStore], seed_journal: Path, seed_csv: Path
) -> None:
    store = opener(store_url)
    processor = Processor(store, load_rules())
    events = _journal_events(seed_journal)
    # Live: small batches, the GPU log half-way, diagnosis after every batch.
    for start in range(0, len(events), 7):
        store.append(events[start : start + 7])
        processor.run(final=False)
        if start == 42:
            ingest_nvidia_smi_file(store, seed_csv, "gpu-node-07", tz="UTC")
            processor.run(final=False)
    processor.run(final=True)
    live = _snapshot(store)

    runs = live["runs"]
    assert [r["label"] for r in runs] == ["sampler_warmup_oom", "wedged_stop"]
    assert [r["outcome"] for r in runs] == ["failed", "failed"]
    assert runs[0]["exit_code"] == 1 and runs[0]["restart_count"] == 1
    assert runs[1]["stop_timed_out"] and runs[1]["exit_signal"] == "KILL"
    assert orjson.loads(runs[0]["config"])["max_num_seqs"] == 1024
    assert all(r["peak_gpu_used_bytes"] and r["peak_gpu_total_bytes"] for r in runs)
    incidents = live["incidents"]
    assert [i["label"] for i in incidents] == ["sampler_warmup_oom", "wedged_stop"]
    facts = orjson.loads(incidents[0]["facts"])
    assert (facts["dummy_requests"], facts["phase"]) == (1024, "sampler_warmup")
    evidence = orjson.loads(incidents[0]["evidence"])
    assert any("warming up sampler with 1024" in e["text"] for e in evidence)
    assert len(live["gpu_samples"]) == 1208
    plans = [
        [(a["kind"], a["status"]) for a in live["actions"] if a["plan_id"] == i["incident_id"]]
        for i in incidents
    ]
    assert plans == [
        [
            ("hold_restarts", "proposed"),
            ("set_flag", "proposed"),
            ("set_flag", "proposed"),
            ("wait_gpu_free", "proposed"),
            ("reset_failed", "proposed"),
            ("restart", "proposed"),
        ],
        [
            ("kill", "proposed"),
            ("wait_gpu_free", "proposed"),
            ("set_unit_option", "proposed"),
            ("set_unit_option", "proposed"),
        ],
    ]
    seqs = orjson.loads(live["actions"][1]["spec"])
    assert (seqs["flag"], seqs["value"]) == ("--max-num-seqs", 256)

    # Diagnosing again adds nothing: every diagnosis event has its idempotency key.
    before = sum(1 for _ in store.read())
    processor.run(final=True)
    assert sum(1 for _ in store.read()) == before

    folded = processor.rebuild()
    assert folded == before
    assert _snapshot(store) == live


def test_a_restart_loop_is_one_incident_with_its_count_and_is_resolved(
    sqlite_url: str, opener: Callable[[str], EventStore], seed_journal: Path, tmp_path: Path
) -> None:
    store = opener(sqlite_url)
    path = _restart_loop_journal(tmp_path, seed_journal, loops=4)
    processor = Processor(store, load_rules())
    events = _journal_events(path)
    for start in range(0, len(events), 25):
        store.append(events[start : start + 25])
        processor.run(final=False)
    processor.run(final=True)
    (incident,) = read_rows(store, "incidents")
    assert (incident["label"], incident["runs"], incident["status"]) == (
        "sampler_warmup_oom",
        4,
        "resolved",
    )
    runs = read_rows(store, "runs")
    assert [r["incident_id"] for r in runs[:4]] == [incident["incident_id"]] * 4
    assert runs[-1]["outcome"] == "ready" and runs[-1]["incident_id"] is None
    types = [
        e.type
        for e in store.read(EventFilter(stream="gpu-node-07/vllm-minimax-m25.service"))
        if e.type.startswith("incident.")
    ]
    # One incident said once; its recurrences and its end are the fold's, from the runs.
    assert types == ["incident.opened", "incident.classified"]
    snapshot = _snapshot(store)
    processor.rebuild()
    assert _snapshot(store) == snapshot


def test_cli_ingest_diagnoses_and_rebuild_runs_and_incidents_read_back(
    sqlite_url: str, seed_journal: Path
) -> None:
    runner = CliRunner()
    result = runner.invoke(
        cli, ["ingest", "journal", "--file", str(seed_journal), "--json", "--db", sqlite_url]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["diagnosis"]["diagnosed"] == 2
    result = runner.invoke(cli, ["incidents", "--json", "--db", sqlite_url])
    rows = json.loads(result.output)
    assert [r["label"] for r in rows] == ["sampler_warmup_oom", "wedged_stop"]
    assert rows[0]["facts"]["max_num_seqs"] == 1024
    result = runner.invoke(
        cli, ["runs", "--service", "gpu-node-07/vllm-minimax-m25.service", "--db", sqlite_url]
    )
    assert result.exit_code == 0 and result.output.count("failed") == 2
    result = runner.invoke(
        cli, ["runs", "--service", "other.service", "--json", "--db", sqlite_url]
    )
    assert json.loads(result.output) == []
    result = runner.invoke(cli, ["rebuild", "--db", sqlite_url])
    assert result.exit_code == 0 and "rebuilt projections from 102 events" in result.output
    result = runner.invoke(cli, ["incidents", "--open", "--db", sqlite_url])
    assert "sampler_warmup_oom" in result.output and "runs=1" in result.output


@pytest.mark.parametrize("hostile", ["$(reboot)", "a;rm -rf /", "../../etc/passwd", "x\ny"])
def test_hostile_unit_names_are_data_only(
    sqlite_url: str, opener: Callable[[str], EventStore], hostile: str
) -> None:
    store = opener(sqlite_url)
    base = {
        "__REALTIME_TIMESTAMP": "1700000000000000",
        "_HOSTNAME": "h",
        "_PID": "1",
        "SYSLOG_IDENTIFIER": "systemd",
        "_TRANSPORT": "journal",
        "UNIT": hostile,
    }
    lines = [
        dict(base, __CURSOR="c1", MESSAGE=f"Started {hostile}."),
        dict(
            base,
            __CURSOR="c2",
            MESSAGE=f"{hostile}: Main process exited, code=exited, status=1/FAILURE",
        ),
        dict(base, __CURSOR="c3", MESSAGE=f"{hostile}: Failed with result 'exit-code'."),
    ]
    events = validate_batch(
        [json_line_record(orjson.dumps(e), n).event for n, e in enumerate(lines, 1)]
    )
    store.append(events)
    Processor(store, load_rules()).run(final=True)
    (run,) = read_rows(store, "runs")
    assert run["died"] and run["label"] is not None


def test_no_diagnose_then_diagnose(sqlite_url: str, seed_journal: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(
        cli,
        [
            "ingest",
            "journal",
            "--file",
            str(seed_journal),
            "--json",
            "--no-diagnose",
            "--db",
            sqlite_url,
        ],
    )
    assert result.exit_code == 0 and "diagnosis" not in json.loads(result.output)
    assert json.loads(runner.invoke(cli, ["incidents", "--json", "--db", sqlite_url]).output) == []
    result = runner.invoke(cli, ["diagnose", "--json", "--db", sqlite_url])
    assert json.loads(result.output) == {"folded": 102, "diagnosed": 2, "diagnosis_events": 16}
    result = runner.invoke(cli, ["diagnose", "--db", sqlite_url])
    assert result.output == "folded 0 events, diagnosed 0 runs, 0 new diagnosis events\n"


def test_following_diagnoses_after_every_committed_batch(
    sqlite_url: str, opener: Callable[[str], EventStore], seed_journal: Path
) -> None:
    store = opener(sqlite_url)
    Processor(store, load_rules()).follow()
    events = _journal_events(seed_journal)
    store.append(events[:40])
    assert read_rows(store, "incidents") == []  # run 1 has not ended yet
    store.append(events[40:50])  # its exit and result: diagnosed at once
    (incident,) = read_rows(store, "incidents")
    assert incident["label"] == "sampler_warmup_oom"
    store.append(events[50:])
    assert [i["label"] for i in read_rows(store, "incidents")] == [
        "sampler_warmup_oom",
        "wedged_stop",
    ]


def _peak_events(rng: random.Random) -> list[dict[str, Any]]:
    """Two units' runs on one host (start, lines, a failed end; the last run left open) and
    GPU samples all over, a quarter of them attributed to one unit or the other."""
    t0, out, key = 1_780_000_000_000_000, [], 0

    def line(unit: str, t: int, message: str, pid: int) -> None:
        nonlocal key
        key += 1
        out.append(
            {
                "stream": f"h/{unit}",
                "time_us": t,
                "source": "journal",
                "key": key,
                "payload": {
                    "type": "log.recorded",
                    "origin": "journald",
                    "host": "h",
                    "unit": unit,
                    "message": message,
                    "pid": pid,
                    "identifier": "systemd" if pid == 1 else "vllm",
                },
            }
        )

    for unit in ("a.service", "b.service"):
        t = t0
        for run in range(3):
            t += rng.randrange(1, 50) * 1_000_000
            line(unit, t, f"Started {unit} - LLM.", 1)
            for _ in range(rng.randrange(1, 4)):
                t += rng.randrange(1, 20) * 1_000_000
                line(unit, t, "INFO 12-01 10:00:00 [api_server.py:1] vLLM API server", 4242)
            if run < 2:
                t += rng.randrange(1, 20) * 1_000_000
                line(unit, t, f"{unit}: Main process exited, code=exited, status=1/FAILURE", 1)
                line(unit, t + 1, f"{unit}: Failed with result 'exit-code'.", 1)
    for i in range(120):
        owner = rng.choice([None] * 6 + ["a.service", "b.service"])
        used = rng.randrange(1, 90) << 30
        out.append(
            {
                "stream": "h/gpu0",
                "time_us": t0 + rng.randrange(0, 300) * 1_000_000,
                "source": "gpu",
                "key": i,
                "payload": {
                    "type": "gpu.sampled",
                    "origin": "nvml",
                    "host": "h",
                    "index": 0,
                    "memory_total_bytes": 96 << 30,
                    "memory_used_bytes": used,
                    "memory_free_bytes": (96 << 30) - used,
                    "processes": [{"pid": 7, "unit": owner}] if owner else [],
                },
            }
        )
    return out


@pytest.mark.parametrize("seed", range(6))
def test_peaks_kept_up_chunk_by_chunk_equal_the_whole_window_definition(
    seed: int, sqlite_url: str, opener: Callable[[str], EventStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Samples and lines arrive in any order and in chunks of any size; a run's peak must
    still be the largest sample of its window, its own unit's samples where there are any."""
    import advisor.views.fold.projector as projections

    rng = random.Random(seed)
    logs = _peak_events(rng)
    samples = [e for e in logs if e["payload"]["type"] == "gpu.sampled"]
    lines = [e for e in logs if e["payload"]["type"] == "log.recorded"]
    merged: list[dict[str, Any]] = []
    while samples or lines:  # each kind keeps its own order, as two ingesters would
        pick = samples if lines == [] or (samples and rng.random() < 0.5) else lines
        merged.append(pick.pop(0))
    monkeypatch.setattr(projections, "CHUNK", rng.choice([3, 7, 25]))
    store = opener(sqlite_url)
    projector = projections.Projector(store)
    start = 0
    while start < len(merged):  # the peaks are right after every catch-up, not just the last
        size = rng.randrange(1, 30)
        store.append(validate_batch(merged[start : start + size]))
        projector.catch_up()
        start += size
        live = _snapshot(store)
        for run in live["runs"]:
            window = [
                s
                for s in live["gpu_samples"]
                if run["started_us"] <= s["time_us"]
                and (run["ended_us"] is None or s["time_us"] <= run["ended_us"])
            ]
            own = [s for s in window if run["unit"] in (s["units"] or "")]
            expected = max(
                ((s["used_bytes"], s["total_bytes"]) for s in own or window), default=(None, None)
            )
            assert (run["peak_gpu_used_bytes"], run["peak_gpu_total_bytes"]) == expected, run
            assert run["peak_gpu_from_unit"] == bool(own)
    assert len(live["runs"]) == 6 and len(live["gpu_samples"]) == 120
    projector.rebuild()
    assert _snapshot(store) == live
