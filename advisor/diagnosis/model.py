"""The learned model at prediction time: a multinomial logistic regression stored as JSON.

Training (`training.py`) uses scikit-learn; prediction needs only the weights, so it runs
without importing scikit-learn and without unpickling anything: the file is data (token →
weights per label, intercepts, a calibration temperature), and a tampered file can at worst
give wrong numbers, never run code.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Final

import orjson

from advisor.core.errors import InputError

FORMAT: Final = "advisor-linear-v1"
SHIPPED: Final = "model.json"


@dataclass(frozen=True)
class LinearModel:
    labels: tuple[str, ...]
    weights: Mapping[str, Sequence[float]]
    intercept: Sequence[float]
    temperature: float
    info: Mapping[str, Any]
    digest: str = ""

    def probabilities(self, tokens: Iterable[str]) -> dict[str, float]:
        """Calibrated probability of each label for a run's tokens."""
        scores = list(self.intercept)
        n = len(scores)
        for token in tokens:
            row = self.weights.get(token)
            if row is not None:
                for k in range(n):
                    scores[k] += row[k]
        top = max(scores)
        exps = [math.exp((s - top) / self.temperature) for s in scores]
        total = sum(exps)
        return {label: e / total for label, e in zip(self.labels, exps, strict=True)}

    def to_json(self) -> bytes:
        return orjson.dumps(
            {
                "format": FORMAT,
                "labels": list(self.labels),
                "temperature": self.temperature,
                "intercept": list(self.intercept),
                "info": dict(self.info),
                "weights": {t: list(w) for t, w in sorted(self.weights.items())},
            },
            option=orjson.OPT_SORT_KEYS,
        )


def from_json(data: bytes, name: str) -> LinearModel:
    try:
        obj = orjson.loads(data)
        if obj.get("format") != FORMAT:
            raise ValueError(f"format is {obj.get('format')!r}, expected {FORMAT!r}")
        labels = tuple(str(label) for label in obj["labels"])
        weights = {str(t): tuple(float(x) for x in w) for t, w in obj["weights"].items()}
        intercept = tuple(float(x) for x in obj["intercept"])
        if any(len(w) != len(labels) for w in weights.values()) or len(intercept) != len(labels):
            raise ValueError("weights do not match the labels")
        temperature = float(obj["temperature"])
        if not temperature > 0:
            raise ValueError("temperature must be positive")
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as e:
        raise InputError(f"{name}: not a usable model file: {e}") from e
    digest = hashlib.sha256(data).hexdigest()[:16]
    return LinearModel(labels, weights, intercept, temperature, obj.get("info") or {}, digest)


_cache: dict[str, LinearModel | None] = {}


def load_model(path: Path | None = None) -> LinearModel | None:
    """The model in `path`, or the one shipped with advisor (None when none is shipped)."""
    key = str(path) if path is not None else SHIPPED
    if key not in _cache:
        if path is not None:
            try:
                data = path.read_bytes()
            except OSError as e:
                raise InputError(f"{path}: cannot read model: {e.strerror or e}") from e
            _cache[key] = from_json(data, str(path))
        else:
            entry = resources.files("advisor.diagnosis").joinpath(SHIPPED)
            _cache[key] = from_json(entry.read_bytes(), SHIPPED) if entry.is_file() else None
    return _cache[key]
