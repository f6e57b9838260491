"""`advisor ingest gpu`: live NVML sampling (here: without a GPU, and with a fake sampler)
and replays of recordings."""

from __future__ import annotations

import io
import json
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest
from click.testing import CliRunner, Result

from advisor.cli.main import cli
from advisor.core.errors import GpuUnavailableError, MalformedInputError
from advisor.core.events import StoredEvent
from advisor.core.payloads import GpuProcess, GpuSampled
from advisor.store import EventStore
from ingest.gpu import replay_recording, sample_live
from ingest.gpu_recording import recording_line
from ingest.nvml import NvmlSampler
from tests.conftest import run_advisor

Opener = Callable[[str], EventStore]

HOST = "gpu-node-07"
GIB = 1024**3
T0 = 1_771_633_975_000_000  # 2026-02-21T00:32:55Z


def gpu(index: int, tick: int, *, host: str = HOST) -> GpuSampled:
    procs = None
    if tick % 2 == 0:  # process lists only every other tick, as with --process-every 2
        procs = (
            GpuProcess(
                pid=4242 + index,
                used_bytes=(20 + tick) * GIB,
                unit="vllm-minimax-m25.service",
                name="VLLM::Worker_TP",
            ),
            GpuProcess(pid=99, used_bytes=None, unit=None, name=None),
        )
    return GpuSampled(
        origin="nvml",
        host=host,
        index=index,
        uuid=f"GPU-{index:08d}",
        name="NVIDIA H200",
        memory_total_bytes=141 * GIB,
        memory_used_bytes=(21 + tick) * GIB,
        memory_free_bytes=(120 - tick) * GIB,
        utilization_gpu_pct=10 * tick,
        utilization_memory_pct=tick,
        temperature_c=40 + tick,
        power_w=150.5 + tick,
        processes=procs,
    )


def tick_time(tick: int) -> int:
    return T0 + tick * 1_000_000


def recording(path: Path, ticks: int = 4, *, host: str = HOST) -> Path:
    with open(path, "wb") as fh:
        for t in range(ticks):
            fh.write(
                recording_line(tick_time(t), host, [gpu(0, t, host=host), gpu(1, t, host=host)])
            )
    return path


def replay_cli(db_url: str, path: Path, *extra: str) -> Result:
    return CliRunner().invoke(cli, ["ingest", "gpu", "--replay", str(path), "--db", db_url, *extra])


def json_report(result: Result) -> dict[str, int]:
    assert result.exit_code == 0, result.output
    report: dict[str, int] = json.loads(result.stdout)
    return report


def envelope(events: list[StoredEvent]) -> list[tuple[object, ...]]:
    return [(e.stream, e.type, e.time_us, e.source, e.key, e.payload) for e in events]


# -- no GPU here -----------------------------------------------------------------------------


@pytest.fixture
def no_gpu() -> None:
    try:
        sampler = NvmlSampler("probe").open()
    except GpuUnavailableError:
        return
    sampler.close()
    pytest.skip("this machine has a usable GPU")


@pytest.mark.parametrize("extra", [[], ["--count", "1", "--interval", "0.1"]])
def test_live_without_gpu_exits_2_and_writes_nothing(
    no_gpu: None, tmp_path: Path, extra: list[str]
) -> None:
    db = tmp_path / "store" / "events.db"
    record = tmp_path / "rec.jsonl"
    proc = run_advisor(
        "ingest", "gpu", "--db", f"sqlite:///{db}", "--record", str(record), *extra, timeout=60
    )
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.decode()
    assert err.count("\n") == 1 and err.startswith("Error: ")
    assert "NVML" in err or "NVIDIA driver" in err
    assert "Traceback" not in err
    assert proc.stdout == b""
    assert not db.exists() and not db.parent.exists()
    assert not record.exists()


# -- replay ----------------------------------------------------------------------------------


def test_replay_stores_samples_with_processes(
    sqlite_url: str, tmp_path: Path, opener: Opener
) -> None:
    rec = recording(tmp_path / "rec.jsonl", ticks=4)
    report = json_report(replay_cli(sqlite_url, rec, "--json"))
    assert (report["read"], report["appended"], report["duplicates"], report["malformed"]) == (
        8,
        8,
        0,
        0,
    )
    events = list(opener(sqlite_url).read())
    assert [(e.stream, e.time_us) for e in events] == [
        (f"{HOST}/gpu{i}", tick_time(t)) for t in range(4) for i in range(2)
    ]
    assert {e.source for e in events} == {f"gpu:{HOST}"}
    assert [e.payload for e in events] == [gpu(i, t) for t in range(4) for i in range(2)]
    first = events[0].payload
    assert isinstance(first, GpuSampled) and first.processes is not None
    assert first.processes[0] == GpuProcess(
        pid=4242, used_bytes=20 * GIB, unit="vllm-minimax-m25.service", name="VLLM::Worker_TP"
    )
    assert isinstance(events[2].payload, GpuSampled) and events[2].payload.processes is None


def test_replay_twice_and_a_copy_store_nothing_new(
    store_url: str, tmp_path: Path, opener: Opener
) -> None:
    store = opener(store_url)
    rec = recording(tmp_path / "rec.jsonl", ticks=3)
    first = replay_recording(store, rec)
    assert (first.read, first.appended) == (6, 6)
    again = replay_recording(store, rec)
    assert (again.read, again.appended) == (0, 0)
    copy = tmp_path / "copy.jsonl"
    shutil.copy(rec, copy)
    copied = replay_recording(store, copy)
    assert (copied.read, copied.appended, copied.duplicates) == (6, 0, 6)
    # the recording grows: only the new tick is read
    with open(rec, "ab") as fh:
        fh.write(recording_line(tick_time(3), HOST, [gpu(0, 3), gpu(1, 3)]))
    grown = replay_recording(store, rec)
    assert (grown.read, grown.appended) == (2, 2)
    assert len(list(store.read())) == 8


def _with_bad_lines(tmp_path: Path) -> Path:
    good = [recording_line(tick_time(t), HOST, [gpu(0, t), gpu(1, t)]) for t in range(3)]
    bad = [
        b"not json at all\n",
        b'{"time_us": 5, "host": "h"}\n',  # no gpus
        b'{"time_us": -1, "host": "h", "gpus": []}\n',  # negative time
        good[0].replace(b'"memory_used_bytes":', b'"memory_used_bytes":-'),  # negative memory
        b"[1, 2, 3]\n",  # not an object
    ]
    path = tmp_path / "bad.jsonl"
    # line 1 good, lines 2-6 bad, line 7 blank, lines 8-9 good
    path.write_bytes(good[0] + b"".join(bad) + b"\n" + good[1] + good[2])
    return path


def test_replay_counts_malformed_lines(store_url: str, tmp_path: Path, opener: Opener) -> None:
    store = opener(store_url)
    report = replay_recording(store, _with_bad_lines(tmp_path))
    assert (report.appended, report.malformed_count) == (6, 5)
    assert [m.line_no for m in report.malformed] == [2, 3, 4, 5, 6]
    assert "invalid JSON" in report.malformed[0].reason
    assert [e.time_us for e in store.read()] == [tick_time(t) for t in range(3) for _ in (0, 1)]


def test_replay_cli_reports_malformed_lines(sqlite_url: str, tmp_path: Path) -> None:
    result = replay_cli(sqlite_url, _with_bad_lines(tmp_path))
    assert result.exit_code == 0, result.output
    assert "stored 6 new events, 0 already stored, 5 malformed" in result.stdout
    assert "  line 2: invalid JSON" in result.stderr


def test_replay_strict_stores_nothing(store_url: str, tmp_path: Path, opener: Opener) -> None:
    store = opener(store_url)
    path = _with_bad_lines(tmp_path)
    with pytest.raises(MalformedInputError, match="line 2:"):
        replay_recording(store, path, strict=True)
    assert list(store.read()) == []
    assert replay_recording(store, recording(tmp_path / "ok.jsonl"), strict=True).appended == 8


def test_replay_cli_strict(sqlite_url: str, tmp_path: Path, opener: Opener) -> None:
    result = replay_cli(sqlite_url, _with_bad_lines(tmp_path), "--strict")
    assert result.exit_code == 4
    assert result.stderr.startswith("Error: ") and "line 2" in result.stderr
    assert result.stderr.count("\n") == 1
    assert list(opener(sqlite_url).read()) == []


def test_replay_missing_file(sqlite_url: str, tmp_path: Path) -> None:
    result = replay_cli(sqlite_url, tmp_path / "nope.jsonl")
    assert result.exit_code == 4
    assert "nope.jsonl: no such file" in result.stderr


def test_record_and_replay_exclude_each_other(sqlite_url: str, tmp_path: Path) -> None:
    rec = recording(tmp_path / "rec.jsonl")
    result = replay_cli(sqlite_url, rec, "--record", str(tmp_path / "out.jsonl"))
    assert result.exit_code == 2
    assert "--record and --replay" in result.stderr
    assert not (tmp_path / "out.jsonl").exists()


# -- live sampling with a fake sampler -------------------------------------------------------


class FakeSampler:
    """What sample_live needs of NvmlSampler: a host and sample()."""

    def __init__(self, host: str = HOST, gpus: int = 2) -> None:
        self.host = host
        self.gpus = gpus
        self.ticks = 0

    def sample(self, time_us: int | None = None) -> tuple[int, list[GpuSampled]]:
        t = self.ticks
        self.ticks += 1
        return tick_time(t), [gpu(i, t, host=self.host) for i in range(self.gpus)]


def as_nvml(sampler: FakeSampler) -> NvmlSampler:
    return cast(NvmlSampler, sampler)


def test_sample_live_records_and_replays_identically(
    store_url: str, tmp_path: Path, opener: Opener
) -> None:
    live_store = opener(store_url)
    record = io.BytesIO()
    seen: list[tuple[int, int]] = []
    report = sample_live(
        live_store,
        as_nvml(FakeSampler()),
        interval_s=0.01,
        count=3,
        record=record,
        on_tick=lambda t, s: seen.append((t, len(s))),
    )
    assert (report.read, report.appended, report.duplicates) == (6, 6, 0)
    assert seen == [(tick_time(t), 2) for t in range(3)]
    lines = record.getvalue().splitlines(keepends=True)
    assert len(lines) == 3 and all(line.endswith(b"\n") for line in lines)

    path = tmp_path / "rec.jsonl"
    path.write_bytes(record.getvalue())
    replay_url = f"sqlite:///{tmp_path / 'replay.db'}"
    replay_store = opener(replay_url)
    replayed = replay_recording(replay_store, path)
    assert (replayed.read, replayed.appended, replayed.malformed_count) == (6, 6, 0)
    live = list(live_store.read())
    assert envelope(list(replay_store.read())) == envelope(live)
    assert [e.payload for e in live] == [gpu(i, t) for t in range(3) for i in range(2)]
    # replaying the recording into the store that sampled it live adds nothing
    again = replay_recording(live_store, path)
    assert (again.appended, again.duplicates) == (0, 6)


def test_sample_live_without_store_only_records(tmp_path: Path) -> None:
    record = io.BytesIO()
    report = sample_live(
        None, as_nvml(FakeSampler(gpus=3)), interval_s=0.01, count=2, record=record
    )
    assert (report.read, report.appended) == (6, 0)
    assert len(record.getvalue().splitlines()) == 2


def test_sample_live_stops_when_asked(sqlite_url: str, opener: Opener) -> None:
    store = opener(sqlite_url)
    stop = threading.Event()
    sampler = FakeSampler()

    def after_tick(_t: int, _s: list[GpuSampled]) -> None:
        if sampler.ticks == 2:
            stop.set()

    report = sample_live(
        store, as_nvml(sampler), interval_s=0.01, count=100, stop=stop, on_tick=after_tick
    )
    assert report.appended == 4
    assert sampler.ticks == 2
