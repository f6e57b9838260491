"""`advisor serve` under load (a real process, many clients at once): every request is
answered — a page, or 503 with Retry-After when the console is saturated, never a hang or
another 5xx — the console answers at once when the load is over, and SIGTERM stops it
within seconds even with requests in flight. (bench/console.py --load: the same at 2,000
requests, 200 at once, with the times.)"""

from __future__ import annotations

import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from advisor.store import EventStore
from tests.console.serving import serving

UNIT = "vllm-minimax-m25.service"
SAMPLER = f"gpu-node-07/{UNIT}@2026-02-21T00:32:55.000000Z"
REQUESTS, AT_ONCE = 400, 100
PATIENCE_S = 60  # a GET that takes longer counts as unanswered


def _get(url: str) -> tuple[int | str, float]:
    """(status, or the error that came instead of an answer; seconds)."""
    started = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=PATIENCE_S) as answer:
            answer.read()
            status: int | str = answer.status
    except urllib.error.HTTPError as e:
        said = e.code != 503 or e.headers.get("Retry-After") is not None
        status = e.code if said else "503 without Retry-After"
    except OSError as e:
        status = repr(e)
    return status, time.monotonic() - started


def _stop(proc: subprocess.Popen[bytes]) -> float:
    """SIGTERM; the seconds to its exit (at most 30, then it is killed)."""
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    return time.monotonic() - started


def test_under_load_every_request_is_answered_and_sigterm_stops_it(
    diagnosed: EventStore, sqlite_url: str, tmp_path: Path
) -> None:
    with serving(sqlite_url, log=tmp_path / "serve.log") as (proc, base):
        urls = [
            f"{base}/",
            f"{base}/api/changes",
            f"{base}/metrics",
            f"{base}/fleet",
            f"{base}/incident/{urllib.parse.quote(SAMPLER)}",
        ]
        with ThreadPoolExecutor(AT_ONCE) as pool:
            results = list(pool.map(_get, [urls[i % len(urls)] for i in range(REQUESTS)]))
        statuses = [status for status, _ in results]
        assert set(statuses) <= {200, 503}, sorted(set(map(str, statuses)))
        assert statuses.count(200) >= REQUESTS // 4, statuses  # not only "busy"
        after, took = _get(f"{base}/api/changes")
        assert after == 200 and took < 5, (after, took)
        with ThreadPoolExecutor(AT_ONCE) as pool:  # SIGTERM with requests in flight
            burst = [pool.submit(_get, urls[i % len(urls)]) for i in range(AT_ONCE)]
            while not any(job.done() for job in burst):
                time.sleep(0.01)
            stopping = _stop(proc)
        assert stopping <= 5, f"SIGTERM to exit: {stopping:.1f} s"
