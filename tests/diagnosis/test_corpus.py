"""The corpus generator: one family per label of the taxonomy, found by its registry;
deterministic output; every example labelled by the family that built it."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from advisor.core.taxonomy import FAILURE_LABELS, LABELS

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "data" / "make_corpus.py"
CORPUS = ROOT / "data" / "corpus.jsonl.gz"
SMALL = 3


@pytest.fixture
def families(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(ROOT / "data"))
    import corpus.families

    return corpus.families


def _run(out: Path, per_failure: int) -> bytes:
    subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out), "--per-failure", str(per_failure)],
        check=True,
    )
    return out.read_bytes()


def _examples(data: bytes) -> list[dict[str, object]]:
    return [json.loads(line) for line in gzip.decompress(data).splitlines()]


def test_the_registry_has_one_family_per_label_of_the_taxonomy(families: ModuleType) -> None:
    registry = families.registry()
    labels = [f.label for f in registry]
    assert sorted(labels) == sorted((*FAILURE_LABELS, "healthy"))
    assert len(set(labels)) == len(labels)
    # corpus order follows the taxonomy's order
    assert labels == [label for label in LABELS if label in labels]
    for family in registry:
        assert "vllm" in family.builders, family.label
        assert set(family.builders) <= {"vllm", "sglang", "tgi"}


def test_a_small_corpus_is_deterministic_and_a_prefix_of_the_shipped_one(tmp_path: Path) -> None:
    first = _run(tmp_path / "a.jsonl.gz", SMALL)
    second = _run(tmp_path / "b.jsonl.gz", SMALL)
    assert first == second
    shipped: dict[str, list[dict[str, object]]] = {}
    with gzip.open(CORPUS, "rb") as f:
        for line in f:
            ex = json.loads(line)
            shipped.setdefault(str(ex["label"]), []).append(ex)
    small = _examples(first)
    assert len(small) == SMALL * (len(FAILURE_LABELS) + 1)
    for ex in small:
        label, idx = str(ex["label"]), int(str(ex["id"]).rsplit("-", 1)[1])
        assert shipped[label][idx] == ex


def test_each_familys_examples_carry_its_label(families: ModuleType, tmp_path: Path) -> None:
    small = _examples(_run(tmp_path / "c.jsonl.gz", SMALL))
    expected = [(f.label, f"{f.label}-{i:04d}") for f in families.registry() for i in range(SMALL)]
    assert [(ex["label"], ex["id"]) for ex in small] == expected
    for ex in small:
        lines = ex["lines"]
        assert isinstance(lines, list) and len(lines) >= 1
        assert isinstance(ex["engine"], str) and ex["engine"]
        assert isinstance(ex["version"], str) and ex["version"]


ENGINES = {"vllm", "sglang", "tgi", "llamacpp", "candle-vllm", "transformers", "docker"}
ENGINES |= {"kernel", "systemd"}


def test_the_shipped_corpus_fits_its_bounds_and_names_its_engines() -> None:
    examples = _examples(CORPUS.read_bytes())
    assert len(examples) <= 3200
    assert CORPUS.stat().st_size <= 6_500_000
    assert {str(ex["engine"]) for ex in examples} <= ENGINES
    labels = {str(ex["label"]) for ex in examples}
    assert labels == {*FAILURE_LABELS, "healthy"}


def test_every_labelled_catalogue_message_is_in_the_corpus() -> None:
    """Each catalogued message with a label matches at least one line of the shipped corpus
    (regenerate with `python data/make_corpus.py` after adding catalogue messages)."""
    from advisor.parsing.catalog import shipped_catalog

    lines = [line for ex in _examples(CORPUS.read_bytes()) for line in ex["lines"]]
    missing = []
    for message in shipped_catalog().messages:
        if message.spec.label is None:
            continue
        words = message.template.words or ()
        pool = [ln for ln in lines if all(w in ln for w in words[:2])] if words else lines
        if not any(message.read(ln) is not None for ln in pool):
            missing.append(message.id)
    assert missing == []
