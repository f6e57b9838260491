"""`--json` on the commands that change something (approve, reject, rollback, remediate,
replan, ship, demo, rebuild, db upgrade, export parquet, model train): one JSON object on
stdout and nothing else — the ids whole and with their `short_id`, counts, statuses, the
store's URL as the command prints it (password hidden) — while the words for a person go
to stderr.

Before: none of them took `--json` (click: "No such option: --json", exit 2)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import advisor.execution.recovery
import advisor.execution.rollback
import advisor.execution.run
from advisor.cli.main import cli
from advisor.core.ids import short_id
from advisor.execution.recovery import Replanned
from advisor.store.engine import redact
from tests.conftest import ROOT

UNIT = "vllm-minimax-m25.service"
SAMPLER_PLAN = f"gpu-node-07/{UNIT}@2026-02-21T00:32:55.000000Z"
WEDGE_PLAN = f"gpu-node-07/{UNIT}@2026-02-21T00:33:27.400000Z"


def run(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=input)


def one_object(result: Result, exit_code: int = 0) -> dict[str, Any]:
    """The command's stdout: exactly one JSON object, nothing before or after it."""
    assert result.exit_code == exit_code, (result.stdout, result.stderr)
    obj = json.loads(result.stdout)
    assert isinstance(obj, dict)
    return obj


def ids(whole: str, key: str) -> dict[str, str]:
    return {key: whole, "short_id": short_id(whole)}


@pytest.fixture
def seeded(sqlite_url: str, seed_journal: Path) -> str:
    """A store holding the seed scenario, ingested and diagnosed: two plans proposed."""
    done = run("ingest", "journal", "--file", str(seed_journal), "--db", sqlite_url)
    assert done.exit_code == 0, done.output
    return sqlite_url


def test_approve_and_reject_json(seeded: str) -> None:
    approved = one_object(run("approve", short_id(SAMPLER_PLAN), "--json", "--db", seeded))
    assert approved["count"] == len(approved["approved"]) > 0
    assert approved["approved"][0] == ids(f"{SAMPLER_PLAN}#0", "action_id")
    assert approved["store"] == redact(seeded)
    rejected = one_object(
        run("reject", f"{short_id(WEDGE_PLAN)}#1", "--why", "not now", "--json", "--db", seeded)
    )
    assert rejected == {
        "rejected": ids(f"{WEDGE_PLAN}#1", "action_id"),
        "why": "not now",
        "store": redact(seeded),
    }
    # without --json, the words a person reads (short ids)
    plain = run("reject", f"{WEDGE_PLAN}#2", "--why", "x", "--db", seeded)
    assert plain.stdout == f"rejected {short_id(WEDGE_PLAN)}#2\n"


def test_rollback_json(seeded: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The id given as a prefix of its short id comes back whole; what was put back is the
    library's (a drop-in restored needs a step that wrote one: stood in for here)."""
    seen: list[str] = []

    def restored(store: object, backend: object, action_id: str, **_: object) -> str:
        seen.append(action_id)
        return "restored the drop-in"

    monkeypatch.setattr(advisor.execution.rollback, "rollback", restored)
    root = ["--systemd-root", str(tmp_path)]
    obj = one_object(
        run("rollback", f"{short_id(SAMPLER_PLAN)[:8]}#1", *root, "--json", "--db", seeded)
    )
    assert obj == {
        "rolled_back": ids(f"{SAMPLER_PLAN}#1", "action_id"),
        "detail": "restored the drop-in",
        "store": redact(seeded),
    }
    assert seen == [f"{SAMPLER_PLAN}#1"]


def test_remediate_json(seeded: str, tmp_path: Path) -> None:
    root = ["--systemd-root", str(tmp_path / "units")]
    dry = one_object(
        run("remediate", "vllm-minimax-m25", "--dry-run", *root, "--json", "--db", seeded)
    )
    assert dry["plan_id"] == WEDGE_PLAN and dry["short_id"] == short_id(WEDGE_PLAN)
    assert dry["incident"]["short_id"] == short_id(dry["incident"]["incident_id"])
    assert dry["steps"][0] == {
        **ids(f"{WEDGE_PLAN}#0", "action_id"),
        "step": 0,
        "kind": "kill",
        "status": "proposed",
        "alternative": False,
    }
    assert any(line.startswith("step 0 (kill") for line in dry["dry_run"])
    assert dry["store"] == redact(seeded)
    # Asked step by step: the prompt and the plan on stderr, "n" recorded, exit 1 (stopped).
    result = run("remediate", "vllm-minimax-m25", *root, "--json", "--db", seeded, input="n\n")
    obj = one_object(result, exit_code=1)
    assert "Run step 0 (kill)?" in result.stderr
    assert obj["steps"][0]["status"] == "rejected"
    assert obj["state"] == "stopped" and obj["ran"] == [] and obj["new_plan"] is None


def test_replan_json(seeded: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the library did (lifting a hold needs systemd: stood in for here), as JSON."""
    incident = WEDGE_PLAN  # a first plan's id is its incident's

    def replanned(store: object, backend: object, host: str | None, unit: str) -> Replanned:
        assert (host, unit) == (None, UNIT)
        return Replanned(incident, WEDGE_PLAN, f"{incident}~1", ["lifted the hold"])

    monkeypatch.setattr(advisor.execution.recovery, "replan", replanned)
    root = ["--systemd-root", str(tmp_path / "units")]
    result = run("replan", "vllm-minimax-m25", *root, "--json", "--db", seeded)
    assert one_object(result) == {
        "incident": ids(incident, "incident_id"),
        "old_plan": ids(WEDGE_PLAN, "plan_id"),
        "new_plan": ids(f"{incident}~1", "plan_id"),
        "notes": ["lifted the hold"],
        "store": redact(seeded),
    }
    assert result.stderr == "lifted the hold\n"


def test_rebuild_json(seeded: str) -> None:
    obj = one_object(run("rebuild", "--json", "--db", seeded))
    assert obj["store"] == redact(seeded)
    assert obj["events"] > 0


def test_ship_json(tmp_path: Path, seed_journal: Path, pg_url: str) -> None:
    """The central store's URL as ship prints it: the password hidden."""
    central = pg_url.replace("postgres@", "postgres:hunter2@", 1)
    assert central != pg_url
    local = f"sqlite:///{tmp_path / 'local.db'}"
    assert run("ingest", "journal", "--file", str(seed_journal), "--db", local).exit_code == 0
    result = run("ship", "--to", central, "--host", "gpu-node-07", "--json", "--db", local)
    obj = one_object(result)
    assert "hunter2" not in result.stdout
    assert obj["to"] == redact(central) and "***" in obj["to"]
    assert obj["store"] == redact(local)
    assert obj["shipped"] > 0 and obj["duplicates"] == 0 and obj["last_seq"] > 0
    again = one_object(
        run("ship", "--to", central, "--host", "gpu-node-07", "--json", "--db", local)
    )
    assert again["shipped"] == 0


def test_demo_json(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'demo.db'}"
    result = run("demo", "--yes", "--json", "--db", db, "--workdir", str(tmp_path / "node"))
    obj = one_object(result)
    assert obj["healthy"] is True and obj["store"] == redact(db)
    assert obj["plans"] and all(p["short_id"] == short_id(p["plan_id"]) for p in obj["plans"])
    assert obj["steps"] and obj["unit"] == UNIT
    assert "post-mortem" in result.stderr


def test_db_upgrade_json(sqlite_url: str) -> None:
    obj = one_object(run("db", "upgrade", "--json", "--db", sqlite_url))
    assert obj["store"] == redact(sqlite_url) and obj["revision"]


def test_export_parquet_json(seeded: str, tmp_path: Path) -> None:
    folder = tmp_path / "export"
    obj = one_object(run("export", "parquet", str(folder), "--json", "--db", seeded))
    assert obj["folder"] == str(folder) and obj["store"] == redact(seeded)
    assert obj["counts"]["events"] > 0


def test_model_train_json(tmp_path: Path) -> None:
    """On a few examples per label (the whole corpus takes minutes)."""
    corpus = tmp_path / "small.jsonl.gz"
    kept: dict[str, int] = {}
    with gzip.open(ROOT / "data" / "corpus.jsonl.gz", "rb") as src, gzip.open(corpus, "wb") as dst:
        for line in src:
            label = json.loads(line)["label"]
            if kept.get(label, 0) < 10:
                kept[label] = kept.get(label, 0) + 1
                dst.write(line)
    out = tmp_path / "model.json"
    obj = one_object(run("model", "train", "--corpus", str(corpus), "--out", str(out), "--json"))
    assert obj["examples"] == sum(kept.values()) and obj["features"] > 0
    assert obj["out"] == str(out) and out.exists()
