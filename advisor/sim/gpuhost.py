"""A simulated GPU host under real systemd: a `SystemdBox` running the GPU driver daemon and
vLLM units that run the stand-in server, and the advisor's view of it from outside.

What the advisor gets is what it gets on a real host: the journal (the box's journal files),
GPU samples (the driver's NVML recording, and its twin for polling), and systemd's own API (the
box's bus). `backend()` is the real systemd backend pointed at that box — its bus, its unit
folder, its journal, its GPUs — the same code `advisor remediate` runs on a host.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from advisor.sim.box import SystemdBox
from advisor.sim.boxunits import GPUD_UNIT, gpud_unit, vllm_unit
from advisor.sim.vllm_cli import write_vllm_script

if TYPE_CHECKING:
    from advisor.execution.bus import SystemdBus
    from advisor.execution.systemd import SystemdBackend
    from advisor.sim.nvml_twin import TwinSampler
    from advisor.store import EventStore


class GpuHost:
    """`SystemdBox` + GPU driver + vLLM units, rooted at `folder`."""

    def __init__(
        self,
        folder: Path,
        *,
        hostname: str = "gpu-box",
        gpus: int = 8,
        gpu_gib: float = 96.0,
        release_delay_s: float = 2.0,
    ) -> None:
        self.folder = folder
        self.box = SystemdBox(folder / "box", hostname=hostname)
        self.gpus = gpus
        self.gpu_gib = gpu_gib
        self.release_delay_s = release_delay_s
        self.claims = folder / "claims"
        self.view = folder / "nvml-view.json"
        self.recording = folder / "gpus.jsonl"
        self.script = folder / "bin" / "vllm"
        self.argv_log = folder / "argv.jsonl"
        self._buses: list[SystemdBus] = []

    @property
    def hostname(self) -> str:
        return self.box.hostname

    @property
    def units_dir(self) -> Path:
        return self.box.units_dir

    def __enter__(self) -> GpuHost:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self, timeout_s: float = 20.0) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.claims.mkdir(exist_ok=True)
        write_vllm_script(self.script.parent)
        self.box.start()
        try:
            self.box.install(
                GPUD_UNIT,
                gpud_unit(
                    claims=self.claims,
                    view=self.view,
                    gpus=self.gpus,
                    gpu_gib=self.gpu_gib,
                    release_delay_s=self.release_delay_s,
                    recording=self.recording,
                    host=self.hostname,
                ),
            )
            self.box.systemctl("start", GPUD_UNIT)
            deadline = time.monotonic() + timeout_s
            while not self.view.exists():
                if time.monotonic() > deadline:
                    raise TimeoutError("the simulated GPU driver did not publish its view")
                time.sleep(0.02)
        except BaseException:
            self.box.stop()
            raise

    def stop(self) -> None:
        for bus in self._buses:
            bus.close()
        self._buses.clear()
        self.box.stop()

    # ------------------------------------------------------------------ units
    def sim_environment(self, gpus: str = "0,1,2,3", **extra: str) -> dict[str, str]:
        """The environment a vLLM unit needs to run on this host's simulated GPUs."""
        return {
            "ADVISOR_SIM_CLAIMS": str(self.claims),
            "ADVISOR_SIM_GPUS": gpus,
            "ADVISOR_SIM_GPU_GIB": repr(self.gpu_gib),
            "ADVISOR_SIM_ARGV_LOG": str(self.argv_log),
            **extra,
        }

    def add_vllm(
        self,
        name: str,
        args: Sequence[str],
        *,
        environment: Mapping[str, str] | None = None,
        **options: object,
    ) -> Path:
        """Install a vLLM unit `name` whose ExecStart is `vllm serve …` (`args` after the
        script, e.g. `["serve", "${MODEL}", "--max-num-seqs", "1024"]`)."""
        env = self.sim_environment() | dict(environment or {})
        text = vllm_unit(name, self.script, args, environment=env, **options)  # type: ignore[arg-type]
        return self.box.install(name, text)

    # ------------------------------------------------------------------ the advisor's view
    def twin(self) -> TwinSampler:
        from advisor.sim.nvml_twin import TwinSampler

        return TwinSampler(self.view, self.hostname)

    def backend(self, **options: object) -> SystemdBackend:
        """The systemd backend, acting on this host from outside the box."""
        from advisor.execution.bus import SystemdBus
        from advisor.execution.readiness import JournalReadiness
        from advisor.execution.systemd import SystemdBackend

        bus = SystemdBus(self.box.bus_address, peer_to_peer=True)
        self._buses.append(bus)
        return SystemdBackend(
            bus=bus,
            root=self.units_dir,
            readiness=JournalReadiness(self.box.journal_dir),
            gpus=self.twin(),
            host=self.hostname,
            **options,  # type: ignore[arg-type]
        )

    def ingest(self, store: EventStore) -> None:
        """Bring the host's journal and GPU recording into `store` (what `advisor watch`
        does on a real host), without diagnosing."""
        from ingest.gpu import replay_recording
        from ingest.journal_sources import ingest_journalctl

        files = self.box.journal_files()
        if files:
            ingest_journalctl(store, files=files)
        if self.recording.exists():
            replay_recording(store, self.recording, complete_only=True)
