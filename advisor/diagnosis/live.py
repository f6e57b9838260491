"""Diagnosis as events: runs that ended (or died) are classified, failures open incidents.

`Diagnoser.pending()` reads the `runs` projection for runs not classified yet, reads each
run's own events back from the store (plus the host's kernel lines in its time window), and
judges the run with the same rules and model as `advisor classify`. What it concludes is
appended as events — `run.classified`, `incident.opened` + `incident.classified`, or
`incident.recurred` when the unit fails the same way with the same config (a restart loop
counts once) — each with an idempotency key, so a second diagnoser racing this one, or a
re-run after a crash, adds nothing twice. `incident.resolved` follows when a later run of
the unit comes up healthy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson
from sqlalchemy import select

from advisor.diagnosis.classify import RunVerdict, judge_run, verdict_facts
from advisor.diagnosis.inputs import line_from_payload
from advisor.diagnosis.lines import LogLine, clean_text
from advisor.diagnosis.model import LinearModel
from advisor.diagnosis.rules import RuleSet
from advisor.diagnosis.sequence import parse, single_run
from advisor.events import GpuSampled, LogRecorded, NewEvent
from advisor.projections import config_key
from advisor.recommend import Holder
from advisor.store import EventFilter, EventStore
from advisor.store.schema import incidents, runs
from ingest.records import stable_key

SOURCE: Final = "diagnosis"
KERNEL_MARGIN_US: Final = 5_000_000


@dataclass(frozen=True)
class Diagnoser:
    store: EventStore
    rules: RuleSet
    model: LinearModel | None
    model_name: str | None = None

    def pending(self, *, final: bool = False) -> list[dict[str, Any]]:
        """Runs to look at now: ended ones and ready ones; runs that died but have not ended
        only when the input is complete (`final`), so a traceback still arriving is whole."""
        with self.store.engine.connect() as conn:
            rows = conn.execute(select(runs).where(runs.c.label.is_(None))
                                .where(runs.c.ended | runs.c.died | runs.c.ready_us.isnot(None))
                                .order_by(runs.c.first_seq)).all()
        return [dict(row._mapping) for row in rows
                if row.ended or row.ready_us is not None or final]

    def step(self, run: dict[str, Any]) -> list[NewEvent]:
        """The events that diagnosing one run adds (empty when there is nothing to say)."""
        if not run["ended"] and not run["died"]:
            return self._resolutions(run)  # up and ready: earlier incidents are over
        verdict, lines, facts, own_pids = self._judge(run)
        events = [self._event(run, {
            "type": "run.classified", "run_id": run["run_id"], "host": run["host"],
            "unit": run["unit"], "label": verdict.label, "confidence": verdict.confidence,
            "phase": verdict.phase, "through_seq": run["last_seq"]}, "run.classified")]
        if verdict.failed:
            events.extend(self._incident(run, verdict, lines, facts, own_pids))
        elif verdict.label == "healthy" and run["ready_us"] is not None:
            events.extend(self._resolutions(run))  # it came up: earlier incidents are over
        return events

    # -- helpers ---------------------------------------------------------------------
    def _judge(self, run: dict[str, Any]
               ) -> tuple[RunVerdict, list[LogLine], dict[str, Any], set[int]]:
        lines: list[tuple[int, int, LogLine]] = []
        for event in self.store.read(EventFilter(stream=run["stream"],
                                                 after_seq=run["first_seq"] - 1)):
            if event.seq > run["last_seq"]:
                break
            if isinstance(event.payload, LogRecorded):
                lines.append((event.time_us, event.seq, line_from_payload(
                    event.seq, event.payload.model_dump(), event.time_us)))
        until = run["ended_us"] or (lines[-1][0] if lines else run["started_us"])
        for event in self.store.read(EventFilter(
                stream=f"{run['host']}/kernel", since_us=run["started_us"] - KERNEL_MARGIN_US,
                until_us=until + KERNEL_MARGIN_US)):
            if isinstance(event.payload, LogRecorded):
                lines.append((event.time_us, event.seq, line_from_payload(
                    event.seq, event.payload.model_dump(), event.time_us)))
        lines.sort(key=lambda t: (t[0], t[1]))
        ordered = [line for _, _, line in lines]
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
        time_us = run["ended_us"] or run["started_us"]
        return NewEvent.model_validate({
            "stream": run["stream"], "time_us": time_us, "source": SOURCE,
            "key": stable_key(f"{kind}:{ident or run['run_id']}".encode()), "payload": payload})

    def _open_incident(self, run: dict[str, Any], label: str, key: str) -> dict[str, Any] | None:
        with self.store.engine.connect() as conn:
            row = conn.execute(select(incidents).where(incidents.c.host == run["host"])
                               .where(incidents.c.unit == run["unit"])
                               .where(incidents.c.status == "open")
                               .where(incidents.c.label == label)
                               .where(incidents.c.config_key == key)
                               .order_by(incidents.c.opened_seq.desc()).limit(1)).first()
        return dict(row._mapping) if row is not None else None

    def _incident(self, run: dict[str, Any], verdict: RunVerdict, lines: Sequence[LogLine],
                  facts: dict[str, Any], own_pids: set[int]) -> list[NewEvent]:
        key = config_key(orjson.loads(run["config"]))
        existing = self._open_incident(run, verdict.label, key)
        if existing is not None and existing["first_run_id"] != run["run_id"]:
            return [self._event(run, {
                "type": "incident.recurred", "incident_id": existing["incident_id"],
                "run_id": run["run_id"], "runs": existing["runs"] + 1}, "incident.recurred")]
        by_seq = {line.number: line for line in lines}
        incident_id = run["run_id"]
        proposals = self._proposals(run, incident_id, verdict, facts, own_pids)
        return [
            self._event(run, {"type": "incident.opened", "incident_id": incident_id,
                              "host": run["host"], "unit": run["unit"], "run_id": run["run_id"],
                              "config_key": key}, "incident.opened"),
            self._event(run, {
                "type": "incident.classified", "incident_id": incident_id,
                "run_id": run["run_id"], "label": verdict.label,
                "confidence": verdict.confidence, "phase": verdict.phase, "facts": facts,
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

    def _proposals(self, run: dict[str, Any], incident_id: str, verdict: RunVerdict,
                   facts: dict[str, Any], own_pids: set[int]) -> list[NewEvent]:
        """The plan for a new incident, one `action.proposed` per step."""
        return self.propose(run, incident_id, incident_id, verdict.label, verdict.confidence,
                            facts, own_pids, run["invocation_id"])

    def propose(self, run: dict[str, Any], plan_id: str, incident_id: str, label: str,
                confidence: float, facts: dict[str, Any], own_pids: set[int],
                invocation_id: str | None) -> list[NewEvent]:
        """`action.proposed` events for a plan for `run`'s failure: a new incident's, or a
        new plan for an open incident (`advisor replan`), made for `invocation_id`."""
        from advisor.history import ready_bound_s, release_p95_s, unit_gpus
        from advisor.recommend import PlanContext, plan

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

    def _resolutions(self, run: dict[str, Any]) -> list[NewEvent]:
        with self.store.engine.connect() as conn:
            open_ = conn.execute(select(incidents.c.incident_id).where(
                incidents.c.host == run["host"]).where(incidents.c.unit == run["unit"])
                .where(incidents.c.status == "open")
                .where(incidents.c.opened_seq < run["first_seq"])
                .order_by(incidents.c.opened_seq)).scalars().all()
        # Recovered when the service said it was ready: time to recovery ends there.
        at_ready = {**run, "ended_us": run["ready_us"] or run["ended_us"]}
        return [self._event(at_ready, {"type": "incident.resolved",
                                       "incident_id": incident_id, "run_id": run["run_id"]},
                            "incident.resolved", incident_id)
                for incident_id in open_]
