"""The stand-in server's building blocks (`advisor.sim.server` runs the phases with them).

Stdlib only, like the server."""

from __future__ import annotations

import os
import time
from types import FrameType
from typing import TextIO

from advisor.sim import texts
from advisor.sim import vllm_text as vt
from advisor.sim.claims import Claims, others_on, read_claims, write_claim
from advisor.sim.models import MemoryPlan, plan
from advisor.sim.server_config import Config

__all__ = ["Oom", "ServerBase", "Terminated"]


class Terminated(Exception):
    """SIGTERM or SIGINT arrived; raised at the next pause, never inside a write."""


class Oom(Exception):
    """An allocation did not fit on one of the server's GPUs."""

    def __init__(self, figures: vt.OomFigures) -> None:
        super().__init__(f"CUDA out of memory on GPU {figures.device}")
        self.figures = figures


class ServerBase:
    """One run's state and what its phases are made of: pauses that see SIGTERM, vLLM's log
    lines, GPU memory claimed as it is allocated, and start-up failures printed as V1 does."""

    def __init__(self, cfg: Config, out: TextIO) -> None:
        self.cfg = cfg
        self.out = out
        self.pid = os.getpid()
        self.p = vt.Printer(self.pid)
        self.dummies = min(cfg.max_num_seqs, cfg.max_num_batched_tokens)
        self.plan: MemoryPlan = plan(
            cfg.card,
            tensor_parallel_size=cfg.tensor_parallel_size,
            gpu_memory_utilization=cfg.gpu_memory_utilization,
            gpu_gib=cfg.gpu_gib,
            max_num_seqs=self.dummies,
        )
        self.own = 0  # bytes held on each of the server's GPUs
        self.graph_pool = 0
        self.term = False
        self.ready = False

    # ------------------------------------------------------------------ plumbing
    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.term = True

    def pause(self, nominal_s: float) -> None:
        """Sleep a phase's nominal duration / speed, in slices, so SIGTERM is seen at once."""
        end = time.monotonic() + nominal_s / self.cfg.speed
        while True:
            if self.term:
                raise Terminated
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.01))

    def emit(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    def log(self, proc: str, level: str, src: str, text: str) -> None:
        self.emit(self.p.record(proc, level, src, text))

    def raw(self, proc: str, text: str) -> None:
        self.emit(self.p.raw(proc, text))

    def workers(self) -> list[str]:
        return [
            vt.worker_name(r, self.cfg.tensor_parallel_size)
            for r in range(self.cfg.tensor_parallel_size)
        ]

    # ------------------------------------------------------------------ memory
    def _claims(self) -> Claims:
        return read_claims(self.cfg.claims) if self.cfg.claims is not None else {}

    def _publish(self) -> None:
        if self.cfg.claims is not None:
            write_claim(self.cfg.claims, self.pid, dict.fromkeys(self.cfg.gpus, self.own))

    def alloc(self, nbytes: int) -> None:
        """Allocate ``nbytes`` on every GPU of the server, or raise Oom for the first GPU
        where it does not fit (others' claims are not free)."""
        claims = self._claims()
        for rank, gpu in enumerate(self.cfg.gpus):
            others = tuple(others_on(claims, self.pid, gpu))
            free = self.plan.total - self.own - sum(b for _, b in others)
            if nbytes > free:
                raise Oom(
                    vt.OomFigures(
                        rank,
                        nbytes,
                        self.plan.total,
                        max(0, free),
                        self.own,
                        others,
                        self.graph_pool,
                    )
                )
        self.own += nbytes
        self._publish()

    def startup_free(self) -> tuple[int, int] | None:
        """(rank, free bytes) of the first GPU with less free than the budget, or None."""
        claims = self._claims()
        for rank, gpu in enumerate(self.cfg.gpus):
            held = sum(b for _, b in others_on(claims, self.pid, gpu))
            free = self.plan.total - held - self.own
            if free < self.plan.budget:
                return rank, free
        return None

    # ------------------------------------------------------------------ failures
    def fail(self, rank: int, lines: list[str], *, in_worker: bool, starting: bool) -> int:
        """Print a start-up failure the way V1 does and return the exit status (1)."""
        tp = self.cfg.tensor_parallel_size
        if in_worker and tp > 1:
            src = "multiproc_executor.py:597" if starting else "multiproc_executor.py:671"
            head = "WorkerProc failed to start." if starting else "WorkerProc hit an exception."
            self.log(vt.worker_name(rank, tp), "ERROR", src, "\n".join([head, *lines]))
            self.log(vt.CORE, "ERROR", "core.py:708", texts.ENGINE_CORE_FAILED)
            failed = "{}"
        else:
            self.log(vt.CORE, "ERROR", "core.py:708", "\n".join([texts.ENGINE_CORE_FAILED, *lines]))
            failed = "{'EngineCore_DP0': 1}"
        self.log(vt.API, "ERROR", "api_server.py:1901", vt.engine_init_failed(failed))
        return 1

    def fail_oom(self, oom: Oom, phase: str) -> int:
        text = vt.torch_oom(oom.figures)
        if phase == "sampler":
            lines = vt.sampler_traceback(text, self.dummies)
        else:
            lines = vt.oom_traceback(phase, text)
        return self.fail(oom.figures.device, lines, in_worker=True, starting=phase == "load")
