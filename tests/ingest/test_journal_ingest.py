"""Journal ingestion end to end: real .journal files through journalctl, live follow,
hostile input, --strict, and the CLI as a process."""

from __future__ import annotations

import base64
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import psutil
import pytest
from sqlalchemy import text

from advisor.store import EventStore
from advisor.store.integrity.audit import verify
from tests.conftest import advisor_argv, run_advisor
from tests.journal_fixtures import entry, have_journal_tools, json_line, make_journal

Opener = Callable[[str], EventStore]
needs_journal = pytest.mark.skipif(
    not have_journal_tools(),
    reason="journalctl and systemd-journal-remote are needed "
    "(Debian package systemd-journal-remote)",
)

ANSI = b"\x1b[1;36m(EngineCore_DP0 pid=441)\x1b[0;0m INFO 11-24 11:43:54 [gpu_model_runner.py:2653]"


def fixture_entries() -> list[list[tuple[str, bytes | str]]]:
    return [
        entry(0, "INFO 03-16 06:12:38 [api_server.py:1090] vLLM API server version 0.8.1"),
        entry(1, ANSI + b" Model loading took 2.0513 GiB and 27.200487 seconds"),
        entry(2, b"\rLoading safetensors checkpoint shards:  56% Completed | 5/9"),
        entry(3, "x" * 5000),
        entry(4, "tagged", extra=[("TAG", "a"), ("TAG", "b")]),
        [
            ("__REALTIME_TIMESTAMP", "1742105558005000"),
            ("__MONOTONIC_TIMESTAMP", "1005000"),
            ("_BOOT_ID", "0123456789abcdef0123456789abcdef"),
            ("_HOSTNAME", "gpu01"),
            ("_TRANSPORT", "journal"),
            ("_PID", "1"),
            ("_SYSTEMD_UNIT", "init.scope"),
            ("UNIT", "vllm.service"),
            ("PRIORITY", "4"),
            ("INVOCATION_ID", "f" * 32),
            ("MESSAGE", "vllm.service: Failed with result 'exit-code'."),
            ("MESSAGE_ID", "d9b373ed55a64feb8242e02dbe79a49c"),
            ("UNIT_RESULT", "exit-code"),
        ],
    ]


def messages(store: EventStore) -> list[str | None]:
    return [e.payload.message for e in store.read()]  # type: ignore[union-attr]


@needs_journal
def test_binary_journal_file_read_through_journalctl(
    tmp_path: Path, store_url: str, opener: Opener
) -> None:
    journal = make_journal(tmp_path / "fixture.journal", fixture_entries())
    done = run_advisor(
        "ingest", "journal", "--journal-file", str(journal), "--db", store_url, "--json"
    )
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout)["appended"] == 6
    store = opener(store_url)
    got = list(store.read())
    assert [e.stream for e in got] == ["gpu01/vllm.service"] * 6
    assert (
        got[1].payload.message
        == (
            ANSI + b" Model loading took 2.0513 GiB and "  # type: ignore[union-attr]
            b"27.200487 seconds"
        ).decode()
    )
    assert got[2].payload.message.startswith("\rLoading")  # type: ignore[union-attr]
    assert got[3].payload.message == "x" * 5000  # export has no 4 KiB cut-off  # type: ignore[union-attr]
    assert got[5].payload.fields == {
        "UNIT_RESULT": "exit-code",  # type: ignore[union-attr]
        "_SYSTEMD_UNIT": "init.scope",
    }
    assert got[5].payload.invocation_id == "f" * 32  # type: ignore[union-attr]
    # The same entries printed by `journalctl -o json` are recognised by their cursors.
    json_out = subprocess.run(
        ["journalctl", f"--file={journal}", "-o", "json"], capture_output=True, check=True
    ).stdout
    assert b'"MESSAGE":null' in json_out  # the 5000-byte message, as -o json prints it
    again = run_advisor(
        "ingest", "journal", "--file", "-", "--db", store_url, "--json", input=json_out
    )
    assert orjson.loads(again.stdout)["duplicates"] == 6
    assert verify(store).ok


@needs_journal
def test_follow_resumes_at_the_saved_cursor(tmp_path: Path, store_url: str, opener: Opener) -> None:
    journal = make_journal(tmp_path / "live.journal", [entry(i, f"line {i}") for i in range(5)])
    argv = advisor_argv(
        "ingest", "journal", "--journal-file", str(journal), "--follow", "--db", store_url
    )
    store = opener(store_url)

    def follow_until(count: int) -> None:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 30
            while len(list(store.read())) < count:
                assert proc.poll() is None, proc.stderr.read()  # type: ignore[union-attr]
                assert time.monotonic() < deadline, "follow did not store the entries"
                time.sleep(0.1)
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err

    follow_until(5)
    make_journal(journal, [entry(i, f"line {i}") for i in range(5, 9)])
    follow_until(9)
    assert messages(store) == [f"line {i}" for i in range(9)]
    cp = next(v for k, v in store_status_checkpoints(store).items() if k.startswith("journalctl:"))
    assert cp["cursor"].startswith("s=")


def store_status_checkpoints(store: EventStore) -> dict[str, dict[str, object]]:
    from advisor.store.integrity.audit import status

    return status(store).checkpoints


HOSTILE = [
    b"{not json at all",
    b"[1, 2, 3]",
    b"42",
    b'{"__REALTIME_TIMESTAMP": "1", "MESSAGE": {"nested": true}}',
    b'{"__REALTIME_TIMESTAMP": "1", "MESSAGE": [256, 1]}',
    b'{"__REALTIME_TIMESTAMP": "1", "_PID": 4242}',
    b'{"MESSAGE": "no timestamp"}',
    b"\x00\x00\x00\xff\xfe binary",
    b'{"__REALTIME_TIMESTAMP": "1", "MESSAGE": "\\ud800 lone surrogate"}',
    b"[" * 5000 + b"]" * 5000,
]


def good_lines(n: int, offset: int = 0) -> list[bytes]:
    return [
        json_line(entry(i, f"good {i}"), cursor=f"s=h;i={i:x}") for i in range(offset, offset + n)
    ]


def test_hostile_lines_are_counted_and_the_rest_goes_in(
    tmp_path: Path, store_url: str, opener: Opener
) -> None:
    huge = json_line(entry(900, "M" * 1_000_000), cursor="s=h;i=900")
    nul = json_line(entry(901, "before\x00after"), cursor="s=h;i=901")
    binary = json_line(entry(902, b"\x00\x01\xff raw"), cursor="s=h;i=902")
    lines = good_lines(3) + HOSTILE + [huge, nul, binary] + good_lines(2, offset=3)
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(b"".join(line if line.endswith(b"\n") else line + b"\n" for line in lines))
    done = run_advisor("ingest", "journal", "--file", str(path), "--db", store_url, "--json")
    assert done.returncode == 0, done.stderr
    report = orjson.loads(done.stdout)
    assert report["malformed"] == len(HOSTILE) - 1 or report["malformed"] == len(HOSTILE)
    assert report["appended"] == 8 + (len(HOSTILE) - report["malformed"])
    bad_lines = {m["line"] for m in report["malformed_lines"]}
    assert {4, 5, 6, 7, 8, 9, 10, 11} <= bad_lines
    store = opener(store_url)
    got = {e.payload.message: e.payload for e in store.read()}  # type: ignore[union-attr]
    assert "M" * 1_000_000 in got
    assert "before\x00after" in got
    raw = [p for p in got.values() if p.message_b64]  # type: ignore[union-attr]
    assert base64.b64decode(raw[0].message_b64) == b"\x00\x01\xff raw"  # type: ignore[union-attr]
    assert verify(store).ok


def test_strict_refuses_the_whole_input(tmp_path: Path, store_url: str, opener: Opener) -> None:
    path = tmp_path / "one-bad.jsonl"
    path.write_bytes(b"".join([*good_lines(20), b"{broken\n", *good_lines(5, offset=20)]))
    done = run_advisor("ingest", "journal", "--file", str(path), "--db", store_url, "--strict")
    assert done.returncode == 4
    error_lines = done.stderr.decode().strip().splitlines()
    assert len(error_lines) == 1
    assert error_lines[0].startswith(f"Error: {path}: line 21: invalid JSON: unexpected character")
    assert list(opener(store_url).read()) == []
    stdin = run_advisor(
        "ingest", "journal", "--file", "-", "--db", store_url, "--strict", input=path.read_bytes()
    )
    assert stdin.returncode == 4 and b"line 21" in stdin.stderr
    assert list(opener(store_url).read()) == []


def _write_big_journal(path: Path, lines: int) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    try:
        from journal_gen import write_journal  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    write_journal(path, lines, seed=11)


@pytest.mark.slow
def test_sigkill_at_random_points_then_restart(
    tmp_path: Path, store_url: str, opener: Opener
) -> None:
    """Kill the ingester at ten points; after restarts every line is stored exactly once."""
    path = tmp_path / "big.jsonl"
    lines = 60_000
    _write_big_journal(path, lines)
    argv = advisor_argv("ingest", "journal", "--file", str(path), "--db", store_url)
    rng = random.Random(1234)
    store = opener(store_url)
    for _ in range(10):
        # Each run gets a little further than the last (up to two 2,500-line batches), so ten
        # kills land well before the end of the file, each inside a batch in flight.
        target = _stored(store) + rng.randint(1, 2500)
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while _stored(store) < target:
            assert proc.poll() is None, "the ingester finished before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(rng.uniform(0, 0.05))  # land anywhere inside the next batch
        parsers = psutil.Process(proc.pid).children(recursive=True)
        assert parsers, "a large file is parsed in a second process"
        proc.kill()
        assert proc.wait(timeout=60) == -signal.SIGKILL
        # the orphaned parser notices and exits, releasing anything it held
        _, alive = psutil.wait_procs(parsers, timeout=30)
        assert alive == []
    final = subprocess.run(argv, capture_output=True, timeout=300, check=False)
    assert final.returncode == 0, final.stderr
    stored = list(store.read())
    events = [e for e in stored if e.type == "log.recorded"]
    assert len(events) == lines
    # Beside the lines, one `gpu.fault` per kernel Xid line (ingest.gpu_faults), once each too.
    faults = [e for e in stored if e.type == "gpu.fault"]
    xids = path.read_bytes().count(b"NVRM: Xid (")
    assert len(stored) == lines + xids and len({e.key for e in faults}) == len(faults) == xids
    cursors = [e.payload.cursor for e in events]  # type: ignore[union-attr]
    assert len(set(cursors)) == lines
    source_cursors = [orjson.loads(line)["__CURSOR"] for line in path.read_bytes().splitlines()]
    assert sorted(cursors) == sorted(source_cursors)  # type: ignore[type-var]
    assert verify(store).ok


def _stored(store: EventStore) -> int:
    with store.connect() as conn:
        return int(conn.execute(text("SELECT COALESCE(MAX(seq), 0) FROM events")).scalar_one())


def test_two_ingesters_on_one_store(tmp_path: Path, store_url: str, opener: Opener) -> None:
    """Two processes append at once: no "database is locked", one linear chain."""
    files = []
    for n in range(2):
        path = tmp_path / f"part{n}.jsonl"
        path.write_bytes(
            b"".join(
                json_line(entry(i, f"p{n} {i}", unit=f"u{n}.service"), cursor=f"s={n};i={i:x}")
                for i in range(15_000)
            )
        )
        files.append(path)
    procs = [
        subprocess.Popen(
            advisor_argv("ingest", "journal", "--file", str(f), "--db", store_url),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for f in files
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert b"locked" not in err and b"stored 15000 new events" in out
    store = opener(store_url)
    assert len(list(store.read())) == 30_000
    assert verify(store).ok


# The real CLI, except that once its first batch of events is committed it waits for SIGINT.
# SIGINT is blocked from the start (in every thread, which inherit the mask), so a SIGINT sent
# at any moment stays pending until `sigwait` takes it: no race, no polling. It then ends the
# run as Python's own SIGINT handler would, with a KeyboardInterrupt.
PAUSE_AFTER_FIRST_BATCH = """
import signal
import sys

from advisor.cli.main import main
from advisor.store.store import EventStore

_append = EventStore.append_prepared


def _append_then_wait(self, *args, **kwargs):
    result = _append(self, *args, **kwargs)
    if result.appended:
        EventStore.append_prepared = _append
        signal.sigwait({signal.SIGINT})
        raise KeyboardInterrupt
    return result


signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
EventStore.append_prepared = _append_then_wait
sys.argv[0] = "advisor"
main()
"""


def test_interrupted_ingest_says_so_and_resumes(
    tmp_path: Path, sqlite_url: str, opener: Opener
) -> None:
    """SIGINT in the middle of a file: the CLI says so (exit 130), what was committed stays,
    and the next run goes on from the checkpoint. The ingester waits after its first batch
    (`PAUSE_AFTER_FIRST_BATCH`) for the signal, so the signal always lands in the middle,
    however fast either process runs."""
    path = tmp_path / "big.jsonl"
    _write_big_journal(path, 30_000)
    paused = tmp_path / "paused_advisor.py"
    paused.write_text(PAUSE_AFTER_FIRST_BATCH)
    argv = [sys.executable, str(paused), "ingest", "journal", "--file", str(path)]
    store = opener(sqlite_url)
    proc = subprocess.Popen(
        [*argv, "--db", sqlite_url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # Ctrl-C as a terminal delivers it: a process that inherits SIGINT ignored (as from a
        # test runner that some earlier test left ignoring it) would never see the signal
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 60
    while _stored(store) == 0:  # the first batch is committed: the ingester is waiting
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == (130, b"Interrupted.\n")
    stored = _stored(store)
    assert 0 < stored < 30_000
    rest = run_advisor("ingest", "journal", "--file", str(path), "--db", sqlite_url, "--json")
    assert orjson.loads(rest.stdout)["appended"] == 30_000 - stored
    assert verify(store).ok
