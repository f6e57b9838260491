"""One run fold: a log cut into runs by `advisor classify` (`segment(parse(lines))`) and the
same log stored and folded by the projector give the same runs — boundaries, unit,
invocation, engine, phases, facts, lifecycle and label."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from advisor.core.events import validate_batch
from advisor.diagnosis.classify import diagnose
from advisor.diagnosis.model import load_model
from advisor.diagnosis.rules import load_rules
from advisor.pipeline.inputs import read_log
from advisor.pipeline.processing import Processor
from advisor.store import EventStore
from advisor.views.read.reading import read_rows
from ingest.journal import json_line_record

HOST = "gpu-node-07"
UNIT = "vllm-minimax-m25.service"


def _journal(tmp_path: Path, seed_journal: Path, *, invocations: bool) -> Path:
    """The seed (a run that crashes, then a stop that wedges), then a restart that comes up
    ready and is stopped cleanly, in time order; without `invocations` the runs are cut by
    their systemd and banner lines alone."""
    seed = [json.loads(line) for line in seed_journal.read_text().splitlines()]
    seed.sort(key=lambda e: int(e["__REALTIME_TIMESTAMP"]))
    base = int(seed[-1]["__REALTIME_TIMESTAMP"]) + 30_000_000
    restart = [
        ("systemd", "1", f"Starting {UNIT} - vLLM..."),
        ("systemd", "1", f"Started {UNIT} - vLLM."),
        ("vllm", "301", "INFO 02-21 01:10:00 [api_server.py:1885] vLLM API server version 0.15.1"),
        ("vllm", "301", "INFO:     Application startup complete."),
        ("systemd", "1", f"Stopping {UNIT} - vLLM..."),
        ("vllm", "301", "INFO:     Shutting down"),
        ("systemd", "1", f"{UNIT}: Deactivated successfully."),
        ("systemd", "1", f"Stopped {UNIT} - vLLM."),
    ]
    for n, (identifier, pid, message) in enumerate(restart):
        entry = {
            "__CURSOR": f"s=restart;i={n:x}",
            "__REALTIME_TIMESTAMP": str(base + n * 1000),
            "_HOSTNAME": HOST,
            "MESSAGE": message,
            "_PID": pid,
            "SYSLOG_IDENTIFIER": identifier,
            "_TRANSPORT": "stdout",
            "_SYSTEMD_UNIT": UNIT,
            "INVOCATION_ID": "9" * 32,
        }
        if identifier == "systemd":
            entry.update(_TRANSPORT="journal", _SYSTEMD_UNIT="init.scope", UNIT=UNIT)
        seed.append(entry)
    if not invocations:
        for entry in seed:
            entry.pop("INVOCATION_ID", None)
            entry.pop("_SYSTEMD_INVOCATION_ID", None)
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in seed))
    return path


def _classified(path: Path) -> list[dict[str, Any]]:
    """The runs `advisor classify` cuts the file into, and what it judges each."""
    _fmt, lines = read_log(str(path))
    diagnosis = diagnose(lines, load_rules(), load_model(None))
    out = []
    for verdict in diagnosis.verdicts:
        run, numbers = verdict.run, [diagnosis.parsed[i].line.number for i in verdict.run.indexes]
        out.append(
            {
                "lines": (numbers[0], numbers[-1], len(numbers)),
                "unit": run.unit,
                "invocation_id": run.invocation_id,
                "engine": run.engine,
                "phases": run.phases,
                "last_phase": run.best_phase,
                "config": run.config,
                "facts": {
                    k: run.event_facts.get(k)
                    for k in ("exit_code", "exit_signal", "unit_result", "restart_count")
                },
                "stop_timed_out": bool(run.event_facts.get("stop_timed_out")),
                "lifecycle": sorted(run.events),
                "ended": run.ended,
                "ready": run.ready,
                "died": run.died,
                "label": verdict.label,
            }
        )
    return out


def _projected(store: EventStore, path: Path) -> list[dict[str, Any]]:
    """The runs the projector folds the same file's lines into, diagnosed."""
    raw = path.read_bytes().splitlines()
    records = [json_line_record(line, n) for n, line in enumerate(raw, 1)]
    store.append(validate_batch([r.event for r in records if r.event is not None]))
    Processor(store).run(final=True)
    return [_as_run(row) for row in read_rows(store, "runs")]


def _as_run(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "lines": (row["first_seq"], row["last_seq"], row["lines"]),
        "unit": row["unit"],
        "invocation_id": row["invocation_id"],
        "engine": row["engine"],
        "phases": orjson.loads(row["phases"]),
        "last_phase": row["last_phase"],
        "config": orjson.loads(row["config"]),
        "facts": {k: row[k] for k in ("exit_code", "exit_signal", "unit_result", "restart_count")},
        "stop_timed_out": bool(row["stop_timed_out"]),
        "lifecycle": orjson.loads(row["lifecycle"]),
        "ended": bool(row["ended"]),
        "ready": row["ready_us"] is not None,
        "died": bool(row["died"]),
        "label": row["label"],
    }


@pytest.mark.parametrize("invocations", [True, False], ids=["invocation-ids", "text-only"])
def test_classify_and_the_projector_cut_and_fold_the_same_runs(
    invocations: bool,
    store_url: str,
    tmp_path: Path,
    seed_journal: Path,
    opener: Callable[[str], EventStore],
) -> None:
    path = _journal(tmp_path, seed_journal, invocations=invocations)
    classified = _classified(path)
    projected = _projected(opener(store_url), path)
    assert len(classified) == 3, classified  # the crash, the wedged stop, the restart
    assert [r["label"] for r in classified][2] == "healthy"
    assert classified[0]["died"] and classified[0]["ended"] and classified[2]["ready"]
    assert classified[2]["ended"] and not classified[2]["died"]
    assert projected == classified
