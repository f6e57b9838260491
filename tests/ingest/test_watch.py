"""`advisor ingest watch`: a folder of journal JSON, text logs, nvidia-smi CSV logs and GPU
recordings, ingested as files appear, grow, rotate and are truncated."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import orjson
import pytest

from advisor.core.payloads import GpuProcess, GpuSampled, LogRecorded
from advisor.store import EventFilter, EventStore
from ingest.batches import IngestReport
from ingest.gpu_recording import recording_line
from ingest.watch import FolderWatcher, service_name, sniff
from tests.conftest import advisor_argv
from tests.waiting import wait

Opener = Callable[[str], EventStore]

HOST = "watch-host"
MIB = 1024 * 1024
TIMEOUT_S = 15.0
CSV_HEADER = b"timestamp, index, memory.total [MiB], memory.used [MiB], utilization.gpu [%]\n"


def csv_row(second: int, index: int, used: int) -> bytes:
    return b"2026/02/21 00:33:%02d.000, %d, 97887 MiB, %d MiB, 5 %%\n" % (second, index, used)


def journal_line(i: int, message: str, unit: str = "vllm.service") -> bytes:
    return (
        orjson.dumps(
            {
                "__CURSOR": f"s=0123456789abcdef;i={i:x};b=feedface;m={i:x};t={i:x};x={i:x}",
                "__REALTIME_TIMESTAMP": str(1_771_633_975_000_000 + i * 1000),
                "__MONOTONIC_TIMESTAMP": str(9_000_000_000 + i * 1000),
                "_BOOT_ID": "3f1c0a9e5b7d4c2a8e6f1b3d5a7c9e0f",
                "_HOSTNAME": "gpu-node-07",
                "PRIORITY": "6",
                "MESSAGE": message,
                "_PID": "4242",
                "_COMM": "python3",
                "SYSLOG_IDENTIFIER": "vllm",
                "_TRANSPORT": "stdout",
                "_SYSTEMD_UNIT": unit,
            }
        )
        + b"\n"
    )


def recording_tick(t: int, host: str = "rec-host") -> bytes:
    samples = [
        GpuSampled(
            origin="nvml",
            host=host,
            index=i,
            memory_total_bytes=141 * 1024**3,
            memory_used_bytes=(t + 1) * 1024**3,
            memory_free_bytes=(140 - t) * 1024**3,
            processes=(GpuProcess(pid=7, used_bytes=1024**3, unit="v.service"),),
        )
        for i in range(2)
    ]
    return recording_line(1_771_633_975_000_000 + t * 1_000_000, host, samples)


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as fh:
        fh.write(data)


wait_for = partial(wait, timeout=TIMEOUT_S, pause_s=0.02)


def count(store: EventStore, *, stream: str | None = None, type: str | None = None) -> int:
    return sum(1 for _ in store.read(EventFilter(stream=stream, type=type)))


def texts(store: EventStore, stream: str) -> list[str | None]:
    out = []
    for e in store.read(EventFilter(stream=stream)):
        assert isinstance(e.payload, LogRecorded)
        out.append(e.payload.message)
    return out


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    path = (tmp_path / "logs").resolve()
    path.mkdir()
    return path


@pytest.fixture
def store(sqlite_url: str, opener: Opener) -> EventStore:
    return opener(sqlite_url)


@contextmanager
def watching(store: EventStore, folder: Path, **kwargs: object) -> Iterator[FolderWatcher]:
    """The watcher in a thread; stopped, and checked for a crash, on the way out."""
    watcher = FolderWatcher(store, folder, host=HOST, **kwargs)  # type: ignore[arg-type]
    stop = threading.Event()
    crashed: list[BaseException] = []

    def run() -> None:
        try:
            watcher.run(stop, settle_s=0.05)
        except BaseException as e:
            crashed.append(e)

    thread = threading.Thread(target=run, name="watcher", daemon=True)
    thread.start()
    try:
        yield watcher
    finally:
        stop.set()
        thread.join(timeout=TIMEOUT_S)
    assert not thread.is_alive(), "the watcher did not stop"
    assert crashed == []


# -- sniff and service_name ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "content", "kind"),
    [
        ("j.jsonl", journal_line(1, "x"), "journal-json"),
        ("weird-name", b"\n\n" + journal_line(1, "x"), "journal-json"),
        ("cursor-only.json", b'{"__CURSOR": "s=1"}\n', "journal-json"),
        ("rec.jsonl", recording_tick(0), "gpu-recording"),
        ("smi.csv", CSV_HEADER + csv_row(1, 0, 5), "nvidia-smi"),
        ("smi.log", b"index, timestamp, memory.used [MiB], memory.total [MiB]\n", "nvidia-smi"),
        ("nounits.csv", b"timestamp, index, memory.total [MiB], memory.used [MiB]\n", "nvidia-smi"),
        ("vllm.log", b"INFO 02-21 00:32:58 [x.py:1] hello\n", "text"),
        ("other.json", b'{"level": "info", "msg": "structured but not journald"}\n', "text"),
        ("broken.json", b'{"__CURSOR": \n', "text"),
        ("list.json", b"[1, 2]\n", "text"),
        ("timestamps.txt", b"timestamp of nothing\n", "text"),
        ("empty.log", b"", None),
        ("blank.log", b"\n  \n\n", None),
        (".hidden.log", b"hello\n", None),
        ("vllm.log.1.gz", b"hello\n", None),
        ("x.swp", b"hello\n", None),
        ("events.journal", b"LPKSHHRH\x00", None),
        ("events.db", b"SQLite format 3\x00\x10\x00\x02\x02\n", None),
        ("events.db-wal", b"7\x7f\x06\x82\n", None),
        ("events.db-shm", b"\x18\xe2-\x00\n", None),
        (
            "half.jsonl",
            b'{"__REALTIME_TIMESTAMP": "1", "MESS',
            None,
        ),  # first line still being written
        ("huge.log", b"x" * (2 << 20), "text"),
    ],
)
def test_sniff(tmp_path: Path, name: str, content: bytes, kind: str | None) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    assert sniff(path) == kind


def test_sniff_missing_file(tmp_path: Path) -> None:
    assert sniff(tmp_path / "gone.log") is None


@pytest.mark.parametrize(
    ("name", "service"),
    [
        ("vllm.log", "vllm"),
        ("vllm-llama.log.1", "vllm-llama"),
        ("vllm-llama.log.2.1", "vllm-llama"),
        ("vllm-minimax-m25.service.log", "vllm-minimax-m25.service"),
        ("server.out", "server"),
        ("server.err.3", "server"),
        ("gpu.csv", "gpu"),
        ("plain", "plain"),
        ("app.conf", "app.conf"),
        (".log", ".log"),
    ],
)
def test_service_name(name: str, service: str) -> None:
    assert service_name(Path("/var/log") / name) == service


# -- the watcher -----------------------------------------------------------------------------


def test_new_files_of_each_kind_are_ingested(store: EventStore, folder: Path) -> None:
    (folder / "early.log").write_bytes(b"there before the watcher\n")
    reports: list[tuple[str, int]] = []

    def reported(path: Path, report: IngestReport) -> None:
        reports.append((path.name, report.appended))

    with watching(store, folder, on_report=reported) as watcher:
        wait_for("the file already there", lambda: count(store, stream=f"{HOST}/early") == 1)
        (folder / "journal.jsonl").write_bytes(journal_line(1, "started") + journal_line(2, "up"))
        (folder / "server.log").write_bytes(b"one\ntwo\nthree\n")
        (folder / "gpu.csv").write_bytes(CSV_HEADER + csv_row(1, 0, 100) + csv_row(1, 1, 200))
        (folder / "nvml.rec").write_bytes(recording_tick(0) + recording_tick(1))
        (folder / "notes.gz").write_bytes(b"compressed, not read\n")
        wait_for("every kind", lambda: count(store) == 1 + 2 + 3 + 2 + 4)
    assert watcher.stats.errors == []
    assert texts(store, "gpu-node-07/vllm.service") == ["started", "up"]
    assert texts(store, f"{HOST}/server") == ["one", "two", "three"]
    smi = [
        e.payload for e in store.read(EventFilter(type="gpu.sampled")) if e.stream.startswith(HOST)
    ]
    assert [p.memory_used_bytes for p in smi if isinstance(p, GpuSampled)] == [100 * MIB, 200 * MIB]
    assert all(isinstance(p, GpuSampled) and p.origin == "nvidia-smi" for p in smi)
    rec = [e for e in store.read() if e.stream.startswith("rec-host/")]
    assert [e.stream for e in rec] == ["rec-host/gpu0", "rec-host/gpu1"] * 2
    assert all(isinstance(e.payload, GpuSampled) and e.payload.processes for e in rec)
    assert ("server.log", 3) in reports and ("early.log", 1) in reports
    assert not any(name == "notes.gz" for name, _ in reports)
    assert watcher.stats.appended == 12


def test_appended_lines_are_picked_up(store: EventStore, folder: Path) -> None:
    log = folder / "vllm.log"
    csv = folder / "smi.csv"
    journal = folder / "journal.json"
    log.write_bytes(b"a\nb\n")
    csv.write_bytes(CSV_HEADER)  # nvidia-smi -l writes the header first
    journal.write_bytes(journal_line(1, "j1"))
    with watching(store, folder, service="vllm.service"):
        wait_for("first lines", lambda: count(store) == 3)
        append(log, b"c\n")
        append(csv, csv_row(1, 0, 10))
        append(journal, journal_line(2, "j2"))
        wait_for("appended lines", lambda: count(store) == 6)
        append(log, b"d\ne\n")
        append(csv, csv_row(2, 0, 20) + csv_row(2, 1, 30))
        wait_for("more appended lines", lambda: count(store) == 10)
    assert texts(store, f"{HOST}/vllm.service") == ["a", "b", "c", "d", "e"]
    assert texts(store, "gpu-node-07/vllm.service") == ["j1", "j2"]
    assert count(store, type="gpu.sampled") == 3


def test_half_written_line_waits_for_its_newline(store: EventStore, folder: Path) -> None:
    log = folder / "vllm.log"
    stream = f"{HOST}/vllm"
    with watching(store, folder):
        log.write_bytes(b"complete\nhalf-wri")
        wait_for("the complete line", lambda: count(store) == 1)
        # the pass that stored line 1 saw the half line too, and left it
        cp = store.checkpoint(f"text:vllm:{log}")
        assert cp is not None and (cp["offset"], cp["line"]) == (len(b"complete\n"), 1)
        append(log, b"tten\n")
        wait_for("the finished line", lambda: count(store) == 2)
    assert texts(store, stream) == ["complete", "half-written"]
    assert [e.payload.line_no for e in store.read()] == [1, 2]  # type: ignore[union-attr]


def test_half_written_journal_entry(store: EventStore, folder: Path) -> None:
    journal = folder / "journal.jsonl"
    line = journal_line(2, "second")
    with watching(store, folder):
        journal.write_bytes(journal_line(1, "first") + line[:40])
        wait_for("the first entry", lambda: count(store) == 1)
        append(journal, line[40:])
        wait_for("the second entry", lambda: count(store) == 2)
    assert texts(store, "gpu-node-07/vllm.service") == ["first", "second"]


def test_rotation_by_rename(store: EventStore, folder: Path) -> None:
    log = folder / "vllm.log"
    rotated = folder / "vllm.log.1"
    stream = f"{HOST}/vllm"
    log.write_bytes(b"old 1\nold 2\nold 3\n")
    with watching(store, folder) as watcher:
        wait_for("the first file", lambda: count(store) == 3)
        log.rename(rotated)
        append(rotated, b"old 4\n")  # the server still had the old file open
        log.write_bytes(b"new 1\nnew 2\n")
        wait_for("both files", lambda: count(store) == 6)
        append(log, b"new 3\n")
        wait_for("the new file growing", lambda: count(store) == 7)
    # read both files once more from wherever their checkpoints are: nothing new
    watcher.scan()
    assert sorted(m or "" for m in texts(store, stream)) == [
        "new 1",
        "new 2",
        "new 3",
        "old 1",
        "old 2",
        "old 3",
        "old 4",
    ]
    assert watcher.stats.errors == []


def test_truncation_in_place(store: EventStore, folder: Path) -> None:
    log = folder / "vllm.log"
    stream = f"{HOST}/vllm"
    log.write_bytes(b"before 1\nbefore 2\nbefore 3\n")
    with watching(store, folder):
        wait_for("the first content", lambda: count(store) == 3)
        with open(log, "wb") as fh:  # copytruncate, then the server writes on
            fh.write(b"after 1\n")
        wait_for("the rewritten content", lambda: count(store) == 4)
        append(log, b"after 2\n")
        wait_for("more after truncation", lambda: count(store) == 5)
    assert texts(store, stream) == ["before 1", "before 2", "before 3", "after 1", "after 2"]


def test_copytruncate_with_the_copy_in_the_folder(store: EventStore, folder: Path) -> None:
    """logrotate copytruncate: vllm.log copied to vllm.log.1, then truncated in place. The copy
    holds lines already stored; only what the server writes afterwards is new."""
    log = folder / "vllm.log"
    stream = f"{HOST}/vllm"
    log.write_bytes(b"old 1\nold 2\n")
    with watching(store, folder) as watcher:
        wait_for("the first content", lambda: count(store) == 2)
        (folder / "vllm.log.1").write_bytes(log.read_bytes())
        with open(log, "wb") as fh:
            fh.write(b"new 1\n")
        wait_for("the new line", lambda: count(store) == 3)
    watcher.scan()
    assert texts(store, stream) == ["old 1", "old 2", "new 1"]


def test_a_bad_file_does_not_stop_the_watcher(store: EventStore, folder: Path) -> None:
    errors: list[str] = []
    with watching(store, folder, on_error=lambda p, m: errors.append(m)) as watcher:
        (folder / "wrong.csv").write_bytes(
            b"timestamp, index, memory.total [MiB]\n2026/02/21 00:33:01.000, 0, 97887 MiB\n"
        )
        wait_for("the error", lambda: bool(errors))
        (folder / "fine.log").write_bytes(b"still watching\n")
        wait_for("the next file", lambda: count(store) == 1)
    assert "memory.used" in errors[0]
    assert any("wrong.csv" in e for e in watcher.stats.errors)
    assert texts(store, f"{HOST}/fine") == ["still watching"]


def test_a_store_in_the_watched_folder_is_not_read_as_a_log(tmp_path: Path, opener: Opener) -> None:
    """Read as text, the store's own files would grow with every batch stored from them."""
    folder = tmp_path.resolve()
    store = opener(f"sqlite:///{folder / 'events.db'}")
    (folder / "vllm.log").write_bytes(b"hello\n")
    with watching(store, folder) as watcher:
        wait_for("the log", lambda: count(store) == 1)
        append(folder / "vllm.log", b"again\n")
        wait_for("the appended line", lambda: count(store) == 2)
    assert (folder / "events.db-wal").exists()
    watcher.scan()
    assert {e.stream for e in store.read()} == {f"{HOST}/vllm"}
    assert count(store) == 2


def test_files_in_subfolders_are_ignored(store: EventStore, folder: Path) -> None:
    sub = folder / "sub"
    sub.mkdir()
    with watching(store, folder):
        (sub / "deep.log").write_bytes(b"not watched\n")
        (folder / "top.log").write_bytes(b"watched\n")
        wait_for("the top file", lambda: count(store) == 1)
    assert texts(store, f"{HOST}/top") == ["watched"]
    assert count(store) == 1


# -- the command -----------------------------------------------------------------------------


def test_cli_watch_until_sigterm(sqlite_url: str, opener: Opener, folder: Path) -> None:
    store = opener(sqlite_url)  # created (migrated) before the watcher opens it
    (folder / "vllm.log").write_bytes(b"one\ntwo\n")
    proc = subprocess.Popen(
        advisor_argv("ingest", "watch", str(folder), "--db", sqlite_url, "--host", HOST),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for("the file there at start", lambda: count(store) == 2)
        append(folder / "vllm.log", b"three\n")
        (folder / "gpu.csv").write_bytes(CSV_HEADER + csv_row(1, 0, 100))
        wait_for("what was written later", lambda: count(store) == 4)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err.decode()
    assert err == b""
    text = out.decode()
    assert text.rstrip("\n").endswith("stopped: 4 events stored")
    assert f"{folder / 'vllm.log'}: stored 2 new events, 0 malformed" in text
    assert texts(store, f"{HOST}/vllm") == ["one", "two", "three"]
    assert count(store, stream=f"{HOST}/gpu0") == 1


def test_cli_watch_needs_a_folder(tmp_path: Path, sqlite_url: str) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(b"x\n")
    for target in (tmp_path / "missing", log):
        proc = subprocess.run(
            advisor_argv("ingest", "watch", str(target), "--db", sqlite_url),
            capture_output=True,
            timeout=60,
            check=False,
            env={**os.environ},
        )
        assert proc.returncode == 2
        assert b"FOLDER" in proc.stderr
