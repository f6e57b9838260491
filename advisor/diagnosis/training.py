"""Training and evaluating the learned model (scikit-learn; imported only here).

Deterministic: the vocabulary is sorted, the folds and the solver are seeded, and the
weights are rounded before they are written, so training twice on the same corpus writes
the same bytes. Calibration: a single temperature fitted on out-of-fold scores so that the
model's probabilities match how often it is right.
"""

from __future__ import annotations

import gzip
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

from advisor.core.errors import InputError
from advisor.core.taxonomy import HEALTHY, MODEL_LABELS, UNKNOWN
from advisor.diagnosis.classify import (
    RuleVote,
    final_label,
    judge_run,
    lacking_evidence,
    shows_trouble,
)
from advisor.diagnosis.features import featurize
from advisor.diagnosis.model import LinearModel
from advisor.diagnosis.rules import RuleSet, match_run
from advisor.parsing.lines import LogLine
from advisor.parsing.parsed import Parsed, parse
from advisor.parsing.pasted import lines_from_paste
from advisor.parsing.sequence import Run, is_serving, segment

SEED: Final = 20261201
MIN_DF: Final = 2
C: Final = 2.0


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def shipped_model_path() -> Path:
    return Path(__file__).resolve().parent / "model.json"


@dataclass(frozen=True)
class Example:
    id: str
    label: str
    tokens: tuple[str, ...]
    rule_label: str | None
    rule_confidence: float | None
    healthy_seen: bool
    trouble: bool
    lacking: frozenset[str]  # the guarded labels the example shows no evidence for
    weight: float = 1.0  # how many corpus examples it counts as (an operator's label: more)


def primary_run(runs: Sequence[Run], parsed: Sequence[Parsed], rules: RuleSet) -> Run:
    """The run a log is about: the first one rules call a failure, else the last."""
    for run in runs:
        hits = match_run(rules, run, parsed)
        if hits and hits[0].label not in (HEALTHY,):
            return run
    return runs[-1]


def example_from_lines(
    ident: str, label: str, texts: Sequence[str], rules: RuleSet, weight: float = 1.0
) -> Example:
    parsed = parse(lines_from_paste(texts))
    runs = segment(parsed)
    if not runs:
        raise InputError(f"corpus example {ident}: no lines")
    run = primary_run(runs, parsed, rules)
    hits = match_run(rules, run, parsed)
    return Example(
        ident,
        label,
        tuple(featurize(run, parsed)),
        hits[0].label if hits else None,
        hits[0].confidence if hits else None,
        any(h.label == HEALTHY for h in hits) or is_serving(run, parsed),
        shows_trouble(run, parsed),
        lacking_evidence(run, parsed, hits),
        weight,
    )


def load_corpus(path: Path | None) -> Iterator[dict[str, Any]]:
    path = path or repo_root() / "data" / "corpus.jsonl.gz"
    try:
        with gzip.open(path, "rb") as f:
            for number, line in enumerate(f, start=1):
                try:
                    record = orjson.loads(line)
                except orjson.JSONDecodeError as e:
                    raise InputError(f"{path}: line {number}: invalid JSON") from e
                if record.get("label") not in MODEL_LABELS or not record.get("lines"):
                    raise InputError(f"{path}: line {number}: needs a known label and lines")
                yield record
    except FileNotFoundError as e:
        raise InputError(f"{path}: no such corpus (run `python data/make_corpus.py`)") from e
    except (OSError, EOFError) as e:
        raise InputError(f"{path}: not a gzip file of JSON lines: {e}") from e


def examples_of(records: Iterator[dict[str, Any]], rules: RuleSet) -> list[Example]:
    return [
        example_from_lines(
            str(r.get("id", n)), r["label"], r["lines"], rules, float(r.get("weight", 1.0))
        )
        for n, r in enumerate(records)
    ]


# ------------------------------------------------------------------ fitting
@dataclass(frozen=True)
class TrainResult:
    model: LinearModel
    examples: int
    seconds: float


def _vocabulary(examples: Sequence[Example]) -> list[str]:
    counts: dict[str, int] = {}
    for ex in examples:
        for token in ex.tokens:
            counts[token] = counts.get(token, 0) + 1
    return sorted(t for t, c in counts.items() if c >= MIN_DF)


def _matrix(examples: Sequence[Example], vocabulary: Sequence[str]) -> Any:
    from scipy.sparse import csr_matrix

    index = {t: i for i, t in enumerate(vocabulary)}
    rows, cols = [], []
    for r, ex in enumerate(examples):
        for token in ex.tokens:
            c = index.get(token)
            if c is not None:
                rows.append(r)
                cols.append(c)
    return csr_matrix(([1.0] * len(rows), (rows, cols)), shape=(len(examples), len(vocabulary)))


def _fit(examples: Sequence[Example]) -> tuple[Any, list[str]]:
    from sklearn.linear_model import LogisticRegression

    vocabulary = _vocabulary(examples)
    x = _matrix(examples, vocabulary)
    y = [ex.label for ex in examples]
    clf = LogisticRegression(C=C, max_iter=1000, tol=1e-4, random_state=SEED)
    weights = [ex.weight for ex in examples]
    # Unweighted (the corpus alone) is fitted exactly as before: the shipped model's bytes.
    clf.fit(x, y, sample_weight=weights if any(w != 1.0 for w in weights) else None)
    return clf, vocabulary


def _as_model(
    clf: Any, vocabulary: Sequence[str], temperature: float, info: dict[str, Any]
) -> LinearModel:
    labels = tuple(str(c) for c in clf.classes_)
    coef = clf.coef_
    weights: dict[str, tuple[float, ...]] = {}
    for j, token in enumerate(vocabulary):
        row = tuple(round(float(coef[k, j]), 5) for k in range(len(labels)))
        if max(abs(w) for w in row) >= 1e-4:
            weights[token] = row
    intercept = tuple(round(float(b), 5) for b in clf.intercept_)
    return LinearModel(labels, weights, intercept, round(temperature, 3), info)


def _folds(labels: Sequence[str], folds: int) -> list[tuple[list[int], list[int]]]:
    from sklearn.model_selection import StratifiedKFold

    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=SEED)
    return [(list(a), list(b)) for a, b in splitter.split([[0]] * len(labels), labels)]


def _out_of_fold_scores(
    examples: Sequence[Example], folds: int
) -> tuple[list[list[float]], list[str]]:
    scores: list[list[float]] = [[] for _ in examples]
    classes: list[str] = []
    for train_idx, test_idx in _folds([e.label for e in examples], folds):
        clf, vocabulary = _fit([examples[i] for i in train_idx])
        classes = [str(c) for c in clf.classes_]
        decision = clf.decision_function(_matrix([examples[i] for i in test_idx], vocabulary))
        for row, i in zip(decision, test_idx, strict=True):
            scores[i] = [float(v) for v in row]
    return scores, classes


def _nll(scores: Sequence[Sequence[float]], truth: Sequence[int], t: float) -> float:
    total = 0.0
    for row, k in zip(scores, truth, strict=True):
        top = max(row)
        log_z = top / t + math.log(sum(math.exp((s - top) / t) for s in row))
        total += log_z - row[k] / t
    return total / len(truth)


def fit_temperature(scores: Sequence[Sequence[float]], truth: Sequence[int]) -> float:
    grid = [0.25 * i for i in range(2, 41)]
    return min(grid, key=lambda t: _nll(scores, truth, t))


def train(records: Iterator[dict[str, Any]], rules: RuleSet, folds: int = 5) -> TrainResult:
    started = time.perf_counter()
    examples = examples_of(records, rules)
    if len({e.label for e in examples}) < 2:
        raise InputError("the corpus needs examples of at least two labels")
    scores, classes = _out_of_fold_scores(examples, folds)
    temperature = fit_temperature(scores, [classes.index(e.label) for e in examples])
    clf, vocabulary = _fit(examples)
    info = {
        "examples": len(examples),
        "seed": SEED,
        "C": C,
        "min_df": MIN_DF,
        "per_label": {
            label: sum(e.label == label for e in examples)
            for label in sorted({e.label for e in examples})
        },
    }
    weighted = [e for e in examples if e.weight != 1.0]
    if weighted:  # (the corpus alone writes exactly what it always did)
        info["weighted"] = {"examples": len(weighted), "weight": max(e.weight for e in weighted)}
    model = _as_model(clf, vocabulary, temperature, info)
    return TrainResult(model, len(examples), time.perf_counter() - started)


# ------------------------------------------------------------------ evaluation
def calibration_error(
    confidences: Sequence[float], correct: Sequence[bool], bins: int = 10
) -> float:
    """Expected calibration error: how far stated confidence is from observed accuracy,
    averaged over confidence bins weighted by their size (0 is perfectly calibrated)."""
    total = 0.0
    for b in range(bins):
        low, high = b / bins, (b + 1) / bins
        members = [i for i, c in enumerate(confidences) if low < c <= high or (b == 0 and c == 0)]
        if members:
            accuracy = sum(correct[i] for i in members) / len(members)
            mean_conf = sum(confidences[i] for i in members) / len(members)
            total += len(members) * abs(accuracy - mean_conf)
    return total / max(1, len(confidences))


def _scores_table(truth: Sequence[str], predicted: Sequence[str]) -> dict[str, Any]:
    labels = sorted(set(truth) | set(predicted))
    per_label = {}
    for label in labels:
        tp = sum(t == p == label for t, p in zip(truth, predicted, strict=True))
        fp = sum(p == label != t for t, p in zip(truth, predicted, strict=True))
        fn = sum(t == label != p for t, p in zip(truth, predicted, strict=True))
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        per_label[label] = {
            "precision": round(precision, 3),
            "recall": round(recall, 3),
            "f1": round(f1, 3),
            "support": tp + fn,
        }
    confusion = {
        t: {
            p: sum(a == t and b == p for a, b in zip(truth, predicted, strict=True)) for p in labels
        }
        for t in labels
    }
    accuracy = sum(t == p for t, p in zip(truth, predicted, strict=True)) / max(1, len(truth))
    return {"accuracy": round(accuracy, 4), "per_label": per_label, "confusion": confusion}


def evaluate(records: Iterator[dict[str, Any]], rules: RuleSet, folds: int = 5) -> dict[str, Any]:
    """Out-of-fold predictions of the model alone, of the rules alone, and of both combined."""
    examples = examples_of(records, rules)
    scores, classes = _out_of_fold_scores(examples, folds)
    truth = [e.label for e in examples]
    temperature = fit_temperature(scores, [classes.index(t) for t in truth])
    model_pred, combined_pred, rules_pred = [], [], []
    model_conf, combined_conf = [], []
    for ex, row in zip(examples, scores, strict=True):
        top = max(row)
        exps = [math.exp((s - top) / temperature) for s in row]
        probabilities = {c: e / sum(exps) for c, e in zip(classes, exps, strict=True)}
        model_pred.append(max(probabilities, key=lambda k: probabilities[k]))
        model_conf.append(max(probabilities.values()))
        rules_pred.append(ex.rule_label or UNKNOWN)
        label, confidence = _combined(ex, probabilities)
        combined_pred.append(label)
        combined_conf.append(confidence)
    report = _scores_table(truth, model_pred)
    report["folds"] = folds
    report["examples"] = len(examples)
    report["temperature"] = temperature
    report["accuracy_rules_only"] = _scores_table(truth, rules_pred)["accuracy"]
    report["accuracy_combined"] = _scores_table(truth, combined_pred)["accuracy"]
    report["calibration_error_model"] = round(
        calibration_error(model_conf, [t == p for t, p in zip(truth, model_pred, strict=True)]), 4
    )
    report["calibration_error_combined"] = round(
        calibration_error(
            combined_conf, [t == p for t, p in zip(truth, combined_pred, strict=True)]
        ),
        4,
    )
    return report


def _combined(ex: Example, probabilities: dict[str, float]) -> tuple[str, float]:
    vote = (
        RuleVote(ex.rule_label, ex.rule_confidence or 0.0, "corpus")
        if ex.rule_label is not None
        else None
    )
    label, confidence, _ = final_label(
        vote,
        probabilities,
        healthy_seen=ex.healthy_seen,
        trouble=ex.trouble,
        lacking=lambda: ex.lacking,
    )
    return label, confidence


def evaluate_golden(
    folder: Path, rules: RuleSet, read_log: Callable[[str], tuple[str, list[LogLine]]]
) -> dict[str, Any]:
    """Score the shipped model, the rules and both on golden logs: FOLDER/<label>/<log>,
    each read by `read_log` (the pipeline's reader: journald JSON or plain text)."""
    from advisor.diagnosis.model import load_model

    model = load_model(None)
    truth, combined, model_only, rules_only = [], [], [], []
    for expected in sorted(folder.glob("*/*.expected.json")):
        label = orjson.loads(expected.read_bytes())["label"]
        stem = expected.name.removesuffix(".expected.json")
        log = next(
            p
            for p in expected.parent.iterdir()
            if p.name.startswith(stem + ".") and not p.name.endswith(".expected.json")
        )
        _, lines = read_log(str(log))
        parsed = parse(lines)
        runs = segment(parsed)
        verdicts = [judge_run(run, parsed, rules, model) for run in runs]
        failed = [v for v in verdicts if v.failed]
        primary = failed[0] if failed else verdicts[-1]
        truth.append(label)
        combined.append(primary.label)
        hits = match_run(rules, primary.run, parsed)
        rules_only.append(hits[0].label if hits else UNKNOWN)
        if model is not None:
            p = model.probabilities(featurize(primary.run, parsed))
            model_only.append(max(p, key=lambda k: p[k]))
    report = _scores_table(truth, combined)
    report["examples"] = len(truth)
    report["accuracy_rules_only"] = _scores_table(truth, rules_only)["accuracy"]
    if model_only:
        report["accuracy_model_only"] = _scores_table(truth, model_only)["accuracy"]
    return report


def format_report(name: str, report: dict[str, Any]) -> str:
    lines = [f"{name}: {report.get('examples')} examples, accuracy {report['accuracy']:.3f}"]
    for key in (
        "macro_f1",
        "macro_f1_model_only",
        "accuracy_rules_only",
        "accuracy_model_only",
        "accuracy_combined",
        "calibration_error_model",
        "calibration_error_combined",
    ):
        if key in report:
            lines.append(f"  {key.replace('_', ' ')}: {report[key]:.3f}")
    lines.append(f"  {'label':<20} {'prec':>6} {'recall':>6} {'f1':>6} {'n':>5}")
    for label, s in report["per_label"].items():
        lines.append(
            f"  {label:<20} {s['precision']:>6.3f} {s['recall']:>6.3f} "
            f"{s['f1']:>6.3f} {s['support']:>5}"
        )
    labels = list(report["confusion"])
    short = [label[:6] for label in labels]
    lines.append("  confusion (rows: truth, columns: predicted)")
    lines.append("  " + " " * 20 + " ".join(f"{s:>6}" for s in short))
    for label in labels:
        row = report["confusion"][label]
        lines.append(f"  {label:<20}" + " ".join(f"{row[p]:>6}" for p in labels))
    return "\n".join(lines)
