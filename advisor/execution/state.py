"""A unit as systemd shows it at one instant: what every step looks at before it acts.

Read from systemd's D-Bus properties (`advisor.execution.systemd.observe`) or from the simulated
manager (`advisor.sim.backend`); the executor records the compact form (`as_event`) in
each step's events, so the next step — or the next executor — can tell whether the unit is
still in the state the plan was made for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

INFINITY_US: Final = 2**64 - 1  # systemd's USEC_INFINITY
RUNNING_STATES: Final = frozenset({"active", "activating", "deactivating", "reloading"})


@dataclass(frozen=True)
class ExecCommand:
    """One ExecStart= entry: the binary, its argv (variables unexpanded, as written) and the
    prefix flags (`ignore-failure`, `privileged`, `no-setuid`, `ambient`, `no-env-expand`)."""

    path: str
    argv: tuple[str, ...]
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class UnitSnapshot:
    name: str
    load_state: str = "loaded"
    active_state: str = "inactive"
    sub_state: str = "dead"
    result: str = "success"
    invocation_id: str | None = None
    main_pid: int = 0
    n_restarts: int = 0
    exec_start: tuple[ExecCommand, ...] = ()
    environment: tuple[str, ...] = ()
    # EnvironmentFile= entries in the order systemd reads them: (path, missing is ignored)
    environment_files: tuple[tuple[str, bool], ...] = ()
    restart: str = "no"
    restart_us: int = 100_000  # RestartSec=
    timeout_stop_us: int = 90_000_000
    kill_mode: str = "control-group"
    start_limit_burst: int = 5
    start_limit_interval_us: int = 10_000_000
    drop_in_paths: tuple[str, ...] = ()
    need_daemon_reload: bool = False
    fragment_path: str | None = None
    held: bool = False  # advisor's hold on restarts is in place
    processes: int | None = None  # processes in the unit's control group, when known
    job_pending: bool = False  # a start/stop job of the unit is queued or running

    @property
    def running(self) -> bool:
        """A process of the unit may be alive (started, starting or stopping)."""
        return self.active_state in RUNNING_STATES and not (
            self.active_state == "activating" and self.sub_state == "auto-restart"
        )

    @property
    def stopped(self) -> bool:
        return self.active_state in ("inactive", "failed") or self.sub_state == "auto-restart"

    @property
    def timeout_stop_s(self) -> float | None:
        """TimeoutStopSec= in seconds; None for infinity."""
        return None if self.timeout_stop_us >= INFINITY_US else self.timeout_stop_us / 1e6

    def as_event(self) -> dict[str, str | int | bool | None]:
        """The part recorded in events: enough to recognise the same state again."""
        return {
            "active_state": self.active_state,
            "sub_state": self.sub_state,
            "result": self.result,
            "invocation_id": self.invocation_id,
            "main_pid": self.main_pid,
            "n_restarts": self.n_restarts,
        }

    def describe(self) -> str:
        pid = f", MainPID {self.main_pid}" if self.main_pid else ""
        inv = f", invocation {self.invocation_id[:12]}" if self.invocation_id else ""
        return f"{self.name} {self.active_state} ({self.sub_state}, Result={self.result}{pid}{inv})"
