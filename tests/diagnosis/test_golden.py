"""Golden logs: tests/golden/<label>/<name>.{log,jsonl} with <name>.expected.json beside it.

Each expected file gives the label, the facts the log states (checked exactly; a fact listed
as null must be null; facts not listed are not checked) and substrings of the evidence lines.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from advisor.core.taxonomy import LABELS
from advisor.diagnosis.classify import UNKNOWN_BELOW
from advisor.parsing.values import FACT_KEYS
from tests.classifying import FileClassifier

GOLDEN = Path(__file__).parents[1] / "golden"
CASES = sorted(GOLDEN.glob("*/*.expected.json"))


def _log_for(expected: Path) -> Path:
    stem = expected.name.removesuffix(".expected.json")
    (log,) = [
        p for p in expected.parent.iterdir() if p.name.startswith(stem + ".") and p != expected
    ]
    return log


@pytest.fixture(scope="module")
def classifier() -> FileClassifier:
    return FileClassifier()


def test_every_label_has_at_least_six_golden_logs() -> None:
    counts = {label: 0 for label in LABELS}
    for expected in CASES:
        counts[json.loads(expected.read_text())["label"]] += 1
    assert all(n >= 6 for n in counts.values()), counts


@pytest.mark.parametrize("expected", CASES, ids=lambda p: f"{p.parent.name}/{p.name[:-14]}")
def test_golden(expected: Path, classifier: Any) -> None:
    want = json.loads(expected.read_text())
    got = classifier(_log_for(expected))
    assert set(got) >= {"label", "confidence", "evidence", "facts", "actions"}
    assert set(got["facts"]) == set(FACT_KEYS)
    assert got["label"] == want["label"], (got["candidates"], got["evidence"])
    if want["label"] != "unknown":
        assert got["confidence"] >= UNKNOWN_BELOW
    for key, value in want.get("facts", {}).items():
        assert got["facts"][key] == value, f"fact {key}"
    texts = [e["text"] for e in got["evidence"]]
    for fragment in want.get("evidence_contains", []):
        assert any(fragment in t for t in texts), (fragment, texts)
