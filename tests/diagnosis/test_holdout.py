"""Grouped hold-out evaluation: whole engine versions, log shapes or engines left out of
training; every fold tests exactly the examples of its group and trains on none of them."""

from __future__ import annotations

import gzip
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from advisor.cli.main import cli
from advisor.core.errors import InputError
from advisor.core.taxonomy import MODEL_LABELS
from advisor.diagnosis import holdout, training
from advisor.diagnosis.rules import load_rules
from advisor.planning.recommend import ACT_BELOW

ROOT = Path(__file__).resolve().parents[2]
PER_FAILURE = 5  # 55 examples, every vLLM, SGLang and TGI version series among them


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sys.path.insert(0, str(ROOT / "data"))
    try:
        from corpus.build import corpus_bytes

        data = corpus_bytes(per_failure=PER_FAILURE)
    finally:
        sys.path.remove(str(ROOT / "data"))
    out = tmp_path_factory.mktemp("holdout") / "small.jsonl.gz"
    out.write_bytes(gzip.compress(data, mtime=0))
    return out


def _records(corpus: Path) -> list[dict[str, Any]]:
    return list(training.load_corpus(corpus))


@pytest.mark.parametrize(
    ("engine", "version", "group"),
    [
        ("vllm", "0.5.3.post1", "vllm 0.5-0.6"),
        ("vllm", "0.6.6.post1", "vllm 0.5-0.6"),
        ("vllm", "0.7.2", "vllm 0.7-0.9"),
        ("vllm", "0.9.0.1", "vllm 0.7-0.9"),
        ("vllm", "0.10.1.1", "vllm 0.10-0.11"),
        ("vllm", "0.11.1", "vllm 0.10-0.11"),
        ("vllm", "0.15.0", "vllm 0.15-0.20"),
        ("vllm", "0.20.1", "vllm 0.15-0.20"),
        ("vllm", "0.33.0", "vllm 0.25+"),
        ("vllm", "0.4.0", "vllm 0.5-0.6"),
        ("sglang", "0.4.3.post2", "sglang 0.4"),
        ("sglang", "0.5.23", "sglang 0.5+"),
        ("tgi", "2.4.1", "tgi 1-2"),
        ("tgi", "3.3.4", "tgi 3+"),
        ("llamacpp", "b6700", "llamacpp (all)"),
        ("docker", "27.3.1", "docker (all)"),
    ],
)
def test_versions_fall_into_their_series(engine: str, version: str, group: str) -> None:
    assert holdout.version_group(engine, version) == group


@pytest.mark.parametrize("by", holdout.HOLD_OUTS)
def test_each_fold_trains_on_no_example_of_the_group_it_leaves_out(
    small_corpus: Path, by: str
) -> None:
    records = _records(small_corpus)
    groups = [holdout.group_of(r, by) for r in records]
    splits = holdout.grouped_splits(groups)
    assert [name for name, _, _ in splits] == sorted(set(groups), key=holdout._order)
    tested: list[int] = []
    for name, train_idx, test_idx in splits:
        assert test_idx and train_idx
        assert all(groups[i] == name for i in test_idx)
        assert all(groups[i] != name for i in train_idx)
        assert set(test_idx) == {i for i, g in enumerate(groups) if g == name}
        assert sorted(train_idx + test_idx) == list(range(len(records)))
        tested += test_idx
    assert sorted(tested) == list(range(len(records)))  # each example tested exactly once


def test_version_series_are_ordered_oldest_first() -> None:
    groups = [
        holdout.version_group(engine, version)
        for engine, version in [
            ("llamacpp", "b3600"),
            ("tgi", "3.0.2"),
            ("vllm", "0.33.0"),
            ("docker", "20.10.24"),
            ("sglang", "0.5.2"),
            ("vllm", "0.10.0"),
            ("tgi", "1.4.5"),
            ("vllm", "0.5.4"),
            ("sglang", "0.4.1"),
            ("vllm", "0.15.1"),
            ("vllm", "0.8.5"),
        ]
    ]
    names = [name for name, _, _ in holdout.grouped_splits(groups)]
    assert names == [
        "vllm 0.5-0.6",
        "vllm 0.7-0.9",
        "vllm 0.10-0.11",
        "vllm 0.15-0.20",
        "vllm 0.25+",
        "sglang 0.4",
        "sglang 0.5+",
        "tgi 1-2",
        "tgi 3+",
        "docker (all)",
        "llamacpp (all)",
    ]


def test_a_corpus_without_the_field_or_with_one_group_is_refused() -> None:
    with pytest.raises(InputError, match="no shape to hold out shapes by"):
        holdout.group_of({"id": "x", "label": "healthy", "lines": ["a"]}, "shapes")
    with pytest.raises(InputError, match="at least two groups"):
        holdout.grouped_splits(["raw", "raw"])


def test_hold_out_is_deterministic(small_corpus: Path) -> None:
    rules = load_rules()
    first = holdout.evaluate_holdout(iter(_records(small_corpus)), rules, "engines")
    second = holdout.evaluate_holdout(iter(_records(small_corpus)), rules, "engines")
    assert first == second
    assert [f["left_out"] for f in first["folds"]] == ["vllm", "sglang", "tgi"]


def test_evaluate_holds_out_versions_and_reports_every_group(small_corpus: Path) -> None:
    result = CliRunner().invoke(
        cli,
        ["model", "evaluate", "--corpus", str(small_corpus), "--hold-out", "versions", "--json"],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)["hold_out"]
    records = _records(small_corpus)
    groups = Counter(holdout.group_of(r, "versions") for r in records)
    assert report["hold_out"] == "versions"
    assert {f["left_out"]: f["examples"] for f in report["folds"]} == groups
    for fold in report["folds"]:
        assert fold["train"] + fold["examples"] == len(records)
        assert 0 <= fold["accuracy"] <= 1 and 0 <= fold["macro_f1"] <= 1
        assert {"accuracy_model_only", "macro_f1_model_only", "accuracy_rules_only"} <= set(fold)
    assert report["examples"] == len(records)
    assert set(report["per_label"]) >= set(MODEL_LABELS)
    assert sum(sum(row.values()) for row in report["confusion"].values()) == len(records)
    for key in ("accuracy", "macro_f1", "accuracy_model_only", "accuracy_rules_only"):
        assert 0 <= report[key] <= 1


def test_evaluate_prints_a_row_per_fold(small_corpus: Path) -> None:
    result = CliRunner().invoke(
        cli, ["model", "evaluate", "--corpus", str(small_corpus), "--hold-out", "shapes"]
    )
    assert result.exit_code == 0, result.output
    shapes = {holdout.group_of(r, "shapes") for r in _records(small_corpus)}
    rows = [line.split()[0] for line in result.output.splitlines()[2 : 2 + len(shapes)]]
    assert set(rows) == shapes
    assert "pooled (hold-out shapes, combined label)" in result.output
    assert "confusion (rows: truth, columns: predicted)" in result.output


def test_calibration_of_the_hold_out_split(small_corpus: Path) -> None:
    """`--calibration`: the reliability diagrams, consistent with the pooled accuracy, and
    the accuracy at the planner's ACT_BELOW; the same numbers as text."""
    argv = ["model", "evaluate", "--corpus", str(small_corpus), "--hold-out", "shapes"]
    result = CliRunner().invoke(cli, [*argv, "--calibration", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)["hold_out"]
    combined = report["calibration"]["combined"]
    assert combined["examples"] == report["examples"] == sum(b["n"] for b in combined["bins"])
    right = sum(b["n"] * b["accuracy"] for b in combined["bins"])
    assert right / combined["examples"] == pytest.approx(report["accuracy"], abs=1e-3)
    assert 0.0 <= combined["ece"] <= 1.0 and combined["act_below"] == ACT_BELOW
    assert combined["at_act_below"]["threshold"] == ACT_BELOW
    assert set(report["calibration"]) == {"combined", "model_only"}
    text = CliRunner().invoke(cli, [*argv, "--calibration"]).output
    assert f"ECE {combined['ece']:.4f}" in text and "confidence >= 0.90" in text


def test_an_unknown_hold_out_is_a_usage_error(small_corpus: Path) -> None:
    result = CliRunner().invoke(
        cli, ["model", "evaluate", "--corpus", str(small_corpus), "--hold-out", "gpus"]
    )
    assert result.exit_code == 2
    assert "Invalid value for '--hold-out'" in result.output
