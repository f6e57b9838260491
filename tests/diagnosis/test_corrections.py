"""Operators correct a diagnosis: `advisor label` → a `label.corrected` event → `explain`
shows both labels (after a rebuild too), and so does `advisor incidents` (text and --json, the
list's corrections read at once) → `model train --store` learns from it →
`model evaluate --store` reports agreement with the operators, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from advisor.cli.main import cli
from advisor.core.errors import InputError
from advisor.core.events import StoredEvent
from advisor.core.ids import short_id
from advisor.core.taxonomy import HEALTHY, KV_CACHE_OOM, SAMPLER_WARMUP_OOM, UNKNOWN
from advisor.diagnosis.corrections import CORRECTION_WEIGHT, training_records
from advisor.front import Advisor, open_store
from advisor.store import EventFilter, EventStore
from tests.diagnosis.test_model import corpus_subset
from tests.reports.seeded import FIRST, UNIT, seeded

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "data" / "corpus.jsonl.gz"
WHY = "the KV cache ran out, not the sampler <b>"


def _ok(runner: CliRunner, *argv: str) -> str:
    result = runner.invoke(cli, list(argv))
    assert result.exit_code == 0, result.output
    return result.output


def test_a_correction_round_trips_through_the_store(
    store_url: str, seed_journal: Path, tmp_path: Path
) -> None:
    runner = seeded(store_url, seed_journal, None)
    db = ("--db", store_url)
    prefix = short_id(FIRST)[:8]
    said = json.loads(_ok(runner, "label", prefix, KV_CACHE_OOM, "--why", WHY, "--json", *db))
    assert said["incident_id"] == FIRST and said["short_id"] == short_id(FIRST)
    assert said["label"] == KV_CACHE_OOM and said["replaces"] == SAMPLER_WARMUP_OOM
    assert said["by"].startswith("human:") and said["why"] == WHY
    # the event is in the store, the diagnosis untouched
    listed = _ok(runner, "events", "--type", "label.corrected", "--json", *db)
    events = [json.loads(line) for line in listed.splitlines()]
    assert [e["payload"]["incident_id"] for e in events] == [FIRST]
    for attempt in (_ok(runner, "explain", UNIT, "--incident", FIRST, *db),):
        assert attempt.startswith(f"gpu-node-07/{UNIT}: {SAMPLER_WARMUP_OOM}")
        assert f"operator label {KV_CACHE_OOM} (by human:" in attempt and WHY in attempt
        assert f"the diagnosis said {SAMPLER_WARMUP_OOM}" in attempt
    _ok(runner, "rebuild", *db)  # no projection holds it: a rebuild reads it the same
    report = json.loads(_ok(runner, "explain", UNIT, "--incident", FIRST, "--json", *db))
    assert report["incident"]["label"] == SAMPLER_WARMUP_OOM
    assert report["operator"]["label"] == KV_CACHE_OOM and report["operator"]["why"] == WHY
    markdown = _ok(runner, "explain", UNIT, "--incident", FIRST, "--format", "markdown", *db)
    assert f"operator label {KV_CACHE_OOM}" in markdown.replace("\\_", "_")
    html = _ok(runner, "explain", UNIT, "--incident", FIRST, "--format", "html", *db)
    assert 'id="operator-label"' in html and "&lt;b&gt;" in html and "<b>" not in html
    # the model learns from it: one more example, weighted
    corpus = corpus_subset(tmp_path, 6)
    out = tmp_path / "model.json"
    trained = json.loads(
        _ok(runner, "model", "train", "--corpus", str(corpus), "--out", str(out), "--store",
            store_url, "--json")
    )  # fmt: skip
    assert trained["examples"] == 6 * 11 + 1
    info = orjson.loads(out.read_bytes())["info"]
    assert info["weighted"] == {"examples": 1, "weight": CORRECTION_WEIGHT}
    agreement = json.loads(_ok(runner, "model", "evaluate", "--store", store_url, "--json"))[
        "operators"
    ]
    assert agreement["corrections"] == 1
    row = agreement["per_label"][KV_CACHE_OOM]
    assert row["n"] == 1 and row["agreement_recorded"] == 0.0 and row["agreement"] == 0.0
    assert row["agreement_model_only"] == 0.0  # the shipped model says what the rule says
    # the model trained with the correction says what the operator said; the sampler rule
    # (confidence 0.85 or more) still keeps its label in the combined one
    learned = json.loads(
        _ok(runner, "model", "evaluate", "--store", store_url, "--model", str(out), "--json")
    )["operators"]["per_label"][KV_CACHE_OOM]
    assert learned["agreement_model_only"] == 1.0 and learned["agreement"] == 0.0
    text = _ok(runner, "model", "evaluate", "--store", store_url)
    assert "operators: 1 corrected incident(s)" in text and KV_CACHE_OOM in text


def test_corrections_are_refused_when_wrong_and_the_latest_wins(
    sqlite_url: str, seed_journal: Path
) -> None:
    runner = seeded(sqlite_url, seed_journal, None)
    db = ("--db", sqlite_url)
    for argv, words in (
        (["label", FIRST, "not-a-label"], "no label 'not-a-label'"),
        (["label", "ffffffffffff0", KV_CACHE_OOM], "no such incident"),
        (["label", FIRST, KV_CACHE_OOM, "--why", "x" * 2001], "2000"),
    ):
        result = runner.invoke(cli, [*argv, *db])
        assert result.exit_code != 0 and words in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1, result.output
    _ok(runner, "label", FIRST, KV_CACHE_OOM, *db)
    again = runner.invoke(cli, ["label", FIRST, KV_CACHE_OOM, *db])
    assert again.exit_code != 0 and "already labelled" in again.output
    words = _ok(runner, "label", FIRST, HEALTHY, "--why", "a drill", *db)
    assert f"{HEALTHY} (was {KV_CACHE_OOM})" in words
    _ok(runner, "label", FIRST, UNKNOWN, *db)  # not a label the model learns
    with open_store(sqlite_url) as store:
        adv = Advisor(store)
        assert adv.corrections()[FIRST].payload.label == UNKNOWN
        assert training_records(store) == []
        with pytest.raises(InputError, match="label: String should match pattern"):
            adv.label(FIRST, HEALTHY, "back", by="human:\x1b[31mops")
        adv.label(FIRST, HEALTHY, "back", by="human:ops")
        (record,) = training_records(store)
        assert record["label"] == HEALTHY and record["weight"] == CORRECTION_WEIGHT
        assert record["id"] == f"store:{FIRST}" and record["lines"]


def counting_reads(store: EventStore, monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """The types `store.read` is asked for from now on, one entry per call."""
    asked: list[str | None] = []
    read = store.read

    def counted(flt: EventFilter | None = None, **kwargs: Any) -> Iterator[StoredEvent]:
        asked.append(None if flt is None else flt.type)
        return read(flt, **kwargs)

    monkeypatch.setattr(store, "read", counted)
    return asked


def test_advisor_incidents_shows_the_operators_label_beside_the_diagnosis(
    store_url: str, seed_journal: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = seeded(store_url, seed_journal, None)
    db = ("--db", store_url)
    before = json.loads(_ok(runner, "incidents", "--json", *db))
    assert [r["operator_label"] for r in before] == [None, None]
    assert [r["operator"] for r in before] == [None, None]
    _ok(runner, "label", FIRST, KV_CACHE_OOM, "--why", WHY, *db)
    rows = {r["incident_id"]: r for r in json.loads(_ok(runner, "incidents", "--json", *db))}
    assert set(rows) == {r["incident_id"] for r in before}
    first = rows.pop(FIRST)
    (other,) = rows.values()
    # the existing fields as they were (the diagnosis among them), the operator's beside them
    old = next(r for r in before if r["incident_id"] == FIRST)
    assert {k: v for k, v in first.items() if k not in ("operator_label", "operator")} == {
        k: v for k, v in old.items() if k not in ("operator_label", "operator")
    }
    assert first["label"] == SAMPLER_WARMUP_OOM and first["operator_label"] == KV_CACHE_OOM
    said = first["operator"]
    assert said["label"] == KV_CACHE_OOM and said["by"].startswith("human:")
    assert said["why"] == WHY and said["replaces"] == SAMPLER_WARMUP_OOM
    assert other["operator_label"] is None and other["operator"] is None
    # in text: the operator's label first, as `explain` says it; the other line unchanged
    lines = {line.split()[0]: line for line in _ok(runner, "incidents", *db).splitlines()}
    corrected = lines.pop(short_id(FIRST))
    assert f"  {KV_CACHE_OOM} (operator label, by human:" in corrected
    assert f"; the diagnosis said {SAMPLER_WARMUP_OOM}, 0.99)  phase=" in corrected
    (plain,) = lines.values()
    assert "operator" not in plain and f"{other['label']} (" in plain
    assert "operator label" in _ok(runner, "incidents", "--open", *db)
    # the latest correction wins; a rebuild reads the same
    _ok(runner, "label", FIRST, HEALTHY, *db)
    _ok(runner, "rebuild", *db)
    again = json.loads(_ok(runner, "incidents", "--json", *db))
    assert [r["operator_label"] for r in again if r["incident_id"] == FIRST] == [HEALTHY]
    # the corrections of the whole list are read at once, not one incident at a time
    with open_store(store_url) as store:
        adv = Advisor(store)
        adv.label(other["incident_id"], KV_CACHE_OOM, by="human:ops")
        asked = counting_reads(store, monkeypatch)
        labels = [r["operator_label"] for r in adv.incidents()]
        assert sorted(labels) == [HEALTHY, KV_CACHE_OOM]
        assert asked.count("label.corrected") == 1
