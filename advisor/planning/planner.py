"""Planning as a stage: each incident the diagnoser classified gets its plan, as events.

`Planner.catch_up()` reads the `incident.classified` events this store's diagnoser wrote
after its checkpoint (`planning`), in sequence order, and appends for each the plan's
`action.proposed` steps (keyed by action id, `<incident>#<step>`: one plan per incident,
whatever races or re-runs) together with the checkpoint, in one transaction. The plan is
made for the incident's first run as the `runs` view has it, its host's GPU history, and
for `gpu_memory_held` the processes NVML saw holding the GPUs that are not the run's own.
A classification whose planning raises is recorded as skipped and passed over.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from advisor.core.actions import ActionProposed
from advisor.core.events import NewEvent, StoredEvent
from advisor.core.payloads import GpuSampled, IncidentClassified
from advisor.core.records import stable_key
from advisor.core.taxonomy import GPU_MEMORY_HELD, HEALTHY, UNKNOWN
from advisor.parsing.parsed import own_pids, parse
from advisor.planning.context import Holder, PlanContext
from advisor.planning.recommend import plan
from advisor.store import EventFilter, EventStore
from advisor.store.types import Checkpoint
from advisor.views.fold.skipped import environmental, reason_of, skipped_event
from advisor.views.read.history import ready_bound_s, release_p95_s, unit_gpus
from advisor.views.read.reading import run_lines
from advisor.views.read.rows import RunView
from advisor.views.read.runs import run_row

CHECKPOINT: Final = "planning"
# The diagnoser's: its classifications are planned, and the plans keep the source (and so
# the idempotency keys) they had when the diagnoser proposed them itself.
SOURCE: Final = "diagnosis"
HELD: Final = GPU_MEMORY_HELD


@dataclass(frozen=True)
class Planner:
    store: EventStore

    def position(self) -> int:
        cp = self.store.checkpoint(CHECKPOINT)
        if cp:
            return int(cp["seq"])
        # A store from before planning was a stage of its own: there the diagnoser appended
        # each plan in the batch that classified its incident, so everything before the last
        # proposal is planned already (re-planning it now would use today's history).
        last = list(self.store.read(EventFilter(type="action.proposed", limit=1)))
        return last[-1].seq if last else 0

    def pending(self) -> list[StoredEvent]:
        """The diagnoser's `incident.classified` events not planned yet, oldest first."""
        return [
            event
            for event in self.store.read(
                EventFilter(type="incident.classified", after_seq=self.position())
            )
            if event.source == SOURCE and isinstance(event.payload, IncidentClassified)
        ]

    def catch_up(self) -> int:
        """Plan every classification not planned yet; return how many events were added."""
        added = 0
        for event in self.pending():
            try:
                events = self.plan_for(event)
            except Exception as e:
                if environmental(e):
                    raise
                p = event.payload
                run_id = p.run_id if isinstance(p, IncidentClassified) else None
                events = [
                    skipped_event(
                        event.stream, event.time_us, "diagnosis", event.seq, reason_of(e), run_id
                    )
                ]
            added += self.store.append(events, Checkpoint(CHECKPOINT, {"seq": event.seq})).appended
        return added

    def plan_for(self, event: StoredEvent) -> list[NewEvent]:
        """The `action.proposed` events of one classified incident's plan."""
        p = event.payload
        assert isinstance(p, IncidentClassified)
        run = run_row(self.store, p.run_id)
        if run is None:
            return []
        pids = own_pids(parse(run_lines(self.store, run))) if p.label == HELD else set()
        return propose(
            self.store,
            run,
            p.incident_id,
            p.incident_id,
            p.label,
            p.confidence,
            dict(p.facts),
            pids,
            run.invocation_id,
            corroborated=any(c.source == "rules" and c.label == p.label for c in p.candidates)
            or p.label in (HEALTHY, UNKNOWN),
        )


def propose(
    store: EventStore,
    run: RunView,
    plan_id: str,
    incident_id: str,
    label: str,
    confidence: float,
    facts: Mapping[str, Any],
    own: set[int],
    invocation_id: str | None,
    *,
    corroborated: bool = True,
) -> list[NewEvent]:
    """`action.proposed` events for a plan for `run`'s failure (a `runs` row): a new
    incident's, or a new plan for an open incident (`advisor replan`), made for
    `invocation_id`."""
    end = run.ended_us or run.started_us
    holders, held_on = _holders(store, run, own) if label == HELD else ((), ())
    gpus = unit_gpus(store, run.host, run.unit, run.started_us, end)
    if held_on:
        gpus = tuple(sorted(set(gpus or ()) | set(held_on)))
    context = PlanContext(
        unit=run.unit,
        release_p95_s=release_p95_s(store, run.host),
        holders=holders,
        invocation_id=invocation_id,
        gpus=gpus,
        ready_bound_s=ready_bound_s(store, run.host, run.unit),
    )
    events = []
    steps = plan(label, confidence, facts, context, corroborated=corroborated)
    for step, action in enumerate(steps):
        action_id = f"{plan_id}#{step}"
        proposed = ActionProposed(
            action_id=action_id,
            plan_id=plan_id,
            step=step,
            incident_id=incident_id,
            host=run.host,
            **action.model_dump(exclude_none=True),
        )
        events.append(
            NewEvent(
                stream=run.stream,
                time_us=end,
                source=SOURCE,
                key=stable_key(f"action.proposed:{action_id}".encode()),
                payload=proposed,
            )
        )
    return events


def _holders(
    store: EventStore, run: RunView, own: set[int]
) -> tuple[tuple[Holder, ...], tuple[int, ...]]:
    """Processes NVML saw on the host's GPUs around the failure that are not the run's own
    (the latest sample of each GPU before the run ended), and the GPUs they hold."""
    end = run.ended_us or run.started_us
    latest: dict[int, GpuSampled] = {}
    for event in store.read(
        EventFilter(
            type="gpu.sampled", since_us=run.started_us - 10_000_000, until_us=end + 2_000_000
        )
    ):
        p = event.payload
        if isinstance(p, GpuSampled) and p.host == run.host and p.processes is not None:
            latest[p.index] = p
    found: dict[int, Holder] = {}
    on: set[int] = set()
    for sample in latest.values():
        for proc in sample.processes or ():
            if proc.pid not in own and proc.used_bytes:
                held = found.get(proc.pid)
                used = (held.used_bytes or 0) + proc.used_bytes if held else proc.used_bytes
                found[proc.pid] = Holder(proc.pid, used, proc.unit)
                on.add(sample.index)
    return (tuple(sorted(found.values(), key=lambda h: -(h.used_bytes or 0))), tuple(sorted(on)))
