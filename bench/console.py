"""Console speed: how long `advisor serve` takes to render an incident's page (and the list,
and the fleet) on a store with many incidents.

    .venv/bin/python bench/console.py [--incidents 10000] [--hosts 20] [--repeat 20] [--workdir DIR]

Builds a SQLite store through the store API where every unit crashes in the sampler warm-up,
restarts and comes up healthy, over and over (each cycle one incident, opened and resolved),
folds and diagnoses it, then starts `advisor serve` as a real process on 127.0.0.1 and times
GET requests over HTTP: the newest incident's page, one from the middle of the history, the
incident list and the fleet page (the first request of each is reported apart: it is the one
that folds whatever is new). Prints the median and the slowest of the rest.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_events import journal_event  # noqa: E402

from advisor.core.events import NewEvent  # noqa: E402
from advisor.pipeline.processing import Processor  # noqa: E402
from advisor.store import EventStore, open_store  # noqa: E402
from advisor.store.audit import last_seq  # noqa: E402
from advisor.views.incidents import incident_rows  # noqa: E402

T0 = 1_780_000_000_000_000
OOM = (
    "(Worker_TP0 pid=7) ERROR 12-01 10:00:00 [multiproc_executor.py:671] torch.OutOfMemoryError: "
    "CUDA out of memory. Tried to allocate 782.00 MiB. GPU 0 has a total capacity of 94.97 GiB "
    "of which 411.62 MiB is free."
)
SAMPLER = (
    "(Worker_TP0 pid=7) ERROR 12-01 10:00:00 [multiproc_executor.py:671] RuntimeError: CUDA out "
    "of memory occurred when warming up sampler with 1024 dummy requests."
)


def _cycle(host: str, unit: str, t: int, key: int) -> Iterator[NewEvent]:
    """One crash in the sampler warm-up, a restart, a healthy start: one incident."""
    lines = (
        (True, f"Started {unit} - bench."),
        (
            False,
            "INFO 12-01 10:00:00 [gpu_model_runner.py:1] Warming up sampler with 1024 "
            "dummy requests",
        ),
        (False, OOM),
        (False, SAMPLER),
        (True, f"{unit}: Main process exited, code=exited, status=1/FAILURE"),
        (True, f"{unit}: Failed with result 'exit-code'."),
        (True, f"{unit}: Scheduled restart job, restart counter is at 1."),
        (True, f"Started {unit} - bench."),
        (False, "INFO:     Application startup complete."),
    )
    for n, (by_systemd, message) in enumerate(lines):
        yield journal_event(host, unit, t + n * 1_000_000, key * 16 + n, message, by_systemd)


def _events(incidents: int, hosts: int) -> Iterator[NewEvent]:
    for i in range(incidents):
        host, unit = f"node-{i % hosts:03d}", f"vllm-{i // hosts % 3}.service"
        yield from _cycle(host, unit, T0 + i * 60_000_000, i)


def build(store: EventStore, incidents: int, hosts: int) -> float:
    started = time.perf_counter()
    source = _events(incidents, hosts)
    while batch := list(islice(source, 5000)):
        store.append(batch)
    Processor(store).run(final=True)
    return time.perf_counter() - started


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as r:
        body = r.read()
        assert r.status == 200 and body, url
    return time.perf_counter() - started


def _time(name: str, url: str, repeat: int) -> None:
    first = _get(url)
    rest = [_get(url) for _ in range(repeat)]
    print(
        f"{name:<28} first {first * 1000:7.0f} ms   median {statistics.median(rest) * 1000:7.0f} ms"
        f"   slowest {max(rest) * 1000:7.0f} ms   ({repeat} requests)",
        flush=True,
    )


def serve_and_time(url: str, ids: list[str], repeat: int) -> None:
    port = _free_port()
    argv = [sys.executable, "-m", "advisor", "serve", "--db", url, "--listen", f"127.0.0.1:{port}"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, env=dict(os.environ))
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(400):
            try:
                urllib.request.urlopen(f"{base}/api/changes", timeout=5).close()
                break
            except OSError:
                time.sleep(0.25)
        for name, incident in (
            ("incident page, newest", ids[-1]),
            ("incident page, middle", ids[len(ids) // 2]),
        ):
            _time(name, f"{base}/incident/{urllib.parse.quote(incident)}", repeat)
        _time("incident list (200 shown)", f"{base}/", repeat)
        _time("fleet page", f"{base}/fleet", max(1, repeat // 4))
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--incidents", type=int, default=10_000)
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--workdir", type=Path, help="keep the store here (reused when built)")
    args = parser.parse_args()
    folder = args.workdir or Path(tempfile.mkdtemp(prefix="advisor-console-"))
    folder.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("ADVISOR_KEY", str(folder / "host-key"))
    url = f"sqlite:///{folder / 'console.db'}"
    store = open_store(url)
    if last_seq(store) == 0:
        seconds = build(store, args.incidents, args.hosts)
        print(f"built {args.incidents:,} crash cycles in {seconds:.0f} s", flush=True)
    ids = [i.incident_id for i in incident_rows(store) if i.status != "superseded"]
    store.close()
    print(f"store: {url}: {len(ids):,} incidents", flush=True)
    serve_and_time(url, ids, args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
