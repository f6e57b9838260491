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
_SORTED: Final = orjson.OPT_SORT_KEYS


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
        """The model as a reviewable file: keys sorted, one line per field and one per token
        (a diff of two trainings shows the tokens whose weights moved), ending in a newline."""
        head = {
            "format": FORMAT,
            "info": dict(self.info),
            "intercept": list(self.intercept),
            "labels": list(self.labels),
            "temperature": self.temperature,
        }
        lines = [b"{"]
        lines += [
            b"  %s: %s," % (orjson.dumps(k), orjson.dumps(v, option=_SORTED))
            for k, v in head.items()
        ]
        lines.append(b'  "weights": {')
        rows = sorted(self.weights.items())
        lines += [
            b"    %s: %s%s"
            % (orjson.dumps(t), orjson.dumps(list(w)), b"," if n < len(rows) else b"")
            for n, (t, w) in enumerate(rows, 1)
        ]
        lines += [b"  }", b"}", b""]
        return b"\n".join(lines)


def from_json(data: bytes, name: str) -> LinearModel:
    try:
        obj = orjson.loads(data)
        if obj.get("format") != FORMAT:
            raise ValueError(f"format is {obj.get('format')!r}, expected {FORMAT!r}")
        labels = tuple(str(label) for label in obj["labels"])
        weights = {str(t): tuple(map(float, w)) for t, w in obj["weights"].items()}
        intercept = tuple(map(float, obj["intercept"]))
        if any(len(w) != len(labels) for w in weights.values()) or len(intercept) != len(labels):
            raise ValueError("weights do not match the labels")
        temperature = float(obj["temperature"])
        if not temperature > 0:
            raise ValueError("temperature must be positive")
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as e:
        raise InputError(f"{name}: not a usable model file: {e}") from e
    digest = hashlib.sha256(data).hexdigest()[:16]
    return LinearModel(labels, weights, intercept, temperature, obj.get("info") or {}, digest)


# Models read, by file, with the file's (mtime, size) when read: a file retrained since (by
# `advisor model train`, in this process or another) is read again.
_cache: dict[str, tuple[tuple[int, int] | None, LinearModel | None]] = {}


def _stamp(path: Any) -> tuple[int, int] | None:
    try:
        st = Path(str(path)).stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def load_model(path: Path | None = None) -> LinearModel | None:
    """The model in `path`, or the one shipped with advisor (None when none is shipped);
    read again when the file has changed since it was last read."""
    if path is not None:
        key, stamp = str(path), _stamp(path)
    else:
        entry = resources.files("advisor.diagnosis").joinpath(SHIPPED)
        key, stamp = SHIPPED, _stamp(entry)
    cached = _cache.get(key)
    if cached is not None and cached[0] == stamp and stamp is not None:
        return cached[1]
    model: LinearModel | None
    if path is not None:
        try:
            data = path.read_bytes()
        except OSError as e:
            raise InputError(f"{path}: cannot read model: {e.strerror or e}") from e
        model = from_json(data, str(path))
    else:
        model = from_json(entry.read_bytes(), SHIPPED) if entry.is_file() else None
    _cache[key] = (stamp, model)
    return model
