"""`advisor ingest nvidia-smi`: CSV logs of `nvidia-smi --query-gpu=... --format=csv -l N`."""

from __future__ import annotations

import gc
import json
import shutil
import warnings
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from advisor.cli.main import cli
from advisor.core.errors import MalformedInputError
from advisor.core.payloads import GpuSampled
from advisor.store import EventStore
from ingest.batches import IngestReport
from ingest.nvidia_smi import ingest_nvidia_smi_file
from tests.journal_fixtures import entry, json_line

Opener = Callable[[str], EventStore]

HOST = "gpu-node-07"
MIB = 1024 * 1024
HEADER = (
    "timestamp, index, name, memory.total [MiB], memory.used [MiB], memory.free [MiB], "
    "utilization.gpu [%], utilization.memory [%], temperature.gpu, power.draw [W]"
)


def us(iso: str) -> int:
    dt = datetime.fromisoformat(iso)
    return int(dt.timestamp()) * 1_000_000 + dt.microsecond


def row(
    second: int,
    index: int,
    used: int = 1000,
    *,
    total: str = "97887 MiB",
    free: str | None = None,
    util: str = "12 %",
    mem_util: str = "3 %",
    temp: str = "41",
    power: str = "135.40 W",
) -> str:
    free = free if free is not None else f"{97887 - used} MiB"
    return (
        f"2026/02/21 00:33:{second:02d}.250, {index}, NVIDIA H200, {total}, {used} MiB, "
        f"{free}, {util}, {mem_util}, {temp}, {power}"
    )


def write_csv(path: Path, *lines: str) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def samples(store: EventStore) -> list[GpuSampled]:
    out = []
    for e in store.read():
        assert isinstance(e.payload, GpuSampled)
        out.append(e.payload)
    return out


def run_cli(db_url: str, path: Path, *extra: str) -> Result:
    return CliRunner().invoke(
        cli, ["ingest", "nvidia-smi", str(path), "--host", HOST, "--db", db_url, *extra]
    )


def json_report(result: Result) -> dict[str, object]:
    assert result.exit_code == 0, result.output
    report: dict[str, object] = json.loads(result.stdout)
    return report


# -- the seed scenario -----------------------------------------------------------------------


@pytest.fixture
def seed(seed_csv: Path) -> Path:
    return seed_csv


def test_seed_csv(seed: Path, sqlite_url: str, opener: Opener) -> None:
    report = json_report(run_cli(sqlite_url, seed, "--json"))
    assert (report["read"], report["appended"], report["duplicates"], report["malformed"]) == (
        1208,
        1208,
        0,
        0,
    )
    store = opener(sqlite_url)
    events = list(store.read())
    assert len(events) == 1208
    assert {e.type for e in events} == {"gpu.sampled"}
    assert sorted({e.stream for e in events}) == [f"{HOST}/gpu{i}" for i in range(8)]
    assert {e.source for e in events} == {f"gpu:{HOST}"}
    assert len({e.time_us for e in events}) == 151
    assert min(e.time_us for e in events) == us("2026-02-21T00:32:55+00:00")
    assert max(e.time_us for e in events) == us("2026-02-21T00:35:25+00:00")
    got = [e.payload for e in events]
    assert all(isinstance(p, GpuSampled) and p.memory_total_bytes == 97887 * MIB for p in got)
    assert all(
        isinstance(p, GpuSampled)
        and p.host == HOST
        and p.origin == "nvidia-smi"
        and p.processes is None
        for p in got
    )
    first = got[0]
    assert isinstance(first, GpuSampled)
    assert (first.index, first.uuid, first.name) == (
        0,
        "GPU-00000000-6000-4b1a-9c2e-000000000000",
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
    )
    assert (first.memory_used_bytes, first.memory_free_bytes) == (3 * MIB, 97884 * MIB)
    assert (first.utilization_gpu_pct, first.temperature_c, first.power_w) == (0, 34, 85.0)
    assert first.utilization_memory_pct is None  # not a column of this log
    # line 170: the peak on GPU 0, just before the crash
    (peak,) = [
        e
        for e in events
        if e.stream == f"{HOST}/gpu0" and e.time_us == us("2026-02-21T00:33:16+00:00")
    ]
    p = peak.payload
    assert isinstance(p, GpuSampled)
    assert (p.memory_used_bytes, p.memory_free_bytes) == (96800 * MIB, 1087 * MIB)
    assert (p.utilization_gpu_pct, p.temperature_c, p.power_w) == (12, 38, 135.4)
    assert max(q.memory_used_bytes for q in got if isinstance(q, GpuSampled)) == 96800 * MIB


def test_seed_csv_again_and_as_a_copy_stores_nothing(
    seed: Path, sqlite_url: str, tmp_path: Path, opener: Opener
) -> None:
    assert json_report(run_cli(sqlite_url, seed, "--json"))["appended"] == 1208
    again = json_report(run_cli(sqlite_url, seed, "--json"))
    assert (again["read"], again["appended"]) == (0, 0)
    copy = tmp_path / "copy.csv"
    shutil.copy(seed, copy)
    copied = json_report(run_cli(sqlite_url, copy, "--json"))
    assert (copied["read"], copied["appended"], copied["duplicates"]) == (1208, 0, 1208)
    assert len(list(opener(sqlite_url).read())) == 1208


def test_seed_csv_timezone(seed: Path, sqlite_url: str, opener: Opener) -> None:
    json_report(run_cli(sqlite_url, seed, "--timezone", "Europe/Berlin", "--json"))
    times = [e.time_us for e in opener(sqlite_url).read()]
    assert min(times) == us("2026-02-20T23:32:55+00:00")  # CET is UTC+1 in February


# -- values ----------------------------------------------------------------------------------


def test_values_are_parsed(store_url: str, tmp_path: Path, opener: Opener) -> None:
    store = opener(store_url)
    csv = write_csv(tmp_path / "smi.csv", HEADER, row(1, 0, used=1234), row(1, 1, used=96800))
    report = ingest_nvidia_smi_file(store, csv, HOST)
    assert (report.read, report.appended, report.malformed_count) == (2, 2, 0)
    events = list(store.read())
    assert [e.stream for e in events] == [f"{HOST}/gpu0", f"{HOST}/gpu1"]
    assert [e.time_us for e in events] == [us("2026-02-21T00:33:01.250+00:00")] * 2
    a, b = samples(store)
    assert a == GpuSampled(
        origin="nvidia-smi",
        host=HOST,
        index=0,
        name="NVIDIA H200",
        memory_total_bytes=97887 * MIB,
        memory_used_bytes=1234 * MIB,
        memory_free_bytes=(97887 - 1234) * MIB,
        utilization_gpu_pct=12,
        utilization_memory_pct=3,
        temperature_c=41,
        power_w=135.4,
    )
    assert (b.index, b.memory_used_bytes, b.memory_free_bytes) == (1, 96800 * MIB, 1087 * MIB)


def test_missing_values_are_none(store_url: str, tmp_path: Path, opener: Opener) -> None:
    store = opener(store_url)
    csv = write_csv(
        tmp_path / "smi.csv",
        HEADER,
        row(
            1,
            0,
            used=500,
            free="[N/A]",
            util="[Not Supported]",
            mem_util="[N/A]",
            temp="[N/A]",
            power="[Not Supported]",
        ),
        row(1, 1, used=600, power="[Unknown Error]", util="N/A"),
    )
    report = ingest_nvidia_smi_file(store, csv, HOST)
    assert (report.appended, report.malformed_count) == (2, 0)
    a, b = samples(store)
    assert (a.utilization_gpu_pct, a.utilization_memory_pct, a.temperature_c, a.power_w) == (
        None,
        None,
        None,
        None,
    )
    assert a.memory_free_bytes == (97887 - 500) * MIB  # derived from total - used
    assert (b.power_w, b.utilization_gpu_pct, b.temperature_c) == (None, None, 41)


def test_nounits_variant(store_url: str, tmp_path: Path, opener: Opener) -> None:
    store = opener(store_url)
    csv = write_csv(
        tmp_path / "nounits.csv",
        "timestamp, index, memory.total [MiB], memory.used [MiB], "
        "utilization.gpu [%], temperature.gpu, power.draw [W]",
        "2026/02/21 00:32:55.000, 0, 97887, 3, 0, 34, 85.00",
        "2026/02/21 00:32:55.000, 1, 97887, 42000, 97, 71, 599.12",
    )
    assert ingest_nvidia_smi_file(store, csv, HOST).appended == 2
    a, b = samples(store)
    assert (a.memory_total_bytes, a.memory_used_bytes, a.memory_free_bytes) == (
        97887 * MIB,
        3 * MIB,
        97884 * MIB,
    )
    assert (b.memory_used_bytes, b.utilization_gpu_pct, b.temperature_c, b.power_w) == (
        42000 * MIB,
        97,
        71,
        599.12,
    )
    assert a.name is None and a.uuid is None


def test_repeated_header_mid_file(store_url: str, tmp_path: Path, opener: Opener) -> None:
    """nvidia-smi restarted with other columns appends a new header to the same log."""
    store = opener(store_url)
    csv = write_csv(
        tmp_path / "smi.csv",
        HEADER,
        row(1, 0, used=100),
        HEADER,
        row(2, 0, used=200),
        "timestamp, index, memory.used [MiB], memory.total [MiB]",
        "2026/02/21 00:33:03.000, 0, 300 MiB, 97887 MiB",
    )
    report = ingest_nvidia_smi_file(store, csv, HOST)
    assert (report.read, report.appended, report.malformed_count) == (3, 3, 0)
    got = samples(store)
    assert [s.memory_used_bytes for s in got] == [100 * MIB, 200 * MIB, 300 * MIB]
    assert got[2].power_w is None and got[2].memory_total_bytes == 97887 * MIB


def test_appended_rows_use_the_saved_header(store_url: str, tmp_path: Path, opener: Opener) -> None:
    store = opener(store_url)
    csv = write_csv(tmp_path / "smi.csv", HEADER, row(1, 0, used=100))
    assert ingest_nvidia_smi_file(store, csv, HOST).appended == 1
    with open(csv, "a") as fh:
        fh.write(row(2, 0, used=200) + "\n" + row(2, 1, used=300) + "\n")
    report = ingest_nvidia_smi_file(store, csv, HOST)
    assert (report.read, report.appended, report.malformed_count) == (2, 2, 0)
    assert [s.memory_used_bytes for s in samples(store)] == [100 * MIB, 200 * MIB, 300 * MIB]


# -- malformed input -------------------------------------------------------------------------


BAD = [
    HEADER,  # 1
    row(1, 0, used=100),  # 2 good
    "2026/02/21 00:33:01.250, 1, NVIDIA H200, 97887 MiB",  # 3 too few columns
    row(1, 2, used=100) + ", extra",  # 4 too many columns
    row(1, 3, total="lots MiB"),  # 5 bad number
    row(1, 4, used=100).replace("2026/02/21", "2026-02-21"),  # 6 bad timestamp
    row(1, 5, used=100).replace(", 5, ", ", five, "),  # 7 bad index
    row(1, 6, total="inf MiB"),  # 8 not finite
    row(1, 7, total="1e30 MiB"),  # 9 beyond 64-bit bytes
    "",  # 10 blank: ignored
    row(2, 0, used=200),  # 11 good
]


def test_malformed_rows_are_counted_good_rows_stored(
    store_url: str, tmp_path: Path, opener: Opener
) -> None:
    store = opener(store_url)
    csv = write_csv(tmp_path / "bad.csv", *BAD)
    report = ingest_nvidia_smi_file(store, csv, HOST)
    assert (report.read, report.appended, report.malformed_count) == (9, 2, 7)
    assert [m.line_no for m in report.malformed] == [3, 4, 5, 6, 7, 8, 9]
    reasons = {m.line_no: m.reason for m in report.malformed}
    assert reasons[3] == "expected 10 columns, got 4"
    assert reasons[4] == "expected 10 columns, got 11"
    assert reasons[5].startswith("bad value")
    assert "2026-02-21" in reasons[6]
    assert [s.memory_used_bytes for s in samples(store)] == [100 * MIB, 200 * MIB]


def test_cli_reports_malformed_lines(tmp_path: Path, sqlite_url: str) -> None:
    csv = write_csv(tmp_path / "bad.csv", *BAD)
    result = run_cli(sqlite_url, csv)
    assert result.exit_code == 0, result.output
    assert "read 9, stored 2 new events, 0 already stored, 7 malformed" in result.stdout
    assert "  line 3: expected 10 columns, got 4" in result.stderr
    assert "  line 9: " in result.stderr


def test_data_before_header_is_malformed(sqlite_url: str, tmp_path: Path, opener: Opener) -> None:
    store = opener(sqlite_url)
    csv = write_csv(tmp_path / "noheader.csv", row(1, 0), HEADER, row(1, 1))
    report = ingest_nvidia_smi_file(store, csv, HOST)
    assert (report.appended, report.malformed_count) == (1, 1)
    assert report.malformed[0].line_no == 1
    assert "header" in report.malformed[0].reason


def test_cli_strict_stores_nothing(sqlite_url: str, tmp_path: Path, opener: Opener) -> None:
    csv = write_csv(tmp_path / "bad.csv", *BAD)
    result = run_cli(sqlite_url, csv, "--strict")
    assert result.exit_code == 4
    assert result.stderr.startswith("Error: ")
    assert result.stderr.count("\n") == 1
    assert "line 3" in result.stderr and "expected 10 columns" in result.stderr
    store = opener(sqlite_url)
    assert list(store.read()) == []
    assert store.checkpoint(f"nvidia-smi:{HOST}:{csv.resolve()}") is None
    # without --strict the same file goes in
    assert json_report(run_cli(sqlite_url, csv, "--json"))["appended"] == 2


@pytest.mark.parametrize("bad_line", [3, 6, 9, 11])
def test_strict_stores_nothing(
    store_url: str, tmp_path: Path, opener: Opener, bad_line: int
) -> None:
    """One bad line among good ones, early or late: nothing at all is written."""
    store = opener(store_url)
    good = [HEADER, *(row(s, i) for s in range(2) for i in range(5))]
    bad = BAD[bad_line - 1] if bad_line < 11 else row(1, 0, used=-1)  # 11: negative memory
    lines = [*good[: bad_line - 1], bad, *good[bad_line - 1 :]]
    csv = write_csv(tmp_path / "bad.csv", *lines)
    with pytest.raises(MalformedInputError, match=f"line {bad_line}:") as info:
        ingest_nvidia_smi_file(store, csv, HOST, strict=True)
    assert info.value.line_no == bad_line
    assert list(store.read()) == []
    assert ingest_nvidia_smi_file(store, csv, HOST).appended == 10


def test_strict_accepts_a_clean_file(sqlite_url: str, tmp_path: Path, opener: Opener) -> None:
    csv = write_csv(tmp_path / "good.csv", HEADER, row(1, 0), row(1, 1))
    assert json_report(run_cli(sqlite_url, csv, "--strict", "--json"))["appended"] == 2
    assert len(list(opener(sqlite_url).read())) == 2


def test_header_without_memory_used(sqlite_url: str, tmp_path: Path, opener: Opener) -> None:
    csv = write_csv(
        tmp_path / "wrong.csv",
        "timestamp, index, memory.total [MiB], power.draw [W]",
        "2026/02/21 00:32:55.000, 0, 97887 MiB, 85.00 W",
    )
    result = run_cli(sqlite_url, csv)
    assert result.exit_code == 4
    assert result.stderr.count("\n") == 1
    assert "line 1" in result.stderr
    assert "header lacks memory.used" in result.stderr
    assert list(opener(sqlite_url).read()) == []


def test_unknown_timezone(sqlite_url: str, tmp_path: Path) -> None:
    csv = write_csv(tmp_path / "smi.csv", HEADER, row(1, 0))
    result = run_cli(sqlite_url, csv, "--timezone", "Mars/Olympus_Mons")
    assert result.exit_code == 4
    assert "Mars/Olympus_Mons" in result.stderr and "time zone" in result.stderr


def test_timezone_shifts_times(store_url: str, tmp_path: Path, opener: Opener) -> None:
    store = opener(store_url)
    csv = write_csv(tmp_path / "smi.csv", HEADER, row(1, 0))
    ingest_nvidia_smi_file(store, csv, HOST, tz="America/New_York")
    (event,) = store.read()
    assert event.time_us == us("2026-02-21T05:33:01.250+00:00")


# -- idempotency -----------------------------------------------------------------------------


def test_reingest_and_copy_store_nothing_new(
    store_url: str, tmp_path: Path, opener: Opener
) -> None:
    store = opener(store_url)
    csv = write_csv(tmp_path / "smi.csv", HEADER, *(row(s, i) for s in range(3) for i in range(4)))
    first = ingest_nvidia_smi_file(store, csv, HOST)
    assert (first.read, first.appended) == (12, 12)
    again = ingest_nvidia_smi_file(store, csv, HOST)
    assert (again.read, again.appended) == (0, 0)
    copy = tmp_path / "other-name.csv"
    shutil.copy(csv, copy)
    copied: IngestReport = ingest_nvidia_smi_file(store, copy, HOST)
    assert (copied.read, copied.appended, copied.duplicates) == (12, 0, 12)
    # another host's samples at the same times are other samples
    elsewhere = ingest_nvidia_smi_file(store, copy, "other-host")
    assert elsewhere.appended == 12
    assert len(list(store.read())) == 24


def test_same_sample_twice_in_one_file(sqlite_url: str, tmp_path: Path, opener: Opener) -> None:
    store = opener(sqlite_url)
    csv = write_csv(tmp_path / "smi.csv", HEADER, row(1, 0, used=1), row(1, 0, used=2))
    report = ingest_nvidia_smi_file(store, csv, HOST)
    assert (report.appended, report.duplicates) == (1, 1)
    assert [s.memory_used_bytes for s in samples(store)] == [1 * MIB]


def test_cli_closes_its_store(pg_url: str, tmp_path: Path) -> None:
    csv = write_csv(tmp_path / "smi.csv", HEADER, row(1, 0))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run_cli(pg_url, csv)
        gc.collect()
    assert result.exit_code == 0, result.output
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []


def _journal_of(tmp_path: Path, db_url: str, host: str) -> None:
    """The store holds a journal of `host` (a post-mortem's files, ingested first)."""
    journal = tmp_path / "journal.jsonl"
    journal.write_bytes(json_line(entry(0, "INFO starting", host=host), cursor="s=c;i=0"))
    done = CliRunner().invoke(cli, ["ingest", "journal", "--file", str(journal), "--db", db_url])
    assert done.exit_code == 0, done.output


def _without_host(db_url: str, path: Path) -> Result:
    return CliRunner().invoke(
        cli,
        ["ingest", "nvidia-smi", str(path), "--db", db_url, "--no-diagnose"],
        env={"ADVISOR_HOST": "this-box"},
    )


def test_csv_of_another_hosts_journal_needs_host(
    store_url: str, tmp_path: Path, opener: Opener
) -> None:
    """A post-mortem of another host: its journal in the store, its CSV given without
    --host. Filing the samples under this host would leave its GPU chart empty: refused,
    one line naming that host and --host, exit 4, no sample stored."""
    _journal_of(tmp_path, store_url, HOST)
    csv = write_csv(tmp_path / "gpus.csv", HEADER, row(1, 0), row(1, 1))
    refused = _without_host(store_url, csv)
    assert refused.exit_code == 4, refused.output
    assert refused.stdout == ""
    (line,) = refused.stderr.splitlines()
    assert line.startswith("Error: ingest nvidia-smi: ")
    assert f"host {HOST}" in line and f"--host {HOST}" in line and "this-box" in line
    assert not [e for e in opener(store_url).read() if isinstance(e.payload, GpuSampled)]
    # with --host, the samples are that host's
    assert json_report(run_cli(store_url, csv, "--json"))["appended"] == 2
    hosts = {e.payload.host for e in opener(store_url).read() if isinstance(e.payload, GpuSampled)}
    assert hosts == {HOST}


def test_csv_without_host_is_this_hosts_when_the_journal_is(
    sqlite_url: str, tmp_path: Path, opener: Opener
) -> None:
    """No journal in the store, or this host's: the samples are this host's, as before."""
    csv = write_csv(tmp_path / "gpus.csv", HEADER, row(1, 0))
    assert _without_host(sqlite_url, csv).exit_code == 0
    _journal_of(tmp_path, sqlite_url, "this-box")
    csv2 = write_csv(tmp_path / "gpus2.csv", HEADER, row(2, 0))
    done = _without_host(sqlite_url, csv2)
    assert done.exit_code == 0, done.output
    hosts = {e.payload.host for e in opener(sqlite_url).read() if isinstance(e.payload, GpuSampled)}
    assert hosts == {"this-box"}
