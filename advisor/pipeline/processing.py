"""After ingestion: fold new events into the projections, diagnose what they show, plan.

The one place that wires the stages after `ingest`: projector → diagnoser → (events) →
projector → planner → (events) → projector. Used by the `ingest` commands (once at the
end of a file, after every committed batch while following) and by `advisor rebuild`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from advisor.core.events import NewEvent
from advisor.core.taxonomy import UNKNOWN
from advisor.diagnosis.held import HELD_LINES, HeldLines
from advisor.diagnosis.live import Diagnoser
from advisor.diagnosis.model import load_model
from advisor.diagnosis.rules import RuleSet, load_rules
from advisor.pipeline.pacing import Passes
from advisor.planning.planner import Planner
from advisor.store import EventStore
from advisor.views.fold.projector import Projector, hand_lines
from advisor.views.fold.skipped import environmental, reason_of, skipped_event
from advisor.views.read.rows import RunView


@dataclass
class ProcessReport:
    folded: int = 0
    diagnosed: int = 0
    diagnosis_events: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "folded": self.folded,
            "diagnosed": self.diagnosed,
            "diagnosis_events": self.diagnosis_events,
        }


class Processor:
    def __init__(
        self,
        store: EventStore,
        rules: RuleSet | None = None,
        model_path: Path | None = None,
        *,
        held_lines: int = HELD_LINES,
    ) -> None:
        """`held_lines`: how many of the fold's parsed lines may wait for the diagnoser
        (`diagnosis.held`; 0: none, every run is read back from the store)."""
        model = load_model(model_path)
        rules = rules or load_rules()
        held = HeldLines(rules, held_lines)  # the fold's parsed lines, for the diagnoser
        hand_lines(store, held)  # every fold of the store in this process hands them over
        self.projector = Projector(store, held)
        self.diagnoser = Diagnoser(
            store, rules, model, model.digest if model is not None else None, held
        )
        self.planner = Planner(store)
        self.store = store
        self._after: Callable[[], None] | None = None

    def follow(self, after: Callable[[], None] | None = None) -> None:
        """Diagnose after every batch the store commits (live ingestion); then call `after`
        (auto-remediation). Batches from several threads (journal, GPU sampler) are taken one
        at a time; one that comes during a pass makes the pass go round again
        (`pipeline.pacing.Passes`)."""
        self._after = after
        self.store.on_append(Passes(self._pass))

    def _pass(self) -> None:
        self.run(final=False)
        if self._after is not None:
            self._after()

    def run(self, *, final: bool) -> ProcessReport:
        """Catch up, diagnose and plan; `final` when the input is complete (no more lines
        coming). Each run's incident is planned right after its diagnosis is folded."""
        report = ProcessReport(folded=self.projector.catch_up())
        self._plan(report)
        for run in self.diagnoser.pending(final=final):
            events = self._diagnose(run)
            report.diagnosed += 1
            if events:
                report.diagnosis_events += self._append(run, events)
                report.folded += self.projector.catch_up()
                self._plan(report)
        return report

    def _plan(self, report: ProcessReport) -> None:
        """Plan the incidents classified since the last pass (their events are counted with
        the diagnosis's) and fold the plans."""
        added = self.planner.catch_up()
        if added:
            report.diagnosis_events += added
            report.folded += self.projector.catch_up()

    def _diagnose(self, run: RunView) -> list[NewEvent]:
        """The events diagnosing one run adds. A run whose diagnosis raises is recorded as
        skipped (`pipeline.skipped`, once) and classified `unknown`, which is never acted on
        and takes it off the pending list: the next runs are still diagnosed. The store's
        own failures propagate."""
        try:
            return self.diagnoser.step(run)
        except Exception as e:
            if environmental(e):
                raise
            return self._undiagnosable(run, reason_of(e))

    def _append(self, run: RunView, events: list[NewEvent]) -> int:
        """Append a run's diagnosis; one the store refuses (a value it cannot write) is
        recorded as skipped instead."""
        try:
            return self.store.append(events).appended
        except Exception as e:
            if environmental(e):
                raise
            return self.store.append(self._undiagnosable(run, reason_of(e))).appended

    def _undiagnosable(self, run: RunView, reason: str) -> list[NewEvent]:
        """The skip, and for a run that was to be judged its classification as `unknown`
        for its lines (what a verdict would have said, with the verdict's key). A run that
        has its label already (the first of an incident) keeps it."""
        skipped = skipped_event(
            run.stream,
            run.ended_us or run.started_us,
            "diagnosis",
            run.last_seq,
            reason,
            run.run_id,
        )
        if run.label is not None and not run.label_stale:
            return [skipped]
        return [skipped, self.diagnoser.classified(run, UNKNOWN, 0.0, None)]

    def rebuild(self) -> int:
        return self.projector.rebuild()
