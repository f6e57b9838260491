"""Diagnosis as events: runs that ended (or died) are classified, failures open incidents.

`Diagnoser.pending()` reads the `runs` projection for runs to judge: not classified yet, or
classified for other lines than they have now (`label_stale`: older lines arrived since). It
reads each run's own lines back from the store (`projections.run_log_events`: the stream's
lines between its first and last, in the fold's order, plus the host's kernel lines in its
time window), and judges the run with the same rules and model as `advisor classify`. What it
concludes is appended as events, each with an idempotency key, so a second diagnoser racing
this one, or a re-run after a crash, adds nothing twice:

* `run.classified` for the lines judged (`content`, part of its key: a run whose lines
  change is judged again);
* for a failed run that opens an incident — no incident of the unit with the same label and
  config key is open before it, as the fold works incidents out (`projections`) —
  `incident.opened`, `incident.classified` (its key names the lines too) and the plan's
  `action.proposed` steps (keyed by incident id: one plan per incident).

Incidents themselves, their recurrences and resolutions, are the fold's, worked out from the
classified runs whatever order they were diagnosed in. When late lines make a run that was a
recurrence the first of an incident, `pending()` yields that run again once its lines are
classified, and `step` writes the incident's diagnosis and plan. `pending()` goes on yielding
what the events just appended (and folded) leave to do, until nothing is left.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson
from sqlalchemy import or_, select

from advisor.core.events import GpuSampled, LogRecorded, NewEvent
from advisor.core.records import stable_key
from advisor.diagnosis.classify import RunVerdict, judge_run, verdict_facts
from advisor.diagnosis.model import LinearModel
from advisor.diagnosis.rules import RuleSet
from advisor.parsing.lines import LogLine, clean_text, line_from_payload
from advisor.parsing.sequence import parse, single_run
from advisor.planning.recommend import Holder
from advisor.store import EventFilter, EventStore
from advisor.store.schema import incidents, runs
from advisor.views.projections import (
    CURRENT,
    config_key,
    in_line_order,
    run_log_events,
)

SOURCE: Final = "diagnosis"
KERNEL_MARGIN_US: Final = 5_000_000
MAX_ROUNDS: Final = 100   # passes over what is left to do, in one `pending()`


@dataclass(frozen=True)
class Diagnoser:
    store: EventStore
    rules: RuleSet
    model: LinearModel | None
    model_name: str | None = None

    def pending(self, *, final: bool = False) -> Iterator[dict[str, Any]]:
        """Runs to look at now, in time order: ended ones not classified for their lines;
        runs that died but have not ended only when the input is complete (`final`), so a
        traceback still arriving is whole; then the first runs of incidents the diagnoser
        has said nothing of yet. Once those are done (the caller appends what `step` returns
        and folds it), what is left to do then, each run (and its lines) once."""
        done: set[tuple[str, str]] = set()
        for _ in range(MAX_ROUNDS):
            todo = [run for run in self._todo(final)
                    if (run["run_id"], self._task(run)) not in done]
            if not todo:
                return
            for run in todo:
                done.add((run["run_id"], self._task(run)))
                yield run

    @staticmethod
    def _task(run: dict[str, Any]) -> str:
        judged = run["label"] is None or run["label_stale"]
        return f"run:{run['content']}" if judged else "incident"

    def _todo(self, final: bool) -> list[dict[str, Any]]:
        r, i = runs.c, incidents.c
        with self.store.connect() as conn:
            rows = conn.execute(select(runs).where(or_(r.label.is_(None), r.label_stale))
                                .where(r.ended | r.died)
                                .order_by(r.started_us, r.run_id)).all()
            unsaid = conn.execute(
                select(runs).join(incidents, i.incident_id == r.run_id)
                .where(i.status.in_(CURRENT)).where(r.label.isnot(None))
                .where(or_(r.label_stale.is_(None), ~r.label_stale))
                .where(or_(i.classified_seq.is_(None), i.classified_seq < r.label_seq))
                .order_by(r.started_us, r.run_id)).all()
        return [dict(row._mapping) for row in rows if row.ended or final] + \
            [dict(row._mapping) for row in unsaid]

    def step(self, run: dict[str, Any]) -> list[NewEvent]:
        """The events that diagnosing one run adds (empty when there is nothing to say)."""
        verdict, lines, facts, own_pids = self._judge(run)
        if run["label"] is not None and not run["label_stale"]:
            # The first run of an incident nothing was said of yet (late lines made it so).
            label, confidence = run["label"], run["confidence"]
            return self._incident(run, verdict, label, confidence, lines, facts, own_pids)
        events = [self.classified(run, verdict.label, verdict.confidence, verdict.phase)]
        if verdict.failed and self._opens_incident(run, verdict.label):
            events.extend(self._incident(run, verdict, verdict.label, verdict.confidence,
                                         lines, facts, own_pids))
        return events

    def classified(self, run: dict[str, Any], label: str, confidence: float,
                   phase: str | None) -> NewEvent:
        """The `run.classified` for `run`'s lines as the row has them."""
        return self._event(run, {
            "type": "run.classified", "run_id": run["run_id"], "host": run["host"],
            "unit": run["unit"], "label": label, "confidence": confidence, "phase": phase,
            "through_seq": run["last_seq"]}, "run.classified")

    # -- helpers ---------------------------------------------------------------------
    def _judge(self, run: dict[str, Any]
               ) -> tuple[RunVerdict, list[LogLine], dict[str, Any], set[int]]:
        until = run["ended_us"] or run["last_us"] or run["started_us"]
        kernel = sorted((event for event in self.store.read(EventFilter(
            stream=f"{run['host']}/kernel", since_us=run["started_us"] - KERNEL_MARGIN_US,
            until_us=until + KERNEL_MARGIN_US)) if isinstance(event.payload, LogRecorded)),
            key=lambda e: e.time_us)
        ordered = [line_from_payload(event.seq, event.payload.model_dump(), event.time_us)
                   for event in in_line_order(heapq.merge(run_log_events(self.store, run),
                                                          kernel, key=lambda e: e.time_us))]
        parsed = parse(ordered)
        whole = single_run(parsed, run["unit"], run["invocation_id"])
        peak = None
        if run["peak_gpu_used_bytes"] is not None and run["peak_gpu_total_bytes"]:
            peak = run["peak_gpu_used_bytes"] / run["peak_gpu_total_bytes"]
        verdict = judge_run(whole, parsed, self.rules, self.model, peak)
        facts = verdict_facts(verdict, parsed)
        verdict.evidence = [parsed[i].line.number for i in verdict.evidence]
        own = {pid for p in parsed for pid in (p.split.pid, p.line.pid)
               if pid is not None and pid != 1}
        return verdict, ordered, facts, own

    def _event(self, run: dict[str, Any], payload: dict[str, Any], kind: str,
               ident: str | None = None) -> NewEvent:
        """A diagnosis event about `run`; a `run.classified` (and `incident.classified`) names
        the run's lines (`content`), in its payload and its key: judged again for other
        lines, it is a new event, not a duplicate."""
        if kind in ("run.classified", "incident.classified") and run.get("content"):
            if kind == "run.classified":
                payload = {**payload, "content": run["content"]}
            ident = f"{ident or run['run_id']}:{run['content']}"
        time_us = run["ended_us"] or run["started_us"]
        return NewEvent.model_validate({
            "stream": run["stream"], "time_us": time_us, "source": SOURCE,
            "key": stable_key(f"{kind}:{ident or run['run_id']}".encode()), "payload": payload})

    def _opens_incident(self, run: dict[str, Any], label: str) -> bool:
        """Would `run`, failed as `label`, open an incident (not add to one open before it),
        as the fold works incidents out: it does unless an incident of the unit with the
        same label and config key opened since the last run before it that came up ready —
        or it came up ready itself (which ended what was open)."""
        if run["ready_us"] is not None:
            return True
        r = runs.c
        key = config_key(orjson.loads(run["config"]))
        with self.store.connect() as conn:
            ready = conn.execute(select(r.started_us).where(r.stream == run["stream"])
                                 .where(r.ready_us.isnot(None))
                                 .where(r.started_us < run["started_us"])
                                 .order_by(r.started_us.desc()).limit(1)).scalar()
            firsts = select(r.config).where(r.stream == run["stream"]) \
                .where(r.incident_id == r.run_id).where(r.label == label) \
                .where(r.started_us < run["started_us"])
            if ready is not None:
                firsts = firsts.where(r.started_us >= ready)
            configs = conn.execute(firsts).scalars().all()
        return all(config_key(orjson.loads(config)) != key for config in configs)

    def _incident(self, run: dict[str, Any], verdict: RunVerdict, label: str,
                  confidence: float, lines: Sequence[LogLine], facts: dict[str, Any],
                  own_pids: set[int]) -> list[NewEvent]:
        """A new incident's events: opened, classified (facts, evidence), its plan."""
        key = config_key(orjson.loads(run["config"]))
        by_seq = {line.number: line for line in lines}
        incident_id = run["run_id"]
        proposals = self.propose(run, incident_id, incident_id, label, confidence, facts,
                                 own_pids, run["invocation_id"])
        return [
            self._event(run, {"type": "incident.opened", "incident_id": incident_id,
                              "host": run["host"], "unit": run["unit"], "run_id": run["run_id"],
                              "config_key": key}, "incident.opened"),
            self._event(run, {
                "type": "incident.classified", "incident_id": incident_id,
                "run_id": run["run_id"], "label": label,
                "confidence": confidence, "phase": verdict.phase, "facts": facts,
                "evidence": [{"seq": seq, "text": clean_text(by_seq[seq].text)}
                             for seq in verdict.evidence if seq in by_seq],
                "candidates": [{"label": c.label, "confidence": c.confidence,
                                "source": c.source, "rule": c.rule_id}
                               for c in verdict.candidates],
                "through_seq": run["last_seq"], "model": self.model_name},
                "incident.classified"),
            *proposals,
        ]

    def _holders(self, run: dict[str, Any], own_pids: set[int]
                 ) -> tuple[tuple[Holder, ...], tuple[int, ...]]:
        """Processes NVML saw on the host's GPUs around the failure that are not the run's
        own (the latest sample of each GPU before the run ended), and the GPUs they hold."""
        end = run["ended_us"] or run["started_us"]
        latest: dict[int, Any] = {}
        for event in self.store.read(EventFilter(type="gpu.sampled",
                                                 since_us=run["started_us"] - 10_000_000,
                                                 until_us=end + 2_000_000)):
            p = event.payload
            if isinstance(p, GpuSampled) and p.host == run["host"] and p.processes is not None:
                latest[p.index] = p
        found: dict[int, Holder] = {}
        on: set[int] = set()
        for sample in latest.values():
            for proc in sample.processes or ():
                if proc.pid not in own_pids and proc.used_bytes:
                    held = found.get(proc.pid)
                    used = (held.used_bytes or 0) + proc.used_bytes if held else proc.used_bytes
                    found[proc.pid] = Holder(proc.pid, used, proc.unit)
                    on.add(sample.index)
        return (tuple(sorted(found.values(), key=lambda h: -(h.used_bytes or 0))),
                tuple(sorted(on)))

    def propose(self, run: dict[str, Any], plan_id: str, incident_id: str, label: str,
                confidence: float, facts: dict[str, Any], own_pids: set[int],
                invocation_id: str | None) -> list[NewEvent]:
        """`action.proposed` events for a plan for `run`'s failure: a new incident's, or a
        new plan for an open incident (`advisor replan`), made for `invocation_id`."""
        from advisor.planning.recommend import PlanContext, plan
        from advisor.views.history import ready_bound_s, release_p95_s, unit_gpus

        end = run["ended_us"] or run["started_us"]
        holders, held_on = self._holders(run, own_pids) if label == "gpu_memory_held" \
            else ((), ())
        gpus = unit_gpus(self.store, run["host"], run["unit"], run["started_us"], end)
        if held_on:
            gpus = tuple(sorted(set(gpus or ()) | set(held_on)))
        context = PlanContext(unit=run["unit"],
                              release_p95_s=release_p95_s(self.store, run["host"]),
                              holders=holders, invocation_id=invocation_id, gpus=gpus,
                              ready_bound_s=ready_bound_s(self.store, run["host"], run["unit"]))
        events = []
        for step, action in enumerate(plan(label, confidence, facts, context)):
            action_id = f"{plan_id}#{step}"
            events.append(self._event(run, {
                "type": "action.proposed", "action_id": action_id, "plan_id": plan_id,
                "step": step, "incident_id": incident_id, "host": run["host"],
                **action.model_dump(exclude_none=True)}, "action.proposed", action_id))
        return events
