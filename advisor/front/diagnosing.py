"""The front door's diagnosis without a store: classify a log, the rules in force and a rule
tried on a log, and the learned model trained and evaluated. Each delegates to
advisor.diagnosis (and advisor.pipeline.inputs to read the log)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.front.base import Front

if TYPE_CHECKING:
    from advisor.diagnosis.rulefile import Rule
    from advisor.diagnosis.training import TrainResult
    from advisor.parsing.lines import LogLine


@dataclass
class Classified:
    """A log classified: the diagnosis (the JSON contract, docs/contract), the journal
    lines skipped as malformed (line number, why), and how many lines were read."""

    result: dict[str, Any]
    malformed: list[tuple[int, str]] = field(default_factory=list)
    read: int = 0


def _counted(lines: Iterator[LogLine], done: Classified) -> Iterator[LogLine]:
    """`lines`, counting them in `done.read`."""
    for line in lines:
        done.read += 1
        yield line


class Diagnosing(Front):
    def classify(
        self, file: str, rules_dirs: Iterable[Path] = (), model_path: Path | None = None
    ) -> Classified:
        """Classify the log `file` (journalctl -o json or plain text; `-`: stdin), read as
        it is diagnosed (memory does not grow with its size)."""
        from advisor.diagnosis.model import load_model
        from advisor.diagnosis.rules import load_rules
        from advisor.diagnosis.stream import diagnose_stream
        from advisor.pipeline.inputs import open_log
        from advisor.reports.contract import to_contract

        rules = load_rules(rules_dirs)
        model = load_model(model_path)
        done = Classified({})
        fmt, lines = open_log(file, malformed=done.malformed)
        judged = diagnose_stream(_counted(lines, done), rules, model)
        done.result = to_contract(judged, fmt, len(done.malformed))
        return done

    @staticmethod
    def step_title(step: dict[str, Any]) -> str:
        """A plan step's title, as the write-ups give it."""
        from advisor.reports.writeup import step_title

        return step_title(step)

    def rules(self, rules_dirs: Iterable[Path] = ()) -> list[Rule]:
        """The rules in force (shipped ones, then those of `rules_dirs`), in tier order."""
        from advisor.diagnosis.rules import load_rules

        return list(load_rules(rules_dirs).rules)

    def try_rule(
        self, rule_id: str, file: str, rules_dirs: Iterable[Path] = ()
    ) -> list[dict[str, Any]]:
        """Whether rule `rule_id` fires on each run of log `file`, and on which line."""
        from advisor.diagnosis.ruletest import find_rule, try_rule
        from advisor.pipeline.inputs import read_log

        rule = find_rule(rule_id, rules_dirs)
        _, lines = read_log(file)
        return try_rule(rule, lines)

    def train(
        self,
        corpus: Path | None,
        rules_dirs: Iterable[Path] = (),
        out: Path | None = None,
        *,
        with_store: bool = False,
    ) -> tuple[TrainResult, Path]:
        """The model trained on `corpus` (default: the checkout's) and, `with_store`, on the
        incidents the store's operators corrected (`advisor.diagnosis.corrections`); and
        where it belongs: `out`, else the shipped model's path. Nothing is written here."""
        from itertools import chain

        from advisor.diagnosis import training
        from advisor.diagnosis.corrections import training_records
        from advisor.diagnosis.rules import load_rules

        records = training.load_corpus(corpus)
        if with_store:
            records = chain(records, training_records(self.store))
        result = training.train(records, load_rules(rules_dirs))
        return result, out or training.shipped_model_path()

    def evaluate(
        self,
        corpus: Path | None,
        *,
        folds: int = 5,
        hold_out: str | None = None,
        golden: Path | None = None,
        rules_dirs: Iterable[Path] = (),
        calibration: bool = False,
        with_store: bool = False,
        model_path: Path | None = None,
    ) -> dict[str, Any]:
        """Cross-validation (or, with `hold_out`, a whole group left out at a time, with
        `calibration` its reliability diagrams), with `golden` the shipped model scored on a
        folder of golden logs, and `with_store` the agreement of rules and model (the
        shipped one, or `model_path`) with the store's operators, instead of the
        cross-validation when there is no `hold_out`: name → report."""
        from advisor.diagnosis import holdout, training
        from advisor.diagnosis.rules import load_rules
        from advisor.pipeline.inputs import read_log

        rules = load_rules(rules_dirs)
        reports: dict[str, Any] = {}
        if hold_out is not None:
            records = training.load_corpus(corpus)
            report = holdout.evaluate_holdout(
                records, rules, hold_out, calibration=calibration, thresholds=_thresholds()
            )
            reports["hold_out"] = _with_threshold(report)
        elif not with_store:
            reports["cross_validation"] = training.evaluate(
                training.load_corpus(corpus), rules, folds=folds
            )
        if golden is not None:
            reports["golden"] = training.evaluate_golden(golden, rules, read_log)
        if with_store:
            from advisor.diagnosis.corrections import agreement
            from advisor.diagnosis.model import load_model

            reports["operators"] = agreement(self.store, rules, load_model(model_path))
        return reports

    @staticmethod
    def evaluation_text(name: str, report: dict[str, Any]) -> str:
        """One report of `evaluate`, for a person."""
        from advisor.diagnosis import holdout, training

        if name == "hold_out":
            return holdout.format_holdout(report)
        if name == "operators":
            from advisor.diagnosis.corrections import format_agreement

            return format_agreement(report)
        return training.format_report(name, report)


def _with_threshold(report: dict[str, Any]) -> dict[str, Any]:
    """A hold-out report with calibration, and what it says of the planner's threshold
    (`ACT_BELOW`: a diagnosis less sure than it only notifies): the accuracy of the
    combined labels at or above it."""
    from advisor.planning.recommend import ACT_BELOW

    combined = report.get("calibration", {}).get("combined")
    if combined is not None:
        combined["act_below"] = ACT_BELOW
        combined["at_act_below"] = next(
            (t for t in combined["at_least"] if t["threshold"] == ACT_BELOW), None
        )
    return report


def _thresholds() -> tuple[float, ...]:
    """The confidences calibration reports the accuracy at or above: its own and the
    planner's `ACT_BELOW`."""
    from advisor.diagnosis.calibration import THRESHOLDS
    from advisor.planning.recommend import ACT_BELOW

    return tuple(sorted({*THRESHOLDS, ACT_BELOW}))
