"""`advisor demo`: the seed scenario on the simulated node, end to end.

A 230B FP8 MoE model (vocab 200,064) on 4 of 8 × 96 GiB GPUs, tensor parallel 4,
`--max-num-seqs 1024`, `--max-model-len 131072`. It crashes in the sampler warm-up and the
unit restarts in a loop. The advisor reads the node's journal and GPU samples through the
ordinary ingestion path, diagnoses, shows the plan and asks for approval, then acts on the
node through the `sim` backend: it holds the restarts (the stop wedges and systemd kills it),
handles the wedged stop, waits for GPU memory, lowers max_num_seqs to the computed value and
restarts; the service comes up healthy, and the post-mortem is printed.

The orchestration runs one step at a time and reads the node again after each, so that what a
step causes (the wedge) is diagnosed before the next step runs; the newest open incident is
handled first.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from advisor.core.statuses import ActionStatus, IncidentStatus
from advisor.core.taxonomy import WEDGED_STOP
from advisor.execution.decisions import approve, plan_rows
from advisor.execution.run import execute
from advisor.pipeline.processing import Processor
from advisor.sim.models import MINIMAX_M25_FLAGS
from advisor.store import EventStore
from advisor.views.read.incidents import incident_rows
from advisor.views.read.rows import IncidentView

if TYPE_CHECKING:
    from advisor.execution.backends import Backend
    from advisor.sim import SimNode, UnitState

UNIT: Final = "vllm-minimax-m25.service"
HOST: Final = "gpu-node-07"
ARGS: Final = (
    "--model",
    "MiniMaxAI/MiniMax-M2.5",
    "--host",
    "0.0.0.0",
    "--port",
    "8000",
    *MINIMAX_M25_FLAGS,
    "--vocab-size",
    "200064",
    "--weights-gib",
    "230",
    "--speed",
    "8",
    "--wedge-on-stop",
)
DEADLINE_S: Final = 55.0


@dataclass
class DemoResult:
    healthy: bool
    seconds: float
    incidents: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)


def observer(store: EventStore, node: SimNode, processor: Processor) -> Callable[[float], None]:
    """Advance the node, read its journal and GPU samples through the ingestion path,
    fold and diagnose."""
    from ingest.gpu import replay_recording
    from ingest.journal_sources import ingest_json_file

    def observe(seconds: float = 0.0) -> None:
        if seconds:
            node.run_for(seconds)
        node.step()
        ingest_json_file(store, node.journal_path)
        replay_recording(store, node.gpus_path, complete_only=True)
        processor.run(final=False)

    return observe


def remediate_on_node(
    store: EventStore,
    node: SimNode,
    unit: str,
    *,
    ask: Callable[[str], bool],
    say: Callable[[str], None],
    deadline_s: float = DEADLINE_S,
    ready_to_act: Callable[[str, UnitState], bool] | None = None,
    healthy: Callable[[UnitState], bool] | None = None,
) -> DemoResult:
    """Watch `unit` on the node and carry out the plans of its open incidents, newest first,
    one step at a time (reading the node again after each), until it is healthy — by default
    ready with no open incident — or the deadline passes."""
    from advisor.sim.backend import SimBackend

    processor = Processor(store)
    is_healthy = healthy or (lambda state: state.ready and not _open(store, unit))
    acts = ready_to_act
    return remediate(
        store,
        unit,
        SimBackend(node),
        observe=observer(store, node, processor),
        healthy=lambda: is_healthy(node.unit_state(unit)),
        ready_to_act=None
        if acts is None
        else (lambda plan_id: acts(plan_id, node.unit_state(unit))),
        ask=ask,
        say=say,
        deadline_s=deadline_s,
        processor=processor,
    )


def remediate(
    store: EventStore,
    unit: str,
    backend: Backend,
    *,
    observe: Callable[[float], None],
    healthy: Callable[[], bool],
    ask: Callable[[str], bool],
    say: Callable[[str], None],
    deadline_s: float = DEADLINE_S,
    processor: Processor | None = None,
    ready_to_act: Callable[[str], bool] | None = None,
) -> DemoResult:
    """The demo's loop on any backend: observe, and carry out the newest open incident's plan
    one step at a time until `healthy()` or the deadline."""
    started = time.monotonic()
    result = DemoResult(False, 0.0)
    processor = processor or Processor(store)
    approved: set[str] = set()
    while time.monotonic() - started < deadline_s:
        observe(0.5)
        if healthy():
            result.healthy = True
            break
        plan_id = _next_plan(store, unit)
        if plan_id is None:
            continue
        if plan_id not in approved:
            if ready_to_act is not None and not ready_to_act(plan_id):
                continue
            if not ask(_describe(store, unit, plan_id)):
                say("plan not approved: nothing changed")
                break
            approve(store, plan_id, "human:demo")
            approved.add(plan_id)
            result.incidents.append(plan_id)
        report = execute(store, backend, plan_id, max_steps=1)
        for action_id in report.ran + report.skipped:
            row = next(r for r in plan_rows(store, plan_id) if r.action_id == action_id)
            result.steps.append(f"{row.kind}: {row.detail}")
            verb = "done" if action_id in report.ran else "skipped"
            say(f"  {verb}: {row.kind} — {row.detail}")
        if report.state not in ("done", "paused", "waiting"):
            say(f"plan {report.state}: {report.why}")
            break
    if result.healthy:
        observe(0.0)
    processor.run(final=True)
    result.seconds = time.monotonic() - started
    return result


def run_demo(
    store: EventStore, workdir: Path, *, ask: Callable[[str], bool], say: Callable[[str], None]
) -> DemoResult:
    from advisor.sim import SimNode, UnitSpec

    # The driver frees a dead run's memory 2 s after it died; RestartSec=3 waits for that, as
    # the seed unit's ExecStartPre does, so every start of the loop fails the same way.
    with SimNode(
        workdir, host=HOST, gpus=8, gpu_gib=96.0, release_delay_s=2.0, sample_interval_s=0.5
    ) as node:
        node.add_unit(
            UnitSpec(
                name=UNIT,
                args=list(ARGS),
                description="vLLM MiniMax-M2.5 FP8 230B MoE Inference Server",
                restart="on-failure",
                restart_sec=3.0,
                timeout_stop_sec=4.0,
                gpus=(0, 1, 2, 3),
            )
        )
        say(
            f"starting {UNIT} on the simulated node {HOST} (8 × 96 GiB GPUs, TP 4, "
            "--max-num-seqs 1024, --max-model-len 131072)"
        )
        node.start(UNIT)

        def ready_to_act(plan_id: str, state: UnitState) -> bool:
            # Let the restart loop show itself (two failed runs), and act while the next start
            # is under way: holding the restarts then stops a live server (which wedges).
            return _is_wedge(store, UNIT, plan_id) or (
                _runs(store, UNIT, plan_id) >= 2
                and state.active_state == "active"
                and state.output_lines >= 3
            )

        result = remediate_on_node(store, node, UNIT, ask=ask, say=say, ready_to_act=ready_to_act)
        if result.healthy:
            say(f"{UNIT} is up: Application startup complete")
    return result


def _open(store: EventStore, unit: str) -> list[IncidentView]:
    return [i for i in incident_rows(store, unit=unit) if i.status == IncidentStatus.OPEN]


def _next_plan(store: EventStore, unit: str) -> str | None:
    """The newest open incident whose plan has a step still to run."""
    for incident in reversed(_open(store, unit)):
        plan_id = incident.incident_id
        rows = plan_rows(store, plan_id)
        if any(
            r.status in (ActionStatus.PROPOSED, ActionStatus.APPROVED) and not r.alternative
            for r in rows
        ):
            return plan_id
    return None


def _runs(store: EventStore, unit: str, plan_id: str) -> int:
    return max(
        (i.runs for i in incident_rows(store, unit=unit) if i.incident_id == plan_id),
        default=0,
    )


def _is_wedge(store: EventStore, unit: str, plan_id: str) -> bool:
    return any(
        i.incident_id == plan_id and i.label == WEDGED_STOP for i in incident_rows(store, unit=unit)
    )


def _describe(store: EventStore, unit: str, plan_id: str) -> str:
    incident = next(i for i in incident_rows(store, unit=unit) if i.incident_id == plan_id)
    lines = [
        f"{incident.label} (confidence {incident.confidence:.2f}, "
        f"{incident.runs} failed run(s)); the plan:"
    ]
    for row in plan_rows(store, plan_id):
        spec = row.spec
        what = row.kind + (f" {spec['flag']} {spec['value']}" if spec.get("flag") else "")
        what += f" {spec['option']}={spec['value']}" if spec.get("option") else ""
        what += f" (up to {spec['seconds']:.0f} s)" if spec.get("seconds") else ""
        alt = " [alternative, not applied]" if row.alternative else ""
        lines.append(f"  {row.step + 1}. {what}{alt}: {spec['why']}")
        lines += [f"       {line}" for line in spec.get("arithmetic", [])]
    return "\n".join(lines)
