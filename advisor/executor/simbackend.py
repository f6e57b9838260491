"""The `sim` backend: the executor's actions on a simulated node (advisor.sim), with the same
interface and the same events as the systemd backend."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from advisor.errors import InputError
from advisor.executor.backends import BackendError, Outcome
from advisor.executor.dropins import check_flag, check_option
from advisor.recommend import is_unit_name

if TYPE_CHECKING:
    from advisor.sim import SimNode

FREE_FRACTION: Final = 0.05
STABLE_SAMPLES: Final = 3


def _unit(unit: str) -> str:
    if not is_unit_name(unit):
        raise InputError(f"{unit[:80]!r} is not a systemd unit name")
    return unit


@dataclass
class SimBackend:
    node: SimNode
    name: str = "sim"

    def stop(self, unit: str) -> Outcome:
        state = self.node.stop(_unit(unit))
        return Outcome(f"stopped {unit}: {state.active_state} ({state.result})")

    def kill(self, unit: str) -> Outcome:
        self.node.kill(_unit(unit), "SIGKILL")
        self.node.run_until(lambda: self.node.unit_state(unit).main_pid is None, timeout_s=30)
        return Outcome(f"SIGKILL to every process of {unit}")

    def restart(self, unit: str) -> Outcome:
        state = self.node.restart(_unit(unit))
        return Outcome(f"restarted {unit} (pid {state.main_pid})")

    def reset_failed(self, unit: str) -> Outcome:
        self.node.reset_failed(_unit(unit))
        return Outcome(f"reset-failed {unit}")

    def hold_restarts(self, unit: str) -> Outcome:
        self.node.hold_restarts(_unit(unit))
        state = self.node.unit_state(unit)
        if state.active_state in ("active", "activating"):
            state = self.node.stop(unit)
        return Outcome(f"restarts of {unit} held; {state.active_state} ({state.result})")

    def set_flag(self, unit: str, flag: str, value: str, tag: str) -> Outcome:
        check_flag(flag, value)
        self.node.set_flag(_unit(unit), flag, value)
        return Outcome(f"{unit} will start with {flag} {value}")

    def set_unit_option(self, unit: str, option: str, value: str, tag: str) -> Outcome:
        check_option(option, value)
        self.node.set_unit_option(_unit(unit), option, value)
        return Outcome(f"{unit}: {option}={value}")

    def wait_gpu_free(self, unit: str, seconds: float) -> Outcome:
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
        return Outcome(f"GPU memory free after {self.node.clock() - started:.1f} s")

    def rollback(self, dropin: str, previous: str | None) -> Outcome:
        raise InputError("the sim backend writes no drop-in files to roll back")
