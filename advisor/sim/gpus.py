"""The simulated GPUs and their driver: memory in use is what live processes claim, and what a
process claimed is freed only ``release_delay_s`` after it died ("memory returns within a few
seconds" of the process's death, not at once).

Two drivers share this logic. ``SimNode`` drives one in-process and tells it which processes it
started (``register``) and when they died (``died``). The daemon (``advisor.sim.gpud``) sees
processes only through the claims they write and finds the rest out from ``/proc``
(``watch``).

Samples are recorded as NVML recordings (``ingest.gpu_recording.recording_line`` of
``GpuSampled``), the format ``advisor ingest gpu --replay`` reads, so the sim's GPU history
enters the store through the same path as a real host's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final

from advisor.core.payloads import GpuProcess, GpuSampled
from advisor.sim.claims import Claims, read_claims, remove_claim
from advisor.sim.models import GIB
from ingest.gpu_recording import recording_line

DEFAULT_GPU_NAME: Final = "NVIDIA RTX PRO 6000 Blackwell Server Edition"


def gpu_uuids(host: str, count: int) -> list[str]:
    """Stable NVML-style UUIDs for the GPUs of ``host``."""
    digest = hashlib.sha256(host.encode()).hexdigest()
    return [
        f"GPU-{i:08x}-{digest[:4]}-4{digest[4:7]}-8{digest[7:10]}-{digest[10:22]}"
        for i in range(count)
    ]


class Driver:
    """Per-GPU memory from the claims folder, delayed release, and sampling.

    ``recording``: where samples are appended as NVML recording lines (None: not recorded).
    ``clear``: remove every claim at start (a new node: nothing holds its GPUs yet); a daemon
    that may be restarted under running servers keeps them and lets ``watch`` sort them out.
    """

    def __init__(
        self,
        claims: Path,
        recording: Path | None,
        *,
        host: str,
        count: int,
        gpu_gib: float,
        clock: Callable[[], float],
        release_delay_s: float,
        gpu_name: str = DEFAULT_GPU_NAME,
        clear: bool = True,
    ) -> None:
        self.claims_dir = claims
        self.host = host
        self.count = count
        self.total = int(gpu_gib * GIB)
        self.clock = clock
        self.release_delay_s = release_delay_s
        self.gpu_name = gpu_name
        self.owners: dict[int, tuple[str, str]] = {}  # pid → (unit, comm); "" when unknown
        self.deaths: dict[int, float] = {}  # pid → when it died (clock seconds)
        claims.mkdir(parents=True, exist_ok=True)
        if clear:
            for stale in claims.iterdir():
                stale.unlink()
        self._recording = recording.open("ab") if recording is not None else None
        self.uuids = gpu_uuids(host, count)

    def close(self) -> None:
        if self._recording is not None:
            self._recording.close()

    def register(self, pid: int, unit: str, comm: str) -> None:
        """A process the node started: NVML lists it under its unit."""
        self.owners[pid] = (unit, comm)

    def died(self, pid: int, when: float) -> None:
        """The process is gone; its memory is released ``release_delay_s`` later."""
        self.deaths[pid] = when

    def watch(
        self,
        now: float,
        alive: Callable[[int], bool],
        owner: Callable[[int], tuple[str | None, str | None]],
    ) -> None:
        """For a driver that learns of processes only from their claims: list each new one
        under its unit and name (``owner``, asked once, while it lives) and note as dead, at
        ``now``, every claimant that ``alive`` says is gone."""
        for pid in self.claims():
            if pid in self.deaths:
                continue
            if not alive(pid):
                self.died(pid, now)
            elif pid not in self.owners:
                unit, comm = owner(pid)
                self.register(pid, unit or "", comm or "")

    def next_release(self) -> float | None:
        return min(self.deaths.values()) + self.release_delay_s if self.deaths else None

    def release_due(self, now: float) -> list[int]:
        """Free the claims of processes dead for ``release_delay_s``; their PIDs."""
        due = [pid for pid, t in self.deaths.items() if now >= t + self.release_delay_s]
        for pid in due:
            remove_claim(self.claims_dir, pid)
            del self.deaths[pid]
            self.owners.pop(pid, None)
        return due

    def claims(self) -> Claims:
        return read_claims(self.claims_dir)

    def used(self, gpus: Iterable[int] | None = None) -> dict[int, int]:
        """Bytes in use per GPU: the sum of the claims still held."""
        indexes = list(range(self.count)) if gpus is None else list(gpus)
        claims = self.claims()
        return {i: sum(c.get(i, 0) for c in claims.values()) for i in indexes}

    def snapshot(self) -> list[GpuSampled]:
        """One NVML-like sample of every GPU (not recorded)."""
        claims = self.claims()
        samples = []
        for i in range(self.count):
            procs = tuple(
                GpuProcess(
                    pid=pid,
                    used_bytes=c[i],
                    unit=self.owners.get(pid, ("",))[0] or None,
                    name=self.owners.get(pid, ("", ""))[1] or None,
                )
                for pid, c in sorted(claims.items())
                if c.get(i, 0) > 0
            )
            used = min(self.total, sum(p.used_bytes or 0 for p in procs))
            share = used / self.total if self.total else 0.0
            samples.append(
                GpuSampled(
                    origin="nvml",
                    host=self.host,
                    index=i,
                    uuid=self.uuids[i],
                    name=self.gpu_name,
                    memory_total_bytes=self.total,
                    memory_used_bytes=used,
                    memory_free_bytes=self.total - used,
                    utilization_gpu_pct=0 if not used else 3,
                    utilization_memory_pct=0,
                    temperature_c=34 + round(18 * share),
                    power_w=round(85.0 + 140.0 * share, 2),
                    processes=procs,
                )
            )
        return samples

    def sample(self, now: float | None = None) -> list[GpuSampled]:
        """One NVML-like sample of every GPU, appended to the recording (if any)."""
        t = self.clock() if now is None else now
        samples = self.snapshot()
        if self._recording is not None:
            self._recording.write(recording_line(int(t * 1_000_000), self.host, samples))
            self._recording.flush()
        return samples
