"""Diagnosis as events: runs that ended (or died) are classified, failures open incidents.

`Diagnoser.pending()` reads the `runs` projection for runs to judge: not classified yet, or
classified for other lines than they have now (`label_stale`: older lines arrived since). It
reads each run's own lines back from the store (`views.read.reading.run_lines`: the stream's
lines between its first and last, in the fold's order, plus the host's kernel lines in its
time window), and judges the run with the same rules and model as `advisor classify`. What it
concludes is appended as events, each with an idempotency key, so a second diagnoser racing
this one, or a re-run after a crash, adds nothing twice:

* `run.classified` for the lines judged (`content`, part of its key: a run whose lines
  change is judged again);
* for a failed run that opens an incident — no incident of the unit with the same label and
  config key is open before it, as the fold works incidents out (`views.fold.incidents`) —
  `incident.opened` and `incident.classified` (its key names the lines too). The plan is
  the planning stage's (`planning.planner`), made from the `incident.classified`.

Incidents themselves, their recurrences and resolutions, are the fold's, worked out from the
classified runs whatever order they were diagnosed in. When late lines make a run that was a
recurrence the first of an incident, `pending()` yields that run again once its lines are
classified, and `step` writes the incident's diagnosis. `pending()` goes on yielding
what the events just appended (and folded) leave to do, until nothing is left.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from advisor.core.events import NewEvent
from advisor.core.records import stable_key
from advisor.diagnosis.classify import RunVerdict, verdict_facts
from advisor.diagnosis.held import HeldLines
from advisor.diagnosis.model import LinearModel
from advisor.diagnosis.rules import RuleSet
from advisor.diagnosis.stream import LineView, judge_lines
from advisor.parsing.lines import LogLine, clean_text
from advisor.store import EventStore
from advisor.views.fold.keys import config_key
from advisor.views.read.incidents import would_open_incident
from advisor.views.read.reading import kernel_lines, run_lines
from advisor.views.read.rows import RunView
from advisor.views.read.runs import runs_to_diagnose

SOURCE: Final = "diagnosis"
MAX_ROUNDS: Final = 100  # passes over what is left to do, in one `pending()`


@dataclass(frozen=True)
class Diagnoser:
    store: EventStore
    rules: RuleSet
    model: LinearModel | None
    model_name: str | None = None
    held: HeldLines | None = None  # the fold's lines, when this process folds them
    # how each run's lines were had: "held" (the fold's), "read" (back from the store)
    judged_from: Counter[str] = field(default_factory=Counter, compare=False)

    def pending(self, *, final: bool = False) -> Iterator[RunView]:
        """Runs to look at now, in time order: ended ones not classified for their lines;
        runs that died but have not ended only when the input is complete (`final`), so a
        traceback still arriving is whole; then the first runs of incidents the diagnoser
        has said nothing of yet. Once those are done (the caller appends what `step` returns
        and folds it), what is left to do then, each run (and its lines) once."""
        done: set[tuple[str, str]] = set()
        for _ in range(MAX_ROUNDS):
            todo = [run for run in self._todo(final) if (run.run_id, self._task(run)) not in done]
            if not todo:
                return
            for run in todo:
                done.add((run.run_id, self._task(run)))
                yield run

    @staticmethod
    def _task(run: RunView) -> str:
        judged = run.label is None or run.label_stale
        return f"run:{run.content}" if judged else "incident"

    def _todo(self, final: bool) -> list[RunView]:
        return runs_to_diagnose(self.store, final=final)

    def step(self, run: RunView) -> list[NewEvent]:
        """The events that diagnosing one run adds (empty when there is nothing to say)."""
        verdict, lines, facts = self._judge(run)
        if run.label is not None and not run.label_stale:
            # The first run of an incident nothing was said of yet (late lines made it so).
            label, confidence = run.label, run.confidence or 0.0
            return self._incident(run, verdict, label, confidence, lines, facts)
        events = [self.classified(run, verdict.label, verdict.confidence, verdict.phase)]
        if verdict.failed and would_open_incident(self.store, run, verdict.label):
            events.extend(
                self._incident(run, verdict, verdict.label, verdict.confidence, lines, facts)
            )
        return events

    def classified(
        self, run: RunView, label: str, confidence: float, phase: str | None
    ) -> NewEvent:
        """The `run.classified` for `run`'s lines as the row has them."""
        return self._event(
            run,
            {
                "type": "run.classified",
                "run_id": run.run_id,
                "host": run.host,
                "unit": run.unit,
                "label": label,
                "confidence": confidence,
                "phase": phase,
                "through_seq": run.last_seq,
            },
            "run.classified",
        )

    # -- helpers ---------------------------------------------------------------------
    def _judge(self, run: RunView) -> tuple[RunVerdict, list[LogLine], dict[str, Any]]:
        """The run's verdict, its evidence lines and its facts. Its lines (its own and the
        host's kernel lines around it) are the fold's, held as it cut them
        (`diagnosis.held`), where this process folded exactly those; otherwise they are read
        back from the store as they are judged. Either way only those a streamed run keeps
        are held (`diagnosis.stream`): a run of millions of lines costs no more memory than
        one of thousands, and, held, no more time."""
        peak = None
        if run.peak_gpu_used_bytes is not None and run.peak_gpu_total_bytes:
            peak = run.peak_gpu_used_bytes / run.peak_gpu_total_bytes
        kernel = kernel_lines(self.store, run)
        if self.held is not None:
            with self.held.judging(run, [event.seq for event in kernel]) as judging:
                if judging is not None:
                    self.judged_from["held"] += 1
                    return _judged(
                        *judging.judge(run.unit, run.invocation_id, self.rules, self.model, peak)
                    )
        self.judged_from["read"] += 1
        lines = run_lines(self.store, run, kernel)
        return _judged(
            *judge_lines(lines, run.unit, run.invocation_id, self.rules, self.model, peak)
        )

    def _event(
        self, run: RunView, payload: dict[str, Any], kind: str, ident: str | None = None
    ) -> NewEvent:
        """A diagnosis event about `run`; a `run.classified` (and `incident.classified`) names
        the run's lines (`content`), in its payload and its key: judged again for other
        lines, it is a new event, not a duplicate."""
        if kind in ("run.classified", "incident.classified") and run.content:
            if kind == "run.classified":
                payload = {**payload, "content": run.content}
            ident = f"{ident or run.run_id}:{run.content}"
        time_us = run.ended_us or run.started_us
        return NewEvent.model_validate(
            {
                "stream": run.stream,
                "time_us": time_us,
                "source": SOURCE,
                "key": stable_key(f"{kind}:{ident or run.run_id}".encode()),
                "payload": payload,
            }
        )

    def _incident(
        self,
        run: RunView,
        verdict: RunVerdict,
        label: str,
        confidence: float,
        lines: Sequence[LogLine],
        facts: dict[str, Any],
    ) -> list[NewEvent]:
        """A new incident's events: opened, classified (facts, evidence)."""
        key = config_key(dict(run.config))
        by_seq = {line.number: line for line in lines}
        incident_id = run.run_id
        return [
            self._event(
                run,
                {
                    "type": "incident.opened",
                    "incident_id": incident_id,
                    "host": run.host,
                    "unit": run.unit,
                    "run_id": run.run_id,
                    "config_key": key,
                },
                "incident.opened",
            ),
            self._event(
                run,
                {
                    "type": "incident.classified",
                    "incident_id": incident_id,
                    "run_id": run.run_id,
                    "label": label,
                    "confidence": confidence,
                    "phase": verdict.phase,
                    "facts": facts,
                    "evidence": [
                        {"seq": seq, "text": clean_text(by_seq[seq].text)}
                        for seq in verdict.evidence
                        if seq in by_seq
                    ],
                    "candidates": [
                        {
                            "label": c.label,
                            "confidence": c.confidence,
                            "source": c.source,
                            "rule": c.rule_id,
                        }
                        for c in verdict.candidates
                    ],
                    "through_seq": run.last_seq,
                    "model": self.model_name,
                },
                "incident.classified",
            ),
        ]


def _judged(
    verdict: RunVerdict, kept: LineView
) -> tuple[RunVerdict, list[LogLine], dict[str, Any]]:
    """A verdict, its evidence lines and its facts, from the lines its run kept."""
    facts = verdict_facts(verdict, kept)
    evidence = [kept[i].line for i in verdict.evidence]
    verdict.evidence = [line.number for line in evidence]
    return verdict, evidence, facts
