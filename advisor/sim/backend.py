"""The `sim` backend: the executor's actions on a simulated node (advisor.sim), behind the same
interface as the systemd backend, observed the same way (a UnitSnapshot), so the same guards
apply and the same events are recorded. It implements the primitives the action handlers
compose (`advisor.execution.primitives`) on the node's own calls; the node keeps a unit's
configuration in memory, so a change writes no drop-in and there is nothing to roll back."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from advisor.core.steps import ActionStep
from advisor.execution.gpuwait import FREE_FRACTION, STABLE_SAMPLES
from advisor.execution.handlers import perform_step, prepare_step
from advisor.execution.locate import same_value
from advisor.execution.notices import Notices, notify_outcome
from advisor.execution.primitives import (
    BackendError,
    ConfigEdit,
    Expected,
    FileChange,
    Outcome,
    Subject,
)
from advisor.execution.received import NotReceived
from advisor.execution.state import INFINITY_US, ExecCommand, UnitSnapshot
from advisor.sim.units import flag_value

if TYPE_CHECKING:
    from advisor.sim import SimNode, UnitState

READY_S: Final = 120.0  # a restart's bound when the step gives none


def _snapshot(state: UnitState) -> UnitSnapshot:
    timeout = state.timeout_stop_sec
    return UnitSnapshot(
        name=state.name,
        active_state=state.active_state,
        sub_state=state.sub_state,
        result=state.result,
        invocation_id=state.invocation_id if state.main_pid else None,
        main_pid=state.main_pid or 0,
        n_restarts=state.n_restarts,
        exec_start=(ExecCommand("vllm", ("vllm", *state.argv)),),
        restart=state.restart,
        timeout_stop_us=INFINITY_US if timeout == float("inf") else int(timeout * 1e6),
        kill_mode=state.kill_mode,
        held=state.restarts_held,
        processes=1 if state.main_pid else 0,
    )


@dataclass
class SimBackend:
    node: SimNode
    name: str = "sim"
    notices: Notices | None = None  # whom a `notify` step tells

    def observe(self, unit: str) -> UnitSnapshot:
        return _snapshot(self.node.unit_state(unit))

    def prepare(self, step: ActionStep, before: UnitSnapshot | None) -> FileChange | None:
        return prepare_step(self, step, before)

    def perform(
        self,
        step: ActionStep,
        before: UnitSnapshot | None,
        change: FileChange | None,
        expect: Sequence[Expected] = (),
        subject: Subject | None = None,
    ) -> Outcome:
        return perform_step(self, step, change, expect, subject)

    # ------------------------------------------------------------------ primitives
    def notify(self, message: str, subject: Subject | None = None) -> Outcome:
        return notify_outcome(self.notices, message, subject)

    def stop_unit(self, unit: str) -> Outcome:
        state = self.node.stop(unit)
        return self._done(unit, f"stopped {unit}: {state.active_state} ({state.result})")

    def kill_unit(self, unit: str, pid: int | None) -> Outcome:
        """The node kills the unit's processes; it cannot tell whose a PID is."""
        node = self.node
        node.kill(unit, "SIGKILL")
        node.run_until(lambda: node.unit_state(unit).main_pid is None, timeout_s=30)
        return self._done(unit, f"SIGKILL to every process of {unit}")

    def reset_failed(self, unit: str) -> Outcome:
        self.node.reset_failed(unit)
        return self._done(unit, f"reset-failed {unit}")

    def lift_hold(self, unit: str) -> str | None:
        return None  # the node's start lifts the hold itself

    def restart_unit(
        self, unit: str, ready_bound_s: float | None, expect: Sequence[Expected] = ()
    ) -> Outcome:
        node = self.node
        state = node.restart(unit)
        node.run_until(
            lambda: node.unit_state(unit).ready or node.unit_state(unit).main_pid is None,
            timeout_s=ready_bound_s or READY_S,
        )
        now = node.unit_state(unit)
        for wanted in expect:  # the stand-in runs with the argv the node gave it
            got = flag_value(now.argv, wanted.flag)
            if not same_value(got, wanted.value):
                raise NotReceived(
                    f"the engine received {wanted.flag} {got}, not {wanted.value}", expect
                )
        if not now.ready:
            raise BackendError(f"{unit} did not come up: {now}")
        return self._done(unit, f"restarted {unit} (pid {state.main_pid}); it says it is ready")

    def start_unit(self, unit: str) -> Outcome:
        state = self.node.start(unit)
        return self._done(unit, f"started {unit} again: {state.active_state}")

    def wait_gpu_free(self, unit: str, gpus: tuple[int, ...] | None, bound_s: float) -> Outcome:
        """Every GPU of the node is watched (the step's GPUs are not looked at)."""
        return self._done(unit, self._wait_free(unit, bound_s))

    def plan_config(
        self, unit: str, before: UnitSnapshot | None, edit: ConfigEdit
    ) -> FileChange | None:
        return None  # the node keeps its configuration in memory: no file to record

    def apply_config(self, unit: str, edit: ConfigEdit, change: FileChange | None) -> Outcome:
        words = edit.in_memory(self.node, unit)
        if edit.stops:
            state = self.node.unit_state(unit)
            if state.active_state in ("active", "activating", "deactivating"):
                state = self.node.stop(unit)
            words = f"{words}; {state.active_state} ({state.result})"
        return self._done(unit, words)

    def _done(self, unit: str, detail: str) -> Outcome:
        return Outcome(detail, self.observe(unit))

    def _wait_free(self, unit: str, seconds: float) -> str:
        """Free *and stable*: every GPU under 5% for three samples in a row."""
        total = self.node.gpu_gib * 1024**3
        streak = [0]

        def free() -> bool:
            used = self.node.gpu_used_bytes()
            streak[0] = (
                streak[0] + 1 if all(u < FREE_FRACTION * total for u in used.values()) else 0
            )
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
