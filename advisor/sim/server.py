"""The stand-in inference server: a real OS process that starts up, fails and shuts down the
way vLLM 0.15.1 does, printing vLLM's own lines, without a GPU.

    python -m advisor.sim.server --model M --max-num-seqs N --max-model-len L \\
        --gpu-memory-utilization U --tensor-parallel-size T [--vocab-size V] [--weights-gib W] \\
        [--gpu-gib G] [--claims DIR] [--gpus 0,1,2,3] [--speed X] [--wedge-on-stop]

It is a real process so that everything around it — signals, exit statuses, PIDs, a service
manager's stop timeout, memory released after death — is real too. Start-up phases sleep their
nominal durations divided by ``--speed``. Memory follows ``advisor.sim.models``: it is claimed
in ``--claims DIR`` as it is allocated (the simulated driver reads the claims), and what other
processes claim on the same GPUs is not free, so leftovers of a previous run make it fail the
way vLLM fails. Exit status: 0 after SIGTERM, 1 when start-up fails, 2 for bad flags (argparse).

The same server also runs as ``vllm serve MODEL [flags]`` (``advisor.sim.vllm_cli``, for real
systemd units): ``make_config`` (``advisor.sim.server_config``) and ``serve`` are shared by both
command lines.

``--wedge-on-stop``: on SIGTERM it logs the shutdown line, then ignores SIGTERM and makes no
further progress, as a worker wedged in a CUDA call does; only SIGKILL ends it.

Stdlib only, so that it starts in a few tens of milliseconds.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Sequence

from advisor.sim import texts
from advisor.sim import vllm_text as vt
from advisor.sim.models import GIB, SAMPLER_CHUNKS, gib_str
from advisor.sim.server_base import Oom, ServerBase, Terminated
from advisor.sim.server_config import Config, parse_config

__all__ = [
    "GRAPH_POOL_MAX",
    "HEALTH_EVERY_S",
    "Server",
    "main",
    "serve",
]

GRAPH_POOL_MAX = int(1.02 * GIB)  # what "Graph capturing finished … took" reports at most
HEALTH_EVERY_S = 30.0  # nominal seconds between health-check access-log lines


class Server(ServerBase):
    """One run: start-up phases, then serving until SIGTERM."""

    # ------------------------------------------------------------------ the run
    def run(self) -> int:
        """Start up; 1 if start-up fails, else serve until SIGTERM."""
        cfg, pl = self.cfg, self.plan
        if cfg.claims is not None:
            cfg.claims.mkdir(parents=True, exist_ok=True)
        self.pause(2.5)  # Python imports, CUDA platform detection
        self.api_preamble()
        self.pause(1.2)
        self.log(
            vt.CORE,
            "INFO",
            "core.py:77",
            vt.engine_config(
                cfg.card,
                cfg.max_model_len,
                cfg.tensor_parallel_size,
                cfg.trust_remote_code,
                cfg.served_model_name,
            ),
        )
        self.pause(1.8)
        if len(cfg.gpus) < cfg.tensor_parallel_size:
            return self.fail(
                0,
                [
                    f"ValueError: tensor_parallel_size ({cfg.tensor_parallel_size})"
                    f" is larger than the number of visible GPUs ({len(cfg.gpus)})"
                ],
                in_worker=False,
                starting=True,
            )
        try:
            self.alloc(pl.context)
        except Oom as oom:
            return self.fail_oom(oom, "load")
        short = self.startup_free()
        if short is not None:
            rank, free = short
            return self.fail(
                rank,
                vt.free_memory_traceback(free, pl.total, cfg.gpu_memory_utilization, pl.budget),
                in_worker=True,
                starting=True,
            )
        status = self.load_weights()
        if status is None:
            status = self.profile_and_kv()
        if status is None:
            status = self.capture_and_warm_up()
        if status is not None:
            return status
        self.announce_ready()
        return self.serve()

    def api_preamble(self) -> None:
        cfg = self.cfg
        self.log(vt.API, "INFO", "api_server.py:1885", f"vLLM API server version {vt.VERSION}")
        self.log(vt.API, "INFO", "utils.py:328", vt.non_default_args(cfg.given))
        self.log(vt.API, "INFO", "model.py:547", f"Resolved architecture: {cfg.card.architecture}")
        self.log(vt.API, "INFO", "model.py:1510", f"Using max model len {cfg.max_model_len}")
        self.log(
            vt.API,
            "INFO",
            "scheduler.py:205",
            f"Chunked prefill is enabled with max_num_batched_tokens={cfg.max_num_batched_tokens}.",
        )

    def load_weights(self) -> int | None:
        pl = self.plan
        comm = max(0, pl.graphs - min(pl.graphs, GRAPH_POOL_MAX))
        for w in self.workers():
            self.log(
                w,
                "INFO",
                "gpu_model_runner.py:2602",
                f"Starting to load model {self.cfg.card.name}...",
            )
        try:
            self.alloc(comm)  # NCCL / all-to-all buffers of the distributed init
            self.pause(2.5)
            self.alloc(pl.weights // 2)
            self.pause(2.4)
            self.alloc(pl.weights - pl.weights // 2)
        except Oom as oom:
            return self.fail_oom(oom, "load")
        for r, w in enumerate(self.workers()):
            took = 4.9 + 0.1 * r
            self.log(w, "INFO", "default_loader.py:267", texts.loading_weights_took(f"{took:.2f}"))
            self.log(
                w,
                "INFO",
                "gpu_model_runner.py:2653",
                f"Model loading took {gib_str(pl.weights)} GiB memory and {took + 0.7:.6f} seconds",
            )
        return None

    def profile_and_kv(self) -> int | None:
        cfg, pl = self.cfg, self.plan
        self.pause(3.0)
        try:
            self.alloc(pl.activations)
        except Oom as oom:
            return self.fail_oom(oom, "profile")
        for w in self.workers():
            self.log(w, "INFO", "gpu_worker.py:298", texts.available_kv_memory(gib_str(pl.kv)))
        if pl.kv <= 0:
            return self.fail(0, vt.no_cache_blocks_traceback(), in_worker=False, starting=True)
        if cfg.max_model_len > pl.kv_tokens:
            return self.fail(
                0,
                vt.kv_needed_traceback(
                    cfg.max_model_len, pl.kv_needed(cfg.max_model_len), pl.kv, pl.kv_tokens
                ),
                in_worker=False,
                starting=True,
            )
        self.log(
            vt.CORE, "INFO", "kv_cache_utils.py:1087", texts.kv_cache_size(f"{pl.kv_tokens:,}")
        )
        self.log(
            vt.CORE,
            "INFO",
            "kv_cache_utils.py:1091",
            texts.max_concurrency(
                f"{cfg.max_model_len:,}", f"{pl.kv_tokens / cfg.max_model_len:.2f}"
            ),
        )
        try:
            self.alloc(pl.kv)
        except Oom as oom:
            return self.fail_oom(oom, "kv")
        return None

    def capture_and_warm_up(self) -> int | None:
        pl = self.plan
        pool = 0 if self.cfg.enforce_eager else min(pl.graphs, GRAPH_POOL_MAX)
        self.pause(1.5)
        if self.cfg.enforce_eager:
            for w in self.workers():
                self.log(
                    w, "INFO", "gpu_model_runner.py:3455", "Cudagraph is disabled under eager mode"
                )
        else:
            self.raw(vt.worker_name(0, self.cfg.tensor_parallel_size), vt.cuda_graph_bar())
            self.pause(2.5)
            try:
                self.alloc(pool)
            except Oom as oom:
                return self.fail_oom(oom, "graphs")
            self.graph_pool = pool
            for w in self.workers():
                self.log(
                    w,
                    "INFO",
                    "gpu_model_runner.py:3480",
                    texts.graphs_captured("4", f"{pool / GIB:.2f}"),
                )
        self.pause(1.0)
        try:
            for _ in range(SAMPLER_CHUNKS):
                self.alloc(pl.sampler_chunk)
        except Oom as oom:
            return self.fail_oom(oom, "sampler")
        return None

    def announce_ready(self) -> None:
        cfg, pl = self.cfg, self.plan
        self.log(vt.CORE, "INFO", "core.py:210", texts.engine_init_took("18.64"))
        self.pause(0.6)
        self.log(
            vt.API,
            "INFO",
            "loggers.py:147",
            "Engine 000: vllm cache_config_info with "
            f"initialization after num_gpu_blocks is: {pl.kv_tokens // 16}",
        )
        self.log(vt.API, "INFO", "api_server.py:1634", "Supported_tasks: ['generate']")
        self.log(
            vt.API,
            "INFO",
            "api_server.py:1912",
            f"Starting vLLM API server 0 on http://{cfg.host}:{cfg.port}",
        )
        self.raw(vt.API, texts.uvicorn_started(self.pid))
        self.raw(vt.API, texts.UVICORN_WAITING)
        self.raw(vt.API, texts.UVICORN_READY)
        self.ready = True

    def serve(self) -> int:
        """Idle, answering a health check now and then, until SIGTERM (raises Terminated)."""
        port = 40_000 + self.pid % 20_000
        while True:
            self.pause(HEALTH_EVERY_S)
            self.raw(vt.API, f'INFO:     127.0.0.1:{port} - "GET /health HTTP/1.1" 200 OK')

    def shutdown(self) -> int:
        """After SIGTERM: vLLM's handler line, then uvicorn's — unless wedged."""
        self.log(vt.API, "INFO", "launcher.py:110", texts.HTTP_SHUTDOWN)
        if self.cfg.wedge_on_stop:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            while True:  # a worker stuck in a CUDA call: only SIGKILL ends this
                time.sleep(3600)
        if self.ready:
            for text in (
                texts.UVICORN_SHUTTING_DOWN,
                texts.UVICORN_WAITING_SHUTDOWN,
                texts.UVICORN_SHUTDOWN_COMPLETE,
                texts.uvicorn_finished(self.pid),
            ):
                self.raw(vt.API, text)
        return 0


def serve(cfg: Config) -> int:
    """Run one server in this process, writing to stdout; its exit status."""
    server = Server(cfg, sys.stdout)
    signal.signal(signal.SIGTERM, server.on_signal)
    signal.signal(signal.SIGINT, server.on_signal)
    try:
        return server.run()
    except Terminated:
        return server.shutdown()


def main(argv: Sequence[str] | None = None) -> int:
    return serve(parse_config(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
