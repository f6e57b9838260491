"""Console speed: how long `advisor serve` takes to render an incident's page (and the list,
and the fleet) on a store with many incidents.

    .venv/bin/python bench/console.py [--incidents 10000] [--hosts 20] [--repeat 20] [--workdir DIR]
        [--report]
    .venv/bin/python bench/console.py --load 2000 --at-once 200 [--incidents 10000] [--workdir DIR]
        [--db postgresql+psycopg://postgres@127.0.0.1:5432/bench] [--writes-per-s 2]

Builds a store (SQLite in the work folder, or the empty database --db names) through the
store API where every unit crashes in the sampler warm-up, restarts and comes up healthy,
over and over (each cycle one incident, opened and resolved), folds and diagnoses it, then
starts `advisor serve` as a real process on 127.0.0.1 and times GET requests over HTTP: the
newest incident's page, one from the middle of the history, the incident list and the fleet
page (the first request of each is reported apart: it is the one that folds whatever is new,
and renders the page kept for later requests while the store stays where it is). Prints the
median and the slowest of the rest.

With --load N: N GET requests instead, --at-once of them in flight at any time, spread over
the incident list, /api/changes, /metrics and an incident's page; prints how many were
answered (and with which status: 503 is the console saying it is busy, with Retry-After),
how many got no answer (an error or a time-out), the median and 95th percentile per page,
how long /api/changes takes to answer once the load has stopped, and how long the server
takes to exit after SIGTERM. With --writes-per-s R another process's writes go on meanwhile:
R events a second appended to the store (a daemon ingesting), each one a new store position,
so that the pages are read anew while the load runs.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import islice
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import figures  # noqa: E402
from bench_events import journal_event  # noqa: E402

from advisor.core.events import NewEvent  # noqa: E402
from advisor.pipeline.processing import Processor  # noqa: E402
from advisor.store import EventStore, open_store  # noqa: E402
from advisor.store.integrity.retained import last_seq  # noqa: E402
from advisor.views.read.incidents import incident_rows  # noqa: E402

T0 = 1_780_000_000_000_000
PAGE_TARGET_MS = 200  # an incident page, whatever the number of incidents and actions
OOM = (
    "(Worker_TP0 pid=7) ERROR 12-01 10:00:00 [multiproc_executor.py:671] torch.OutOfMemoryError: "
    "CUDA out of memory. Tried to allocate 782.00 MiB. GPU 0 has a total capacity of 94.97 GiB "
    "of which 411.62 MiB is free."
)
SAMPLER = (
    "(Worker_TP0 pid=7) ERROR 12-01 10:00:00 [multiproc_executor.py:671] RuntimeError: CUDA out "
    "of memory occurred when warming up sampler with 1024 dummy requests."
)


def crash_cycle(host: str, unit: str, t: int, key: int) -> Iterator[NewEvent]:
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
        yield from crash_cycle(host, unit, T0 + i * 60_000_000, i)


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


def _time(name: str, url: str, repeat: int) -> tuple[float, float]:
    """The first request's time and the median of the rest, in seconds."""
    first = _get(url)
    rest = [_get(url) for _ in range(repeat)]
    median = statistics.median(rest)
    print(
        f"{name:<28} first {first * 1000:7.0f} ms   median {median * 1000:7.0f} ms"
        f"   slowest {max(rest) * 1000:7.0f} ms   ({repeat} requests)",
        flush=True,
    )
    return first, median


def page_figures(times: dict[str, tuple[float, float]], incidents: int) -> list[figures.Figure]:
    """The report's rows: the first page asked for after the start (it may come before the
    console's warm-up ends), another incident's page seen the first time, and pages again."""
    newest, middle = times["newest"], times["middle"]
    rows = (
        ("incident page, first request after start", newest[0], None),
        (f"incident page, first view ({incidents:,} incidents)", middle[0], PAGE_TARGET_MS),
        ("incident page, seen again (median)", newest[1], PAGE_TARGET_MS),
    )
    return [
        figures.Figure(
            "console",
            name,
            round(seconds * 1000, 1),
            "ms",
            "(the console warming up)" if target is None else f"≤ {target} ms",
            target is None or seconds * 1000 <= target,
        )
        for name, seconds, target in rows
    ]


def _start(url: str) -> tuple[subprocess.Popen[bytes], str]:
    """`advisor serve` on a free port, once it answers."""
    port = _free_port()
    argv = [sys.executable, "-m", "advisor", "serve", "--db", url, "--listen", f"127.0.0.1:{port}"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, env=dict(os.environ))
    base = f"http://127.0.0.1:{port}"
    for _ in range(400):
        try:
            urllib.request.urlopen(f"{base}/api/changes", timeout=5).close()
            break
        except OSError:
            time.sleep(0.25)
    return proc, base


def _status(url: str, timeout_s: float) -> tuple[int | str, float]:
    """(the status, or the error's name, of a GET; its seconds)."""
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as r:
            r.read()
            status: int | str = r.status
    except urllib.error.HTTPError as e:
        said_when = e.code != 503 or e.headers.get("Retry-After") is not None
        status = e.code if said_when else "503 without Retry-After"
    except OSError as e:
        status = type(e).__name__
    return status, time.perf_counter() - started


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _writer(url: str, per_s: float) -> subprocess.Popen[bytes]:
    """Another process appending `per_s` log events a second to the store until killed."""
    code = (
        "import sys, time\n"
        "from bench_events import journal_event\n"
        "from advisor.store import open_store\n"
        "store = open_store(sys.argv[1])\n"
        "key, pause = 10**12, 1 / float(sys.argv[2])\n"
        "while True:\n"
        "    key += 1\n"
        "    store.append([journal_event('writer', 'other.service', time.time_ns() // 1000,"
        " key, 'INFO a line', False)])\n"
        "    time.sleep(pause)\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'bench'}{os.pathsep}{ROOT}"}
    return subprocess.Popen([sys.executable, "-c", code, url, str(per_s)], env=env)


def load(
    url: str, incident: str, requests: int, at_once: int, timeout_s: float, writes_per_s: float
) -> None:
    """The load run (see the module's docstring)."""
    proc, base = _start(url)
    before = last_seq_of(url)
    writer = None
    if writes_per_s > 0:
        writer = _writer(url, writes_per_s)
        while last_seq_of(url) == before:  # its first write: it is running
            if writer.poll() is not None:
                raise SystemExit(f"the writer exited ({writer.returncode}) before writing")
            time.sleep(0.05)
    pages = {
        "/": f"{base}/",
        "/api/changes": f"{base}/api/changes",
        "/metrics": f"{base}/metrics",
        "/incident/ID": f"{base}/incident/{urllib.parse.quote(incident)}",
    }
    names = list(pages)
    started = time.perf_counter()
    with ThreadPoolExecutor(at_once) as pool:
        jobs = [
            (names[i % len(names)], pool.submit(_status, pages[names[i % len(names)]], timeout_s))
            for i in range(requests)
        ]
        results = [(name, *job.result()) for name, job in jobs]
    took = time.perf_counter() - started
    if writer is not None:
        writer.kill()
        writer.wait()
        print(f"meanwhile {last_seq_of(url) - before} events appended by another process")
    statuses = Counter(status for _, status, _ in results)
    answered = sum(n for status, n in statuses.items() if isinstance(status, int))
    print(
        f"{requests} GETs, {at_once} at once, in {took:.1f} s: {answered} answered, "
        f"{requests - answered} not; by status: "
        + ", ".join(f"{s}: {n}" for s, n in sorted(statuses.items(), key=str)),
        flush=True,
    )
    for name in names:
        ok = [t for n, s, t in results if n == name and s == 200]
        busy = sum(1 for n, s, _ in results if n == name and s == 503)
        print(
            f"  {name:<14} 200: {len(ok):4}  p50 {_percentile(ok, 0.5) * 1000:6.0f} ms  "
            f"p95 {_percentile(ok, 0.95) * 1000:6.0f} ms  503: {busy}",
            flush=True,
        )
    status, after = _status(pages["/api/changes"], 60)
    print(f"/api/changes right after the load: {status} in {after * 1000:.0f} ms", flush=True)
    proc.send_signal(signal.SIGTERM)
    stopping = time.perf_counter()
    try:
        code = proc.wait(timeout=60)
        print(f"SIGTERM to exit: {time.perf_counter() - stopping:.2f} s (exit {code})", flush=True)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        print("SIGTERM to exit: still running after 60 s (killed)", flush=True)


def last_seq_of(url: str) -> int:
    store = open_store(url)
    try:
        return last_seq(store)
    finally:
        store.close()


def serve_and_time(url: str, ids: list[str], repeat: int) -> dict[str, tuple[float, float]]:
    """Time the pages; each page's first request and the median of the rest, in seconds."""
    proc, base = _start(url)
    try:
        return {
            "newest": _time("incident page, newest", _page(base, ids[-1]), repeat),
            "middle": _time("incident page, middle", _page(base, ids[len(ids) // 2]), repeat),
            "list": _time("incident list (200 shown)", f"{base}/", repeat),
            "fleet": _time("fleet page", f"{base}/fleet", max(1, repeat // 4)),
        }
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _page(base: str, incident: str) -> str:
    return f"{base}/incident/{urllib.parse.quote(incident)}"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--incidents", type=int, default=10_000)
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--workdir", type=Path, help="keep the store here (reused when built)")
    parser.add_argument("--db", help="the store's URL (default: SQLite in the work folder)")
    parser.add_argument(
        "--writes-per-s", type=float, default=0, help="events appended a second (--load)"
    )
    parser.add_argument("--load", type=int, metavar="N", help="N GETs under load instead")
    parser.add_argument("--at-once", type=int, default=200, help="requests in flight (--load)")
    parser.add_argument("--timeout", type=float, default=150, help="seconds a GET may take")
    parser.add_argument("--report", action="store_true", help="print the figures for report.py")
    args = parser.parse_args()
    folder = args.workdir or Path(tempfile.mkdtemp(prefix="advisor-console-"))
    folder.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("ADVISOR_KEY", str(folder / "host-key"))
    url = args.db or f"sqlite:///{folder / 'console.db'}"
    store = open_store(url)
    if last_seq(store) == 0:
        seconds = build(store, args.incidents, args.hosts)
        print(f"built {args.incidents:,} crash cycles in {seconds:.0f} s", flush=True)
    ids = [i.incident_id for i in incident_rows(store) if i.status != "superseded"]
    store.close()
    print(f"store: {url}: {len(ids):,} incidents", flush=True)
    if args.load:
        load(url, ids[-1], args.load, args.at_once, args.timeout, args.writes_per_s)
    else:
        times = serve_and_time(url, ids, args.repeat)
        if args.report:
            figures.emit(page_figures(times, len(ids)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
