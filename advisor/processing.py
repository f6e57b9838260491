"""After ingestion: fold new events into the projections and diagnose what they show.

The one place that wires the stages after `ingest`: projector → diagnoser → (events) →
projector. Used by the `ingest` commands (once at the end of a file, after every committed
batch while following) and by `advisor rebuild`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from advisor.diagnosis.live import Diagnoser
from advisor.diagnosis.model import load_model
from advisor.diagnosis.rules import RuleSet, load_rules
from advisor.projections import Projector
from advisor.store import EventStore
from advisor.store.types import AppendResult


@dataclass
class ProcessReport:
    folded: int = 0
    diagnosed: int = 0
    diagnosis_events: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"folded": self.folded, "diagnosed": self.diagnosed,
                "diagnosis_events": self.diagnosis_events}


class Processor:
    def __init__(self, store: EventStore, rules: RuleSet | None = None,
                 model_path: Path | None = None) -> None:
        model = load_model(model_path)
        self.projector = Projector(store)
        self.diagnoser = Diagnoser(store, rules or load_rules(), model,
                                   model.digest if model is not None else None)
        self.store = store
        self._busy = False
        self._lock = threading.Lock()
        self._after: Callable[[], None] | None = None

    def follow(self, after: Callable[[], None] | None = None) -> None:
        """Diagnose after every batch the store commits (live ingestion); then call `after`
        (auto-remediation). Batches from several threads (journal, GPU sampler) are taken one
        at a time; a batch that arrives meanwhile is folded by the pass in progress or the
        next one."""
        self._after = after
        self.store.on_append(self._after_append)

    def _after_append(self, _result: AppendResult) -> None:
        if self._busy or not self._lock.acquire(blocking=False):
            return  # our own diagnosis events come back through here; or another pass runs
        try:
            self.run(final=False)
            if self._after is not None:
                self._busy = True
                try:
                    self._after()
                finally:
                    self._busy = False
        finally:
            self._lock.release()

    def run(self, *, final: bool) -> ProcessReport:
        """Catch up and diagnose; `final` when the input is complete (no more lines coming)."""
        self._busy = True
        try:
            report = ProcessReport(folded=self.projector.catch_up())
            for run in self.diagnoser.pending(final=final):
                events = self.diagnoser.step(run)
                report.diagnosed += 1
                if events:
                    report.diagnosis_events += self.store.append(events).appended
                    report.folded += self.projector.catch_up()
            return report
        finally:
            self._busy = False

    def rebuild(self) -> int:
        return self.projector.rebuild()
