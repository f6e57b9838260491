"""The `sim` backend: the executor's actions on a simulated node (advisor.sim), behind the same
interface as the systemd backend, observed the same way (a UnitSnapshot), so the same guards
apply and the same events are recorded."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from advisor.core.events import ActionStep
from advisor.execution.backends import (
    BackendError,
    FileChange,
    Outcome,
    acted_on,
    describe,
)
from advisor.execution.gpuwait import FREE_FRACTION, STABLE_SAMPLES
from advisor.execution.state import INFINITY_US, ExecCommand, UnitSnapshot
from advisor.planning.bounds import check_step

if TYPE_CHECKING:
    from advisor.sim import SimNode, UnitState



def _snapshot(state: UnitState) -> UnitSnapshot:
    timeout = state.timeout_stop_sec
    return UnitSnapshot(
        name=state.name, active_state=state.active_state, sub_state=state.sub_state,
        result=state.result, invocation_id=state.invocation_id if state.main_pid else None,
        main_pid=state.main_pid or 0, n_restarts=state.n_restarts,
        exec_start=(ExecCommand("vllm", ("vllm", *state.argv)),), restart=state.restart,
        timeout_stop_us=INFINITY_US if timeout == float("inf") else int(timeout * 1e6),
        kill_mode=state.kill_mode, held=state.restarts_held,
        processes=1 if state.main_pid else 0)


@dataclass
class SimBackend:
    node: SimNode
    name: str = "sim"

    def observe(self, unit: str) -> UnitSnapshot:
        return _snapshot(self.node.unit_state(unit))

    def prepare(self, step: ActionStep, before: UnitSnapshot | None) -> FileChange | None:
        check_step(step)
        return None

    def perform(self, step: ActionStep, before: UnitSnapshot | None,
                change: FileChange | None) -> Outcome:
        if step.kind == "notify":
            return Outcome(f"notified: {step.why}")
        unit = acted_on(step)
        node = self.node
        kind = step.kind
        if kind == "stop":
            state = node.stop(unit)
            detail = f"stopped {unit}: {state.active_state} ({state.result})"
        elif kind == "kill":
            node.kill(unit, "SIGKILL")
            node.run_until(lambda: node.unit_state(unit).main_pid is None, timeout_s=30)
            detail = f"SIGKILL to every process of {unit}"
        elif kind == "restart":
            state = node.restart(unit)
            node.run_until(lambda: node.unit_state(unit).ready
                           or node.unit_state(unit).main_pid is None,
                           timeout_s=step.seconds or 120)
            if not node.unit_state(unit).ready:
                raise BackendError(f"{unit} did not come up: {node.unit_state(unit)}")
            detail = f"restarted {unit} (pid {state.main_pid}); it says it is ready"
        elif kind == "reset_failed":
            node.reset_failed(unit)
            detail = f"reset-failed {unit}"
        elif kind == "hold_restarts":
            node.hold_restarts(unit)
            state = node.unit_state(unit)
            if state.active_state in ("active", "activating", "deactivating"):
                state = node.stop(unit)
            detail = f"restarts of {unit} held; {state.active_state} ({state.result})"
        elif kind == "set_flag":
            assert step.flag is not None
            node.set_flag(unit, step.flag, str(step.value))
            detail = f"{unit} will start with {step.flag} {step.value}"
        elif kind == "set_unit_option":
            assert step.option is not None
            node.set_unit_option(unit, step.option, str(step.value))
            detail = f"{unit}: {step.option}={step.value}"
        elif kind == "wait_gpu_free":
            detail = self._wait_free(unit, float(step.seconds or 30))
        else:
            raise BackendError(f"{describe(step)}: not an action the sim backend takes")
        return Outcome(detail, self.observe(unit))

    def _wait_free(self, unit: str, seconds: float) -> str:
        """Free *and stable*: every GPU under 5% for three samples in a row."""
        total = self.node.gpu_gib * 1024 ** 3
        streak = [0]

        def free() -> bool:
            used = self.node.gpu_used_bytes()
            streak[0] = streak[0] + 1 if all(u < FREE_FRACTION * total
                                             for u in used.values()) else 0
            return streak[0] >= STABLE_SAMPLES

        started = self.node.clock()
        if not self.node.run_until(free, timeout_s=seconds + 5):
            raise BackendError(f"{unit}: GPU memory not free after {seconds:.0f} s")
        return f"GPU memory free after {self.node.clock() - started:.1f} s"

    @property
    def host(self) -> str:
        return self.node.host

    def release_hold(self, unit: str) -> str | None:
        if not self.node.unit_state(unit).restarts_held:
            return None
        self.node.release_hold(unit)
        return "the hold on restarts was lifted"

    def restore(self, change: FileChange) -> Outcome:
        raise BackendError("the sim backend writes no drop-in files to roll back")
