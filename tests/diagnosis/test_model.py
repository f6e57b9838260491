"""The learned model: a reproducible corpus, deterministic training, a model file that is
data only, and how rules and model combine."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from advisor.cli.main import cli
from advisor.core.errors import InputError
from advisor.core.taxonomy import MODEL_LABELS
from advisor.diagnosis import training
from advisor.diagnosis.classify import UNKNOWN_BELOW, RuleVote, decide
from advisor.diagnosis.model import from_json, load_model
from advisor.diagnosis.rules import load_rules
from advisor.pipeline.inputs import read_log

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "data" / "corpus.jsonl.gz"
GOLDEN = ROOT / "tests" / "golden"


def corpus_subset(tmp_path: Path, per_label: int) -> Path:
    kept: dict[str, int] = {}
    out = tmp_path / "small.jsonl.gz"
    with gzip.open(CORPUS, "rb") as src, gzip.open(out, "wb") as dst:
        for line in src:
            label = json.loads(line)["label"]
            if kept.get(label, 0) < per_label:
                kept[label] = kept.get(label, 0) + 1
                dst.write(line)
    return out


def test_the_corpus_is_rebuilt_byte_for_byte(tmp_path: Path) -> None:
    out = tmp_path / "corpus.jsonl.gz"
    subprocess.run(
        [sys.executable, str(ROOT / "data" / "make_corpus.py"), "--out", str(out)], check=True
    )
    assert hashlib.sha256(out.read_bytes()).digest() == hashlib.sha256(CORPUS.read_bytes()).digest()


def test_training_is_deterministic(tmp_path: Path) -> None:
    corpus = corpus_subset(tmp_path, 25)
    rules = load_rules()
    first = training.train(training.load_corpus(corpus), rules, folds=3).model.to_json()
    second = training.train(training.load_corpus(corpus), rules, folds=3).model.to_json()
    assert first == second
    model = from_json(first, "x")
    assert set(model.labels) == set(MODEL_LABELS)


@pytest.mark.slow
def test_the_shipped_model_is_what_training_on_the_corpus_writes(tmp_path: Path) -> None:
    out = tmp_path / "model.json"
    result = CliRunner().invoke(cli, ["model", "train", "--out", str(out)])
    assert result.exit_code == 0, result.output
    shipped = Path(training.__file__).with_name("model.json")
    assert out.read_bytes() == shipped.read_bytes()


def test_a_model_file_is_data_never_code(tmp_path: Path) -> None:
    import pickle

    bad = tmp_path / "model.json"
    bad.write_bytes(pickle.dumps({"format": "advisor-linear-v1"}))
    with pytest.raises(InputError, match="not a usable model file"):
        load_model(bad)
    bad.write_text(
        '{"format": "advisor-linear-v1", "labels": ["a", "b"], "weights": '
        '{"t": [1.0]}, "intercept": [0, 0], "temperature": 1}'
    )
    with pytest.raises(InputError, match="weights do not match the labels"):
        load_model(bad)
    result = CliRunner().invoke(cli, ["classify", str(bad), "--model", str(bad)])
    assert result.exit_code == 4 and "not a usable model file" in result.output


def test_evaluate_prints_per_label_scores_and_a_confusion_matrix(tmp_path: Path) -> None:
    corpus = corpus_subset(tmp_path, 12)
    result = CliRunner().invoke(
        cli, ["model", "evaluate", "--corpus", str(corpus), "--folds", "3", "--json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)["cross_validation"]
    assert report["examples"] == 12 * len(MODEL_LABELS)
    assert set(report["per_label"]) >= set(MODEL_LABELS)
    assert {"precision", "recall", "f1", "support"} == set(report["per_label"]["healthy"])
    assert sum(sum(row.values()) for row in report["confusion"].values()) == report["examples"]
    text = (
        CliRunner()
        .invoke(cli, ["model", "evaluate", "--corpus", str(corpus), "--folds", "3"])
        .output
    )
    assert "confusion (rows: truth, columns: predicted)" in text


def test_the_model_generalises_to_the_golden_logs_it_never_saw() -> None:
    report = training.evaluate_golden(GOLDEN, load_rules(), read_log)
    assert report["examples"] >= 72
    assert report["accuracy_model_only"] >= 0.85, report["accuracy_model_only"]
    assert report["accuracy"] >= 0.95


def test_rules_and_model_combine() -> None:
    agree = decide(RuleVote("kv_cache_oom", 0.9, "r"), {"kv_cache_oom": 0.8, "healthy": 0.2})
    assert agree[0] == "kv_cache_oom" and agree[1] > 0.9 and len(agree[2]) == 1
    trusted = decide(RuleVote("kv_cache_oom", 0.96, "r"), {"runtime_oom": 0.9, "kv_cache_oom": 0.1})
    assert trusted[0] == "kv_cache_oom" and trusted[1] < 0.96
    assert {c.label for c in trusted[2]} == {"kv_cache_oom", "runtime_oom"}
    weak = decide(RuleVote("other_crash", 0.68, "r"), {"nccl_error": 0.95, "other_crash": 0.05})
    assert weak[0] == "nccl_error"
    assert {(c.label, c.source) for c in weak[2]} == {
        ("other_crash", "rules"),
        ("nccl_error", "model"),
    }
    unsure = decide(None, {"nccl_error": 0.4, "other_crash": 0.35, "healthy": 0.25})
    assert unsure[0] == "unknown" and unsure[1] < UNKNOWN_BELOW
    assert unsure[2][0].label == "nccl_error"


def test_a_retrained_model_file_is_read_again(tmp_path: Path) -> None:
    shipped = load_model()
    assert shipped is not None
    path = tmp_path / "model.json"
    path.write_bytes(shipped.to_json())
    first = load_model(path)
    assert first is not None and load_model(path) is first  # unchanged: not read again
    retrained = from_json(shipped.to_json(), "x")
    object.__setattr__(retrained, "temperature", 2.5)
    path.write_bytes(retrained.to_json())
    os.utime(path, ns=(1, 1))  # a different stamp even within the clock's granularity
    again = load_model(path)
    assert again is not None and again.temperature == 2.5


def test_the_model_file_is_reviewable_one_token_a_line() -> None:
    text = Path(training.__file__).with_name("model.json").read_text()
    model = load_model()
    assert model is not None and text.endswith("}\n")
    lines = text.splitlines()
    assert len(lines) == len(model.weights) + 9  # 5 fields, the weights' braces, the file's
    assert max(len(line) for line in lines) < 1000
