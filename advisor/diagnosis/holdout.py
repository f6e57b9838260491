"""Grouped hold-out evaluation: does the model generalise to engine versions, log shapes or
engines it never saw in training?

Each fold leaves out one whole group (a vLLM/SGLang/TGI version series, a log shape, an
engine), trains on every other example and predicts exactly the examples of the left-out
group. Every example is featurised once and reused across folds; the vocabulary of each
fold is built from its training part only, so nothing of the left-out group leaks into the
features. As in the k-fold `training.evaluate`, one temperature is fitted on the pooled
held-out scores, and the final label of each example is the combination of rules and model
that `classify` answers (`training._combined`).
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Iterator, Sequence
from typing import Any, Final

from advisor.core.engines import ALL
from advisor.core.errors import InputError
from advisor.core.taxonomy import UNKNOWN
from advisor.diagnosis.calibration import BINS, THRESHOLDS, format_reliability, reliability
from advisor.diagnosis.rules import RuleSet
from advisor.diagnosis.training import (
    Example,
    _combined,
    _fit,
    _matrix,
    _scores_table,
    examples_of,
    fit_temperature,
    format_report,
)

HOLD_OUTS: Final = ("versions", "shapes", "engines")

# Version series per engine, oldest first: (lowest version of the series, its name). They
# follow the generator's eras: vLLM 0.5–0.6 (V0 engine, "file:line]" logger), 0.7–0.9 (V0 to
# V1, the "[file:line]" logger from 0.8), 0.10–0.11, 0.15–0.20, 0.25+ (the newest loggers);
# SGLang 0.4 and 0.5; TGI 1–2 and 3. Any other producer of the corpus (llama.cpp,
# candle-vllm, docker, the kernel, systemd …) has a few dozen examples at most: all its
# versions are one group.
VERSION_SERIES: Final[dict[str, tuple[tuple[tuple[int, int], str], ...]]] = {
    e.name: e.eras for e in ALL if e.eras
}
_NUMBERS = re.compile(r"\d+")


def version_group(engine: str, version: str) -> str:
    """The version series of `engine` `version`; an engine without series: `engine (all)`."""
    series = VERSION_SERIES.get(engine)
    if not series:
        return f"{engine} (all)"
    numbers = [int(n) for n in _NUMBERS.findall(version)[:2]]
    key = tuple([*numbers, 0, 0][:2])
    name = series[0][1]
    for lowest, candidate in series:
        if key >= lowest:
            name = candidate
    return name


def group_of(record: dict[str, Any], by: str) -> str:
    """The group a corpus record belongs to when holding out `by` (one of HOLD_OUTS)."""
    fields = {"versions": ("engine", "version"), "shapes": ("shape",), "engines": ("engine",)}[by]
    values = [record.get(f) for f in fields]
    if not all(isinstance(v, str) and v for v in values):
        raise InputError(
            f"corpus example {record.get('id')}: no {' and '.join(fields)} to hold out {by} by"
        )
    if by == "versions":
        return version_group(str(values[0]), str(values[1]))
    return str(values[0])


def _order(name: str) -> tuple[int, int, str]:
    engine = name.split(" ", 1)[0]
    names = [n for _, n in VERSION_SERIES.get(engine, ())]
    engines = list(VERSION_SERIES)
    return (
        engines.index(engine) if engine in engines else len(engines),
        names.index(name) if name in names else len(names),
        name,
    )


def grouped_splits(groups: Sequence[str]) -> list[tuple[str, list[int], list[int]]]:
    """One fold per group: (group left out, indices to train on, indices to test on)."""
    names = sorted(set(groups), key=_order)
    if len(names) < 2:
        raise InputError(f"holding out needs at least two groups, the corpus has {names}")
    return [
        (
            name,
            [i for i, g in enumerate(groups) if g != name],
            [i for i, g in enumerate(groups) if g == name],
        )
        for name in names
    ]


def macro_f1(table: dict[str, Any]) -> float:
    """Mean F1 over the labels that occur in the truth: a label only predicted (`unknown`,
    or a failure the left-out group never shows) adds no zero of its own; its wrong answers
    already lower the recall of the labels they were."""
    f1s = [s["f1"] for s in table["per_label"].values() if s["support"]]
    return round(sum(f1s) / len(f1s), 3) if f1s else 0.0


def _held_out_scores(
    examples: Sequence[Example], splits: Sequence[tuple[str, list[int], list[int]]]
) -> list[tuple[list[str], list[float]]]:
    """Each example's (classes, decision scores) from the fold that left it out. BLAS runs on
    one thread: the fits are small, and OpenBLAS's spinning threads slow them tenfold on a
    busy machine (one thread also sums in the same order on any machine)."""
    from threadpoolctl import threadpool_limits

    importlib.import_module("sklearn.linear_model")  # BLAS loaded, so that the limit holds
    out: list[tuple[list[str], list[float]]] = [([], []) for _ in examples]
    with threadpool_limits(limits=1, user_api="blas"):
        for _, train_idx, test_idx in splits:
            train_part = [examples[i] for i in train_idx]
            if len({e.label for e in train_part}) < 2:
                raise InputError("a fold's training part needs examples of at least two labels")
            clf, vocabulary = _fit(train_part)
            classes = [str(c) for c in clf.classes_]
            test_part = [examples[i] for i in test_idx]
            decision = clf.decision_function(_matrix(test_part, vocabulary))
            for row, i in zip(decision, test_idx, strict=True):
                out[i] = (classes, [float(v) for v in row])
    return out


def _probabilities(classes: Sequence[str], row: Sequence[float], t: float) -> dict[str, float]:
    top = max(row)
    exps = [math.exp((s - top) / t) for s in row]
    return {c: e / sum(exps) for c, e in zip(classes, exps, strict=True)}


def _summary(truth: Sequence[str], combined: Sequence[str], model: Sequence[str]) -> dict[str, Any]:
    table = _scores_table(truth, combined)
    model_table = _scores_table(truth, model)
    return {
        "examples": len(truth),
        "accuracy": table["accuracy"],
        "macro_f1": macro_f1(table),
        "accuracy_model_only": model_table["accuracy"],
        "macro_f1_model_only": macro_f1(model_table),
        "table": table,
    }


def evaluate_holdout(
    records: Iterator[dict[str, Any]],
    rules: RuleSet,
    by: str,
    *,
    calibration: bool = False,
    thresholds: Sequence[float] = THRESHOLDS,
) -> dict[str, Any]:
    """Leave out one group at a time; per-fold and pooled scores of the combined label (rules
    and model, what `classify` answers), with the model alone and the rules alone beside;
    with `calibration`, the reliability diagrams of both (`advisor.diagnosis.calibration`)."""
    if by not in HOLD_OUTS:
        raise InputError(f"cannot hold out {by!r}: one of {', '.join(HOLD_OUTS)}")
    kept = list(records)
    groups = [group_of(r, by) for r in kept]
    splits = grouped_splits(groups)
    examples = examples_of(iter(kept), rules)
    scored = _held_out_scores(examples, splits)
    known = [
        (s, c.index(e.label)) for e, (c, s) in zip(examples, scored, strict=True) if e.label in c
    ]
    temperature = fit_temperature([s for s, _ in known], [k for _, k in known])
    truth = [e.label for e in examples]
    combined, model, rules_only = [], [], []
    combined_conf, model_conf = [], []
    for ex, (classes, row) in zip(examples, scored, strict=True):
        probabilities = _probabilities(classes, row, temperature)
        model.append(max(probabilities, key=lambda k: probabilities[k]))
        model_conf.append(max(probabilities.values()))
        label, confidence = _combined(ex, probabilities)
        combined.append(label)
        combined_conf.append(confidence)
        rules_only.append(ex.rule_label or UNKNOWN)
    folds = []
    for name, train_idx, test_idx in splits:
        fold = _summary(*([seq[i] for i in test_idx] for seq in (truth, combined, model)))
        del fold["table"]
        fold["accuracy_rules_only"] = _scores_table(
            [truth[i] for i in test_idx], [rules_only[i] for i in test_idx]
        )["accuracy"]
        folds.append({"left_out": name, "train": len(train_idx), **fold})
    pooled = _summary(truth, combined, model)
    table = pooled.pop("table")
    if calibration:
        pooled["calibration"] = {
            "combined": reliability(combined_conf, _right(truth, combined), BINS, thresholds),
            "model_only": reliability(model_conf, _right(truth, model), BINS, thresholds),
        }
    return {
        "hold_out": by,
        **pooled,
        "accuracy_rules_only": _scores_table(truth, rules_only)["accuracy"],
        "temperature": temperature,
        "per_label": table["per_label"],
        "confusion": table["confusion"],
        "folds": folds,
    }


def _right(truth: Sequence[str], predicted: Sequence[str]) -> list[bool]:
    return [t == p for t, p in zip(truth, predicted, strict=True)]


def format_holdout(report: dict[str, Any]) -> str:
    """The per-fold table, then the pooled report (per-label scores of the combined label)."""
    by = report["hold_out"]
    lines = [
        f"hold-out {by}: {len(report['folds'])} folds, each leaves out one group "
        "(scores of rules and model combined; model alone and rules alone beside)",
        f"  {'left out':<24} {'train':>5} {'n':>5} {'acc':>6} {'macroF1':>7} "
        f"{'model':>6} {'mF1':>6} {'rules':>6}",
    ]
    for f in report["folds"]:
        lines.append(
            f"  {f['left_out']:<24} {f['train']:>5} {f['examples']:>5} {f['accuracy']:>6.3f} "
            f"{f['macro_f1']:>7.3f} {f['accuracy_model_only']:>6.3f} "
            f"{f['macro_f1_model_only']:>6.3f} {f['accuracy_rules_only']:>6.3f}"
        )
    lines.append(format_report(f"pooled (hold-out {by}, combined label)", report))
    for name, diagram in report.get("calibration", {}).items():
        lines.append(format_reliability(diagram, f"calibration (hold-out {by}, {name})"))
    return "\n".join(lines)
