"""The systemd backend: systemd's D-Bus API for state and jobs, drop-ins under a root folder.
It implements the primitives (`advisor.execution.primitives`) the action handlers compose:

* `observe` reads the unit's real state from systemd's properties (`advisor.execution.bus`):
  the exact ExecStart argv (variables unexpanded), InvocationID, MainPID, states, Result,
  NRestarts, TimeoutStopUSec, KillMode, StartLimit*, DropInPaths, NeedDaemonReload — never
  printed text re-tokenised.
* A change is a drop-in (`advisor.execution.dropins`), then `daemon-reload` (the manager's
  Reload), then a read-back of what systemd loaded: the step fails, and the file is put back,
  if systemd does not show exactly the intended ExecStart / option.
* Stops are jobs queued without blocking and watched, bounded by the unit's own stop timeout
  (TimeoutStopSec= for SIGTERM, again for SIGKILL, and a margin), not by a constant.
* A restart counts when the new invocation says it is ready (`readiness`), within the step's
  bound; an invocation that dies or is replaced first fails the step.
* `wait_gpu_free` polls the GPUs (NVML on a real host, its twin in a box) — without a sampler
  it fails, it never sleeps and calls that success.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from advisor.core.sampler import SamplerLike
from advisor.core.steps import ActionStep
from advisor.execution import gpuwait, unitgpus
from advisor.execution.bus import SERVICE, UNIT, BusError, SystemdBus
from advisor.execution.commands import program_index
from advisor.execution.containers import container_pids
from advisor.execution.dropins import (
    HOLD_DROPIN,
    LEGACY_DROPINS,
)
from advisor.execution.handlers import perform_step, prepare_step
from advisor.execution.locate import container_of, engine_of
from advisor.execution.notices import Notices, notify_outcome
from advisor.execution.primitives import (
    BackendError,
    ConfigEdit,
    Expected,
    FileChange,
    Outcome,
    Subject,
)
from advisor.execution.readiness import JournalReadiness, NotReady
from advisor.execution.received import Effects, NotReceived
from advisor.execution.state import ExecCommand, UnitSnapshot
from advisor.execution.unitfiles import UnitFiles
from advisor.planning.remedies import DEFAULT_READY_S

STOP_MARGIN_S: Final = 10.0
KILL_SETTLE_S: Final = 30.0


def _hex(value: Any) -> str | None:
    if isinstance(value, bytes | bytearray):
        return value.hex() or None
    return str(value) or None


def snapshot(
    name: str, unit: dict[str, Any], service: dict[str, Any], processes: int | None = None
) -> UnitSnapshot:
    """A UnitSnapshot from the properties of org.freedesktop.systemd1.Unit and .Service."""
    commands = tuple(
        ExecCommand(str(e[0]), tuple(str(a) for a in e[1]), tuple(str(f) for f in e[2]))
        for e in service.get("ExecStartEx") or ()
    )
    drop_ins = tuple(str(p) for p in unit.get("DropInPaths") or ())
    return UnitSnapshot(
        name=name,
        load_state=str(unit.get("LoadState", "")),
        active_state=str(unit.get("ActiveState", "")),
        sub_state=str(unit.get("SubState", "")),
        result=str(service.get("Result", "")),
        invocation_id=_hex(unit.get("InvocationID")),
        main_pid=int(service.get("MainPID") or 0),
        n_restarts=int(service.get("NRestarts") or 0),
        exec_start=commands,
        environment=tuple(service.get("Environment") or ()),
        environment_files=tuple(
            (str(f[0]), bool(f[1])) for f in service.get("EnvironmentFiles") or ()
        ),
        restart=str(service.get("Restart", "")),
        restart_us=int(service.get("RestartUSec") or 0),
        timeout_stop_us=int(service.get("TimeoutStopUSec") or 0),
        kill_mode=str(service.get("KillMode", "")),
        start_limit_burst=int(unit.get("StartLimitBurst") or 0),
        start_limit_interval_us=int(unit.get("StartLimitIntervalUSec") or 0),
        drop_in_paths=drop_ins,
        need_daemon_reload=bool(unit.get("NeedDaemonReload")),
        fragment_path=str(unit.get("FragmentPath") or "") or None,
        held=any(Path(p).name in (HOLD_DROPIN, LEGACY_DROPINS[1]) for p in drop_ins),
        processes=processes,
        job_pending=bool(unit.get("Job") and unit["Job"][0]),
    )


@dataclass
class SystemdBackend:
    """`root` is where unit drop-ins go (/etc/systemd/system on a host)."""

    bus: SystemdBus = field(default_factory=SystemdBus)
    root: Path = Path("/etc/systemd/system")
    readiness: JournalReadiness = field(default_factory=JournalReadiness)
    gpus: SamplerLike | None = None
    no_gpus_why: str = "no GPU sampler was given"
    poll_s: float = 0.2
    stop_ceiling_s: float = 900.0  # a stop with TimeoutStopSec=infinity is watched this long
    stop_margin_s: float = STOP_MARGIN_S
    clock: Callable[[], float] = time.monotonic
    host: str | None = None  # the host whose plans this backend may carry out
    notices: Notices | None = None  # whom a `notify` step tells
    name: str = "systemd"

    # ------------------------------------------------------------------ reading
    def observe(self, unit: str) -> UnitSnapshot:
        path = self.bus.unit_path(unit)
        props = self.bus.properties(path, UNIT)
        service = self.bus.properties(path, SERVICE) if unit.endswith(".service") else {}
        return snapshot(unit, props, service, self._processes(unit))

    def _processes(self, unit: str) -> int | None:
        try:
            return len(self.bus.manager("GetUnitProcesses", "s", unit)[0])
        except BusError as e:
            if e.name == "org.freedesktop.systemd1.NoSuchUnit":
                return 0
            raise

    def _reload(self) -> None:
        self.bus.manager("Reload", timeout_s=120)

    @property
    def files(self) -> UnitFiles:
        """advisor's drop-ins of the units under `root`."""
        return UnitFiles(self.root, self._reload, self.observe)

    # ------------------------------------------------------------------ steps
    def prepare(self, step: ActionStep, before: UnitSnapshot | None) -> FileChange | None:
        """The drop-in a step will write, computed from the unit's loaded state; nothing is
        written here."""
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

    # ------------------------------------------------------------------ configuration
    # ------------------------------------------------------------------ configuration
    def plan_config(self, unit: str, before: UnitSnapshot | None, edit: ConfigEdit) -> FileChange:
        return self.files.plan(unit, before or self.observe(unit), edit)

    def apply_config(self, unit: str, edit: ConfigEdit, change: FileChange | None) -> Outcome:
        assert change is not None
        done = self.files.apply(unit, change, edit.loaded)
        if not edit.stops:
            return done
        stopped = self.stop_unit(unit)
        return Outcome(f"{done.detail}; {stopped.detail}", stopped.after)

    def restore(self, change: FileChange) -> Outcome:
        """Put a drop-in back as it was before a step (`previous`), reload, read back."""
        return self.files.restore(change)

    # ------------------------------------------------------------------ jobs
    def notify(self, message: str, subject: Subject | None = None) -> Outcome:
        return notify_outcome(self.notices, message, subject)

    def reset_failed(self, unit: str) -> Outcome:
        # On the unit's object: an inactive unit systemd unloaded is loaded again first.
        self.bus.call(self.bus.unit_path(unit), UNIT, "ResetFailed")
        after = self.observe(unit)
        return Outcome(f"reset-failed {unit}: {after.describe()}", after)

    def wait_gpu_free(self, unit: str, gpus: tuple[int, ...] | None, bound_s: float) -> Outcome:
        if self.gpus is None:
            raise BackendError(f"cannot tell when {unit}'s GPU memory is free: {self.no_gpus_why}")
        now = self.observe(unit)
        if gpus is None:  # the plan did not see the unit's GPUs: what the unit makes visible
            gpus = unitgpus.indices(unitgpus.visible(now), self.gpus.sample()[1])
        detail = gpuwait.wait_gpu_free(
            self.gpus,
            unit,
            gpus,
            bound_s,
            poll_s=max(self.poll_s, 0.2),
            also=unitgpus.owners(now),
        )
        return Outcome(detail, self.observe(unit))

    def _stop_bound(self, before: UnitSnapshot) -> float:
        timeout = before.timeout_stop_s
        if timeout is None:
            return self.stop_ceiling_s
        return 2 * timeout + self.stop_margin_s  # SIGTERM, then as long again after SIGKILL

    def stop_unit(self, unit: str) -> Outcome:
        before = self.observe(unit)
        if before.stopped and before.sub_state != "auto-restart":
            return Outcome(f"{unit} is already stopped ({before.describe()})", before)
        bound = self._stop_bound(before)
        self.bus.manager("StopUnit", "ss", unit, "replace")
        after = self._until(
            unit, lambda s: s.stopped and s.sub_state != "auto-restart" and not s.processes, bound
        )
        if after is None:
            now = self.observe(unit)
            if now.stopped:
                raise BackendError(
                    f"{unit}: stopped, but {now.processes} process(es) of the "
                    f"unit are left {bound:.0f} s later (SendSIGKILL=no, or "
                    "stuck in the driver)"
                )
            raise BackendError(
                f"{unit}: systemd's stop job is still running after {bound:.0f} s "
                f"(TimeoutStopSec={_span(before)}): {now.describe()}"
            )
        return Outcome(f"stopped {unit}: {after.describe()}", after)

    def kill_unit(self, unit: str, pid: int | None) -> Outcome:
        if pid is not None:
            owner = self._owner_of(pid)
            if owner != unit:
                return Outcome(
                    f"PID {pid} is no longer {unit}'s "
                    f"({'gone' if owner is None else 'now ' + owner}): not killed",
                    self.observe(unit),
                )
        self.bus.manager("KillUnit", "ssi", unit, "all", int(signal.SIGKILL))
        after = self._until(unit, lambda s: s.processes == 0, KILL_SETTLE_S)
        if after is None:
            now = self.observe(unit)
            raise BackendError(
                f"{unit}: {now.processes} process(es) left {KILL_SETTLE_S:.0f} s "
                "after SIGKILL (stuck in the driver?)"
            )
        return Outcome(f"SIGKILL to every process of {unit}; none left: {after.describe()}", after)

    def _owner_of(self, pid: int) -> str | None:
        try:
            path = self.bus.manager("GetUnitByPID", "u", pid)[0]
        except BusError:
            return None
        unit_id = self.bus.properties(path, UNIT).get("Id")
        return str(unit_id) if unit_id else None

    def lift_hold(self, unit: str) -> str | None:
        hold = self.files.remove_hold(unit)
        return None if hold is None else f"removed {hold}; daemon-reload"

    def restart_unit(
        self, unit: str, ready_bound_s: float | None, expect: Sequence[Expected] = ()
    ) -> Outcome:
        bound_s = ready_bound_s or DEFAULT_READY_S
        before = self.observe(unit)
        asked = time.time_ns() // 1000
        self.bus.manager("RestartUnit", "ss", unit, "replace")
        started = self._until(
            unit,
            lambda s: (
                (bool(s.invocation_id) and s.invocation_id != before.invocation_id)
                or (not s.job_pending and s.active_state == "failed")
            ),
            30.0,
        )
        if started is None or started.invocation_id in (None, before.invocation_id):
            now = self.observe(unit)
            said = self.readiness.pid1_messages(unit, asked)
            raise BackendError(f"{unit} did not start: {now.describe()}{_start_limit(now, said)}")
        invocation = started.invocation_id
        began = self.clock()
        effects = Effects(engine_of(started), expect, lambda: self._engine_pids(unit, started))

        def gone() -> str | None:
            now = self.observe(unit)
            if now.invocation_id != invocation:
                return f"invocation {invocation[:12]} ended ({now.describe()})"
            wrong = effects.check()
            if wrong is not None:
                raise NotReceived(wrong, expect)
            if now.stopped:
                return f"it stopped ({now.describe()})"
            return None

        engine = effects.engine.name if effects.engine is not None else None
        try:
            ready = self.readiness.wait(invocation, bound_s, gone, engine=engine)
        except NotReady as e:
            wrong = effects.echoes(e.echoes)
            if wrong is not None:
                raise NotReceived(wrong, expect) from None
            raise
        _received(effects, ready.echoes, expect)
        after = self.observe(unit)
        proof = f"; {effects.proof()}" if expect else ""
        return Outcome(
            f"restarted {unit}: invocation {invocation[:12]} ready after "
            f"{self.clock() - began:.1f} s ({ready.line[:120]}){proof}",
            after,
        )

    def _engine_pids(self, unit: str, state: UnitSnapshot) -> list[int]:
        """The processes an engine of `unit` may be: its control group's, and for a
        container the container's (the runtime's, not the unit's)."""
        try:
            listed = self.bus.manager("GetUnitProcesses", "s", unit)[0]
        except BusError:
            listed = []
        pids = [int(p[1]) for p in listed]
        run = container_of(state)
        if run is not None and run.name and state.exec_start:
            argv = state.exec_start[0].argv
            runtime = argv[program_index(argv)]  # the client ExecStart runs, by its path
            pids += sorted(container_pids(runtime, run.name))
        return pids

    def start_unit(self, unit: str) -> Outcome:
        before = self.observe(unit)
        if before.active_state == "failed":
            self.bus.call(self.bus.unit_path(unit), UNIT, "ResetFailed")
        self.bus.manager("StartUnit", "ss", unit, "replace")
        after = self._until(unit, lambda s: not s.job_pending, 30.0) or self.observe(unit)
        return Outcome(f"started {unit} again: {after.describe()}", after)

    def _until(
        self, unit: str, done: Callable[[UnitSnapshot], bool], bound_s: float
    ) -> UnitSnapshot | None:
        deadline = self.clock() + bound_s
        while True:
            now = self.observe(unit)
            if done(now):
                return now
            if self.clock() >= deadline:
                return None
            time.sleep(self.poll_s)

    def release_hold(self, unit: str) -> str | None:
        """Lift advisor's hold (a plan stopped before its restart); None when there was none."""
        hold = self.files.remove_hold(unit)
        if hold is None:
            return None
        now = self.observe(unit)
        return (
            f"advisor's hold on restarts was lifted (removed {hold}; {unit}'s own "
            f"Restart={now.restart} applies again); the unit is {now.active_state}"
            + (": `advisor replan` proposes from its current state" if now.stopped else "")
        )


def _received(effects: Effects, echoes: Sequence[str], expect: Sequence[Expected]) -> None:
    """After readiness: the engine's echo agrees, and every expected value was seen."""
    wrong = effects.echoes(echoes)
    if wrong is not None:
        raise NotReceived(wrong, expect)
    missing = effects.pending()
    if missing:
        raise NotReceived(
            "advisor could not see what the engine received for "
            + ", ".join(f"{e.flag} (meant: {e.value})" for e in missing)
            + ": no engine process in the unit's control group or container, and no echo of "
            "its arguments in the journal",
            expect,
        )


def _span(unit: UnitSnapshot) -> str:
    seconds = unit.timeout_stop_s
    return "infinity" if seconds is None else f"{seconds:g}s"


def _start_limit(unit: UnitSnapshot, said: list[str]) -> str:
    """Why systemd refused a start, in its own words when it logged them."""
    words = "; ".join(f"systemd: {line!r}" for line in said[-3:])
    if unit.result == "start-limit-hit" or any("repeated too quickly" in s for s in said):
        return (
            f"; {words}; the start limit was hit (StartLimitBurst={unit.start_limit_burst} "
            f"in StartLimitIntervalSec={unit.start_limit_interval_us / 1e6:g}s): "
            "reset-failed clears it"
        )
    return f"; {words}" if words else ""
