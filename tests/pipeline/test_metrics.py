"""Prometheus metrics read from a real store (the seed scenario diagnosed, GPU samples taken
through the live sampling path), served over real HTTP on 127.0.0.1 and parsed back with
prometheus_client's own parser; a bad --metrics address is refused with one line."""

from __future__ import annotations

import asyncio
import json
import socket
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from advisor.cli.main import cli
from advisor.core.errors import InputError
from advisor.core.payloads import GpuProcess, GpuSampled
from advisor.execution.backends import DryRunBackend
from advisor.execution.decisions import approve
from advisor.execution.run import execute
from advisor.fleet.ship import checkpoint_name
from advisor.pipeline.metrics import (
    METRICS,
    asgi_app,
    parse_listen,
    registry_for,
    serve_metrics,
)
from advisor.pipeline.processing import Processor
from advisor.store import EventStore, open_store
from advisor.store.types import Checkpoint
from ingest.gpu import sample_live
from ingest.journal_sources import ingest_json_file

UNIT = "vllm-minimax-m25.service"
SAMPLER_PLAN = f"gpu-node-07/{UNIT}@2026-02-21T00:32:55.000000Z"
GIB = 2**30


class _TwoGpus:
    """A sampler: two GPUs, the unit's worker on the first."""

    host = "gpu-node-07"

    def sample(self, time_us: int | None = None) -> tuple[int, list[GpuSampled]]:
        now = time_us or time.time_ns() // 1000

        def gpu(index: int, used: int, processes: tuple[GpuProcess, ...]) -> GpuSampled:
            return GpuSampled(
                origin="nvml",
                host=self.host,
                index=index,
                memory_total_bytes=96 * GIB,
                memory_used_bytes=used,
                memory_free_bytes=96 * GIB - used,
                processes=processes,
            )

        worker = GpuProcess(pid=4242, used_bytes=80 * GIB, unit=UNIT)
        return now, [gpu(0, 81 * GIB, (worker,)), gpu(1, GIB, ())]


def _samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Every sample of the exposition text by sample name (histogram parts apart)."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def _value(samples: list[tuple[dict[str, str], float]], **labels: str) -> float:
    [value] = [v for got, v in samples if all(got.get(k) == x for k, x in labels.items())]
    return value


def _reader(url: str) -> Callable[[], EventStore]:
    return lambda: open_store(url, read_only=True)


def test_the_metrics_say_what_the_store_holds(
    store_url: str, opener: Callable[[str], EventStore], seed_journal: Path
) -> None:
    """On SQLite and on PostgreSQL."""
    diagnosed = opener(store_url)
    ingest_json_file(diagnosed, seed_journal)
    Processor(diagnosed).run(final=True)
    sample_live(diagnosed, _TwoGpus(), interval_s=0.01, count=1)  # type: ignore[arg-type]
    ship_to = "postgresql+psycopg://advisor:secret@central/fleet"
    diagnosed.append_prepared([], Checkpoint(checkpoint_name(ship_to), {"seq": 10}))
    text = generate_latest(registry_for(_reader(store_url), ship_to)).decode()
    got = _samples(text)
    incidents = got["advisor_incidents"]
    assert _value(incidents, label="sampler_warmup_oom", unit=UNIT, status="open") == 1
    assert _value(incidents, label="wedged_stop", unit=UNIT, status="open") == 1
    assert _value(got["advisor_plans_pending"]) == 2
    assert _value(got["advisor_actions"], kind="set_flag", status="proposed") == 2
    assert _value(got["advisor_proposal_latency_seconds_count"]) == 2
    assert _value(got["advisor_proposal_latency_seconds_bucket"], le="+Inf") == 2
    assert _value(got["advisor_journal_lag_seconds"]) > 0
    assert _value(got["advisor_journal_last_entry_timestamp_seconds"]) == pytest.approx(
        1771633_000, abs=86_400
    )  # 2026-02-21, when the seed's lines were written
    lag = _value(got["advisor_ship_lag_events"])
    assert lag > 0 and "secret" not in text
    assert _value(got["advisor_gpu_memory_used_bytes"], gpu="0") == 81 * GIB
    assert _value(got["advisor_gpu_memory_total_bytes"], gpu="1") == 96 * GIB
    assert _value(got["advisor_gpu_unit_memory_used_bytes"], gpu="0", unit=UNIT) == 80 * GIB
    assert not [s for s in got["advisor_gpu_unit_memory_used_bytes"] if s[0]["gpu"] == "1"]
    assert {f.name for f in text_string_to_metric_families(text)} == set(METRICS)


def test_actions_by_outcome_and_pending_plans_follow_the_executor(
    diagnosed: EventStore, sqlite_url: str
) -> None:
    approve(diagnosed, SAMPLER_PLAN, "human:test")
    execute(diagnosed, DryRunBackend(), SAMPLER_PLAN)
    got = _samples(generate_latest(registry_for(_reader(sqlite_url))).decode())
    assert _value(got["advisor_plans_pending"]) == 1
    assert _value(got["advisor_actions"], kind="set_flag", status="succeeded") == 1
    assert _value(got["advisor_actions"], kind="restart", status="succeeded") == 1
    assert "advisor_ship_lag_events" not in got  # not shipping: not exported


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_metrics_are_served_over_http(diagnosed: EventStore, sqlite_url: str) -> None:
    listen = f"127.0.0.1:{_free_port()}"
    stop = serve_metrics(listen, registry_for(_reader(sqlite_url)))
    try:
        with urllib.request.urlopen(f"http://{listen}/metrics", timeout=30) as response:
            body: Any = response.read().decode()
            assert response.status == 200
    finally:
        stop()
    assert _value(_samples(body)["advisor_plans_pending"]) == 2
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = f"127.0.0.1:{taken.getsockname()[1]}"
        with pytest.raises(InputError, match=rf"^--metrics {busy}: cannot listen there: "):
            serve_metrics(busy, registry_for(_reader(sqlite_url)))


@pytest.mark.parametrize("bad", ["9750", "localhost:", ":9750", "127.0.0.1:http", "h:70000"])
def test_a_bad_listen_address_is_refused(bad: str) -> None:
    with pytest.raises(InputError, match=r"^--metrics .*: not HOST:PORT"):
        parse_listen(bad)
    assert parse_listen("[::1]:9750") == ("::1", 9750)


def test_watch_refuses_a_bad_metrics_address_in_one_line(sqlite_url: str) -> None:
    result = CliRunner().invoke(
        cli, ["watch", "--unit", UNIT, "--no-gpu", "--metrics", "nowhere", "--db", sqlite_url]
    )
    assert result.exit_code == 4, result.output
    assert result.output == ("Error: --metrics 'nowhere': not HOST:PORT (e.g. 127.0.0.1:9750)\n")


def test_the_asgi_app_serves_the_same_metrics(diagnosed: EventStore, sqlite_url: str) -> None:
    """What `advisor serve` mounts at /metrics, called as an ASGI server would."""
    app = asgi_app(registry_for(_reader(sqlite_url)))
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "GET",
        "path": "/metrics",
        "query_string": b"",
        "headers": [],
    }
    asyncio.run(app(scope, receive, send))
    assert sent[0]["status"] == 200
    body = b"".join(m.get("body", b"") for m in sent[1:]).decode()
    assert _value(_samples(body)["advisor_plans_pending"]) == 2


def test_proposal_latency_runs_from_the_crash_to_the_proposal(
    tmp_path: Path, sqlite_url: str, opener: Callable[[str], EventStore], seed_journal: Path
) -> None:
    """The seed's lines written just now, as `watch` stores them: each plan is proposed a
    few seconds (not 0, not months) after the crash of its incident."""
    entries = [json.loads(line) for line in seed_journal.read_text().splitlines() if line]
    shift = (
        time.time_ns() // 1000 - 1_000_000 - max(int(e["__REALTIME_TIMESTAMP"]) for e in entries)
    )
    for e in entries:
        for key in ("__REALTIME_TIMESTAMP", "_SOURCE_REALTIME_TIMESTAMP"):
            if key in e:
                e[key] = str(int(e[key]) + shift)
    recent = tmp_path / "recent.jsonl"
    recent.write_text("".join(json.dumps(e) + "\n" for e in entries))
    store = opener(sqlite_url)
    ingest_json_file(store, recent)
    Processor(store).run(final=True)
    got = _samples(generate_latest(registry_for(_reader(sqlite_url))).decode())
    assert _value(got["advisor_proposal_latency_seconds_count"]) == 2
    assert _value(got["advisor_proposal_latency_seconds_bucket"], le="600.0") == 2
    assert _value(got["advisor_proposal_latency_seconds_sum"]) > 0.5
