"""`advisor ingest text`: plain text logs, keyed by their content chain, across appends, rotation
and truncation; event times from the timestamp formats servers and tools write."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from advisor.cli.main import cli
from advisor.core.payloads import LogRecorded
from advisor.store import EventStore
from ingest.text import ingest_text_file, line_time_us

Opener = Callable[[str], EventStore]

HOST = "node1"
SERVICE = "vllm.service"
STREAM = f"{HOST}/{SERVICE}"
# A file time in 2026, for the formats that carry no year (journalctl short, vLLM).
MTIME = datetime(2026, 6, 1, 12, 0, 0, tzinfo=UTC).timestamp()


def us(iso: str) -> int:
    dt = datetime.fromisoformat(iso)
    return int(dt.timestamp()) * 1_000_000 + dt.microsecond


def write(path: Path, data: bytes, *, mode: str = "wb") -> Path:
    with open(path, mode) as fh:
        fh.write(data)
    os.utime(path, (MTIME, MTIME))
    return path


def lines(store: EventStore) -> list[LogRecorded]:
    out = []
    for e in store.read():
        assert isinstance(e.payload, LogRecorded)
        out.append(e.payload)
    return out


def messages(store: EventStore) -> list[str | None]:
    return [p.message for p in lines(store)]


def ingest_cli(db_url: str, path: Path, *extra: str) -> Result:
    return CliRunner().invoke(
        cli,
        ["ingest", "text", str(path), "--service", SERVICE, "--host", HOST, "--db", db_url, *extra],
    )


def cli_report(result: Result) -> dict[str, int]:
    assert result.exit_code == 0, result.output
    report: dict[str, int] = json.loads(result.stdout)
    return report


# -- content-chained keys ------------------------------------------------------------------


def test_cli_stores_each_line_once_and_appends_only_new_lines(
    sqlite_url: str, tmp_path: Path, opener: Opener
) -> None:
    log = write(tmp_path / "vllm.log", b"first\nsecond\n\nthird\n")
    first = cli_report(ingest_cli(sqlite_url, log, "--json"))
    assert (first["read"], first["appended"], first["duplicates"], first["malformed"]) == (
        3,
        3,
        0,
        0,
    )

    again = cli_report(ingest_cli(sqlite_url, log, "--json"))
    assert (again["read"], again["appended"]) == (0, 0)

    write(log, b"fourth\nfifth\n", mode="ab")
    plain = ingest_cli(sqlite_url, log)
    assert plain.exit_code == 0, plain.output
    assert "read 2, stored 2 new events, 0 already stored, 0 malformed" in plain.stdout

    store = opener(sqlite_url)
    events = list(store.read())
    assert [p.line_no for p in (e.payload for e in events)] == [1, 2, 4, 5, 6]  # type: ignore[union-attr]
    # keys chain the content: line n's key covers lines 1..n (the blank line 3 included)
    chain, keys = bytes(8), []
    for raw in (b"first", b"second", b"", b"third", b"fourth", b"fifth"):
        chain = hashlib.blake2b(chain + raw + b"\n", digest_size=8).digest()
        if raw:
            keys.append(int.from_bytes(chain, "big") >> 1)
    assert [e.key for e in events] == keys
    assert {e.stream for e in events} == {STREAM}
    assert len({e.source for e in events}) == 1
    got = [e.payload for e in events]
    assert [p.message for p in got] == ["first", "second", "third", "fourth", "fifth"]  # type: ignore[union-attr]
    p = got[0]
    assert isinstance(p, LogRecorded)
    assert (p.origin, p.unit, p.host, p.path, p.line_no) == (
        "text",
        SERVICE,
        HOST,
        str(log.resolve()),
        1,
    )


def test_library_reingest_and_append(store_url: str, tmp_path: Path, opener: Opener) -> None:
    store = opener(store_url)
    log = write(tmp_path / "server.log", b"".join(b"line %d\n" % i for i in range(1, 11)))
    r1 = ingest_text_file(store, log, SERVICE, HOST)
    assert (r1.read, r1.appended, r1.duplicates) == (10, 10, 0)
    r2 = ingest_text_file(store, log, SERVICE, HOST)
    assert (r2.read, r2.appended) == (0, 0)
    write(log, b"line 11\nline 12\n", mode="ab")
    r3 = ingest_text_file(store, log, SERVICE, HOST)
    assert (r3.read, r3.appended, r3.duplicates) == (2, 2, 0)
    assert messages(store) == [f"line {i}" for i in range(1, 13)]
    assert [p.line_no for p in lines(store)] == list(range(1, 13))


def test_same_file_under_another_name_is_recognised_by_line_number(
    store_url: str, tmp_path: Path, opener: Opener
) -> None:
    """Another name for the same file has no checkpoint of its own: everything is read again,
    and every line is found already stored."""
    store = opener(store_url)
    log = write(tmp_path / "a.log", b"one\ntwo\nthree\n")
    assert ingest_text_file(store, log, SERVICE, HOST).appended == 3
    alias = tmp_path / "b.log"
    os.link(log, alias)
    again = ingest_text_file(store, alias, SERVICE, HOST)
    assert (again.read, again.appended, again.duplicates) == (3, 0, 3)
    assert messages(store) == ["one", "two", "three"]


def test_a_service_is_a_stream_of_its_own(sqlite_url: str, tmp_path: Path, opener: Opener) -> None:
    store = opener(sqlite_url)
    log = write(tmp_path / "x.log", b"hello\n")
    ingest_text_file(store, log, "a.service", HOST)
    ingest_text_file(store, log, "b.service", HOST)
    assert sorted(e.stream for e in store.read()) == [f"{HOST}/a.service", f"{HOST}/b.service"]


# -- event times -----------------------------------------------------------------------------


TIMED = [
    # (line, expected time as ISO, or None for "the line before's")
    (b"no timestamp before any other line", None),
    (
        b"2026-02-21T00:32:58.123456789Z docker logs --timestamps",
        "2026-02-21T00:32:58.123456+00:00",
    ),
    (b"Traceback (most recent call last):", "2026-02-21T00:32:58.123456+00:00"),
    (b'  File "x.py", line 1, in <module>', "2026-02-21T00:32:58.123456+00:00"),
    (b"2026-02-21T02:33:00.5+02:00 iso with offset", "2026-02-21T00:33:00.500000+00:00"),
    (b"2026-02-20T19:33:01-0500 iso, offset without colon", "2026-02-21T00:33:01+00:00"),
    (b"2026-02-21 00:33:02,250 python logging", "2026-02-21T00:33:02.250000+00:00"),
    (b"Feb 21 00:33:03 node1 vllm[123]: journalctl short", "2026-02-21T00:33:03+00:00"),
    (
        b"1771634004.654321 node1 vllm[123]: journalctl short-unix",
        "2026-02-21T00:33:24.654321+00:00",
    ),
    (b"INFO 02-21 00:33:05 [api_server.py:1] vLLM", "2026-02-21T00:33:05+00:00"),
    (
        b"(EngineCore_DP0 pid=227700) ERROR 02-21 00:33:06 [core.py:1] worker prefix",
        "2026-02-21T00:33:06+00:00",
    ),
    (
        b"\x1b[0;36m(APIServer pid=227612)\x1b[0;0m INFO 02-21 00:33:07 [api_server.py:1885] "
        b"colour",
        "2026-02-21T00:33:07+00:00",
    ),
    (
        b"(VllmWorker rank=0 pid=123) WARNING 02-21 00:33:08 [w.py:1] rank and pid",
        "2026-02-21T00:33:08+00:00",
    ),
    (b"INFO 02-30 00:33:09 [x.py:1] no such day", "2026-02-21T00:33:08+00:00"),
    (b"    at the end, untimed", "2026-02-21T00:33:08+00:00"),
]


def test_event_times_from_line_prefixes(store_url: str, tmp_path: Path, opener: Opener) -> None:
    store = opener(store_url)
    log = write(tmp_path / "mixed.log", b"".join(line + b"\n" for line, _ in TIMED))
    assert ingest_text_file(store, log, SERVICE, HOST).appended == len(TIMED)
    events = list(store.read())
    expected = [int(MTIME * 1_000_000) if iso is None else us(iso) for _, iso in TIMED]
    assert [e.time_us for e in events] == expected


@pytest.mark.parametrize(
    ("line", "iso"),
    [
        (b"2026-02-21T00:32:58Z x", "2026-02-21T00:32:58+00:00"),
        (b"2026-02-21T00:32:58.1Z x", "2026-02-21T00:32:58.100000+00:00"),
        (b"2026-02-21T05:32:58+05:00 x", "2026-02-21T00:32:58+00:00"),
        (b"2026-02-21T00:32:58 x", "2026-02-21T00:32:58+00:00"),
        (b"Dec  1 23:59:59 h u: x", "2026-12-01T23:59:59+00:00"),
        (b"Feb 21 00:32:58.250 h u: x", "2026-02-21T00:32:58.250000+00:00"),
        (b"CRITICAL 12-31 23:59:59 [x.py:9] x", "2026-12-31T23:59:59+00:00"),
    ],
)
def test_line_time_us(line: bytes, iso: str) -> None:
    assert line_time_us(line, 2026) == us(iso)


@pytest.mark.parametrize(
    "line",
    [
        b"no time here",
        b"2026-13-01T00:00:00Z month 13",
        b"Feb 30 00:00:00 h u: x",
        b"INFO: 127.0.0.1:5000 - GET /health",
        b"177163397.123456 nine digits",
    ],
)
def test_line_time_us_none(line: bytes) -> None:
    assert line_time_us(line, 2026) is None


def test_untimed_line_after_resume_takes_the_last_stored_lines_time(
    store_url: str, tmp_path: Path, opener: Opener
) -> None:
    """The time a traceback line inherits survives a restart of the reader."""
    store = opener(store_url)
    log = write(tmp_path / "vllm.log", b"2026-02-21T00:00:01Z a\n2026-02-21T00:00:02Z b\n")
    ingest_text_file(store, log, SERVICE, HOST)
    write(log, b"  traceback line\n", mode="ab")
    ingest_text_file(store, log, SERVICE, HOST)
    assert [e.time_us for e in store.read()] == [
        us("2026-02-21T00:00:01+00:00"),
        us("2026-02-21T00:00:02+00:00"),
        us("2026-02-21T00:00:02+00:00"),
    ]


# -- bytes that are not text -----------------------------------------------------------------


def test_invalid_utf8_is_stored_with_the_raw_bytes(
    store_url: str, tmp_path: Path, opener: Opener
) -> None:
    store = opener(store_url)
    raw_bad = b"bad \xff\xfe bytes \xc3("
    raw_nul = b"nul\x00inside"
    log = write(tmp_path / "bin.log", b"fine\n" + raw_bad + b"\n" + raw_nul + b"\n")
    report = ingest_text_file(store, log, SERVICE, HOST)
    assert (report.appended, report.malformed_count) == (3, 0)
    fine, bad, nul = lines(store)
    assert (fine.message, fine.message_b64) == ("fine", None)
    assert bad.message == "bad \ufffd\ufffd bytes \ufffd("
    assert bad.message_b64 is not None and base64.b64decode(bad.message_b64) == raw_bad
    # the NUL line is stored, and its bytes can be recovered
    stored = base64.b64decode(nul.message_b64) if nul.message_b64 else (nul.message or "").encode()
    assert stored == raw_nul


def test_nul_bytes_stay_in_the_message(sqlite_url: str, tmp_path: Path, opener: Opener) -> None:
    """NUL is valid UTF-8: kept in the message (escaped in the stored JSON), no base64 copy."""
    store = opener(sqlite_url)
    log = write(tmp_path / "nul.log", b"nul\x00inside\n")
    ingest_text_file(store, log, SERVICE, HOST)
    (p,) = lines(store)
    assert p.message == "nul\x00inside" and p.message_b64 is None


# -- truncation and rotation -----------------------------------------------------------------


def test_copytruncate_rewrite_is_stored_not_skipped(
    store_url: str, tmp_path: Path, opener: Opener
) -> None:
    store = opener(store_url)
    log = write(tmp_path / "vllm.log", b"old 1\nold 2\nold 3\nold 4\n")
    assert ingest_text_file(store, log, SERVICE, HOST).appended == 4
    write(log, b"new 1\nnew 2\n")  # truncated in place and rewritten, shorter
    r = ingest_text_file(store, log, SERVICE, HOST)
    assert (r.read, r.appended, r.duplicates) == (2, 2, 0)
    write(log, b"new 3\n", mode="ab")
    assert ingest_text_file(store, log, SERVICE, HOST).appended == 1
    assert ingest_text_file(store, log, SERVICE, HOST).read == 0
    assert messages(store) == ["old 1", "old 2", "old 3", "old 4", "new 1", "new 2", "new 3"]


def test_truncated_to_empty_then_written(store_url: str, tmp_path: Path, opener: Opener) -> None:
    store = opener(store_url)
    log = write(tmp_path / "vllm.log", b"a\nb\n")
    ingest_text_file(store, log, SERVICE, HOST)
    write(log, b"")
    assert ingest_text_file(store, log, SERVICE, HOST).read == 0
    write(log, b"c\n", mode="ab")
    assert ingest_text_file(store, log, SERVICE, HOST).appended == 1
    assert messages(store) == ["a", "b", "c"]


def test_rotation_by_rename_duplicates_nothing(
    store_url: str, tmp_path: Path, opener: Opener
) -> None:
    store = opener(store_url)
    log = tmp_path / "vllm.log"
    write(log, b"old 1\nold 2\nold 3\n")
    assert ingest_text_file(store, log, SERVICE, HOST).appended == 3
    # the writer appends once more, then logrotate renames and the server reopens
    write(log, b"old 4\n", mode="ab")
    rotated = tmp_path / "vllm.log.1"
    log.rename(rotated)
    write(log, b"new 1\nnew 2\n")
    r_new = ingest_text_file(store, log, SERVICE, HOST)
    assert (r_new.read, r_new.appended, r_new.duplicates) == (2, 2, 0)
    r_old = ingest_text_file(store, rotated, SERVICE, HOST)
    assert (r_old.read, r_old.appended, r_old.duplicates) == (4, 1, 3)
    assert ingest_text_file(store, log, SERVICE, HOST).read == 0
    assert sorted(m or "" for m in messages(store)) == [
        "new 1",
        "new 2",
        "old 1",
        "old 2",
        "old 3",
        "old 4",
    ]


def test_cli_rotation(sqlite_url: str, tmp_path: Path, opener: Opener) -> None:
    log = write(tmp_path / "vllm.log", b"a\nb\n")
    assert cli_report(ingest_cli(sqlite_url, log, "--json"))["appended"] == 2
    log.rename(tmp_path / "vllm.log.1")
    write(log, b"c\n")
    assert cli_report(ingest_cli(sqlite_url, log, "--json"))["appended"] == 1
    rotated = cli_report(ingest_cli(sqlite_url, tmp_path / "vllm.log.1", "--json"))
    assert (rotated["appended"], rotated["duplicates"]) == (0, 2)
    assert messages(opener(sqlite_url)) == ["a", "b", "c"]


def test_new_file_on_a_reused_inode_is_not_taken_for_the_old_one(
    sqlite_url: str, tmp_path: Path, opener: Opener
) -> None:
    store = opener(sqlite_url)
    old = write(tmp_path / "vllm.log.1", b"old 1\nold 2\n")
    ingest_text_file(store, old, SERVICE, HOST)
    inode = old.stat().st_ino
    old.unlink()  # logrotate drops the oldest file ...
    new = write(tmp_path / "vllm.log", b"new 1\nnew 2\nnew 3\n")  # ... and a new one appears
    if new.stat().st_ino != inode:
        pytest.skip("this file system did not reuse the inode")
    report = ingest_text_file(store, new, SERVICE, HOST)
    assert report.appended == 3
    assert messages(store) == ["old 1", "old 2", "new 1", "new 2", "new 3"]


def test_copytruncate_copy_is_not_stored_twice(
    sqlite_url: str, tmp_path: Path, opener: Opener
) -> None:
    store = opener(sqlite_url)
    log = write(tmp_path / "vllm.log", b"a\nb\n")
    ingest_text_file(store, log, SERVICE, HOST)
    shutil.copy(log, tmp_path / "vllm.log.1")
    write(log, b"")
    ingest_text_file(store, tmp_path / "vllm.log.1", SERVICE, HOST)
    assert messages(store) == ["a", "b"]


# -- errors ----------------------------------------------------------------------------------


def test_missing_file_exit_4(sqlite_url: str, tmp_path: Path) -> None:
    result = ingest_cli(sqlite_url, tmp_path / "nope.log")
    assert result.exit_code == 4
    assert result.stderr.startswith("Error: ")
    assert "nope.log: no such file" in result.stderr
    assert result.stderr.count("\n") == 1


def test_directory_is_not_a_file(sqlite_url: str, tmp_path: Path) -> None:
    result = ingest_cli(sqlite_url, tmp_path)
    assert result.exit_code == 4
    assert "not a regular file" in result.stderr


def test_service_is_required(sqlite_url: str, tmp_path: Path) -> None:
    log = write(tmp_path / "x.log", b"x\n")
    result = CliRunner().invoke(cli, ["ingest", "text", str(log), "--db", sqlite_url])
    assert result.exit_code == 2
    assert "--service" in result.stderr


def test_unfinished_last_line(store_url: str, tmp_path: Path, opener: Opener) -> None:
    """A last line without its newline is stored, and read again once it is finished."""
    store = opener(store_url)
    log = write(tmp_path / "vllm.log", b"one\ntw")
    assert ingest_text_file(store, log, SERVICE, HOST).appended == 2
    assert ingest_text_file(store, log, SERVICE, HOST).appended == 0  # as pasted: no repeats
    write(log, b"o\nthree\n", mode="ab")
    r = ingest_text_file(store, log, SERVICE, HOST)
    assert (r.read, r.appended) == (2, 2)
    assert messages(store) == ["one", "tw", "two", "three"]
    rotated = tmp_path / "vllm.log.1"
    log.rename(rotated)  # the finished file read again under its new name: nothing new
    again = ingest_text_file(store, rotated, SERVICE, HOST)
    assert (again.read, again.appended) == (3, 0)


@pytest.mark.parametrize(
    "command",
    [["text", "--service", "x"], ["nvidia-smi"], ["gpu", "--replay"], ["journal", "--file"]],
)
def test_a_missing_file_creates_no_store(tmp_path: Path, command: list[str]) -> None:
    db = tmp_path / "never.db"
    args = ["ingest", *command, str(tmp_path / "missing.log"), "--db", f"sqlite:///{db}"]
    if command[0] == "text":
        args = [
            "ingest",
            "text",
            str(tmp_path / "missing.log"),
            "--service",
            "x",
            "--db",
            f"sqlite:///{db}",
        ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 4, result.output
    assert result.output == f"Error: {tmp_path / 'missing.log'}: no such file\n"
    assert not db.exists()
