"""`advisor demo --systemd`: the seed story under real systemd, in a box.

The installed systemd boots as PID 1 of fresh namespaces (`advisor.sim.box`), with the
simulated GPU driver and the seed's vLLM unit — a real unit file, `ExecStart=…/vllm serve
${MODEL} … --max-num-seqs 1024`, Restart=on-failure — running the stand-in server. It crashes
in the sampler warm-up and systemd restarts it in a loop. The advisor reads the box's journal
and GPU recording through the ordinary ingestion path, diagnoses, asks, and acts through the
real systemd backend (D-Bus, a drop-in, daemon-reload, read-back, readiness), exactly as on a
host. It needs root and namespaces; the default demo keeps the simulated manager so it runs
anywhere.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final

from advisor.demo.simulated import DemoResult, _is_wedge, _open, _runs, remediate
from advisor.pipeline.processing import Processor
from advisor.sim.models import MINIMAX_M25_FLAGS
from advisor.store import EventStore

if TYPE_CHECKING:
    from advisor.execution.systemd import SystemdBackend
    from advisor.sim.gpuhost import GpuHost

UNIT: Final = "vllm-minimax-m25.service"
HOST: Final = "gpu-node-07"
ARGS: Final = (
    "serve",
    "${MODEL}",
    "--served-model-name",
    "minimax m25",
    "--host",
    "0.0.0.0",
    "--port",
    "8000",
    *MINIMAX_M25_FLAGS,
)
ENVIRONMENT: Final = {
    "MODEL": "MiniMaxAI/MiniMax-M2.5",
    "ADVISOR_SIM_VOCAB_SIZE": "200064",
    "ADVISOR_SIM_WEIGHTS_GIB": "230",
    "ADVISOR_SIM_SPEED": "8",
    "ADVISOR_SIM_WEDGE_ON_STOP": "1",
}
DEADLINE_S: Final = 120.0


def run_systemd_demo(
    store: EventStore,
    workdir: Path,
    *,
    ask: Callable[[str], bool],
    say: Callable[[str], None],
    deadline_s: float = DEADLINE_S,
) -> DemoResult:
    from advisor.sim.gpuhost import GpuHost

    with GpuHost(workdir, hostname=HOST, release_delay_s=2.0) as host:
        _start_unit(host, say)
        backend = host.backend()
        processor = Processor(store)

        def observe(seconds: float) -> None:
            if seconds:
                time.sleep(seconds)
            host.ingest(store)
            processor.run(final=False)

        def healthy() -> bool:
            now = backend.observe(UNIT)
            ready = any(
                r["invocation_id"] == now.invocation_id and r["ready_us"] for r in _runs_of(store)
            )
            return now.running and ready and not _open(store, UNIT)

        def ready_to_act(plan_id: str) -> bool:
            # As in the simulated demo: let the loop show itself (two failed runs), and act
            # while the next start is under way, so the hold stops a live server (it wedges).
            return _is_wedge(store, UNIT, plan_id) or (
                _runs(store, UNIT, plan_id) >= 2 and backend.observe(UNIT).running
            )

        result = remediate(
            store,
            UNIT,
            backend,
            observe=observe,
            healthy=healthy,
            ask=ask,
            say=say,
            deadline_s=deadline_s,
            processor=processor,
            ready_to_act=ready_to_act,
        )
        if result.healthy:
            _say_up(backend, say)
    return result


def _start_unit(host: GpuHost, say: Callable[[str], None]) -> None:
    """Install the seed's vLLM unit in the booted box and start it."""
    say(
        f"booted systemd in a box ({host.box.boot_s:.2f} s); {UNIT} installed as a real "
        "unit (8 × 96 GiB simulated GPUs, TP 4, --max-num-seqs 1024)"
    )
    host.add_vllm(
        UNIT,
        list(ARGS),
        environment=ENVIRONMENT,
        restart="on-failure",
        restart_sec="3s",
        timeout_stop_sec="5s",
    )
    host.box.systemctl("start", UNIT)


def _say_up(backend: SystemdBackend, say: Callable[[str], None]) -> None:
    """Tell how the healed unit runs now, and how its ExecStart ends."""
    now = backend.observe(UNIT)
    say(
        f"{UNIT} is up under systemd: {now.describe()}; ExecStart now ends "
        f"{' '.join(now.exec_start[0].argv[-4:])}"
    )


def _runs_of(store: EventStore) -> list[dict[str, object]]:
    from advisor.views.read.reading import read_rows

    return read_rows(store, "runs", unit=UNIT)
