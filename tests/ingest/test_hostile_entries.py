"""Journal entries whose fields are anything at all: each one is stored or counted as malformed
on its own, and the good entries around it all land — for `journalctl -o json` lines, for the
`-o export` stream, and for `advisor classify`."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import orjson
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.cli.main import cli
from advisor.core.journal_export import iter_export, write_export_entry
from advisor.pipeline.inputs import open_log
from advisor.store import EventStore, open_store
from ingest.batches import Ingester
from ingest.journal_sources import export_records, ingest_json_stream

# What a good entry looks like: PID 1's message about a unit, with the fields that make the
# decoder look further (UNIT= from _PID=1, a coredump's unit from _UID=0).
BASE: dict[str, str] = {
    "__REALTIME_TIMESTAMP": "1771633975000000",
    "__MONOTONIC_TIMESTAMP": "5000000",
    "_HOSTNAME": "gpu01",
    "_PID": "1",
    "_UID": "0",
    "_TRANSPORT": "journal",
    "_SYSTEMD_UNIT": "init.scope",
    "_BOOT_ID": "b" * 32,
    "UNIT": "vllm.service",
    "INVOCATION_ID": "abc1",
    "MESSAGE": "vllm.service: Main process exited, code=exited, status=1/FAILURE",
    "PRIORITY": "5",
    "SYSLOG_IDENTIFIER": "systemd",
    "EXIT_CODE": "exited",
    "EXIT_STATUS": "1",
}
NAMES = [
    *BASE,
    "__CURSOR",
    "_COMM",
    "MESSAGE_ID",
    "COREDUMP_UNIT",
    "OBJECT_SYSTEMD_UNIT",
    "OBJECT_SYSTEMD_INVOCATION_ID",
    "USER_UNIT",
    "N_RESTARTS",
    "_SYSTEMD_INVOCATION_ID",
    "SOMETHING_ELSE",
]
# Timestamps no decoder should take.
BAD_TIMES = ["", "abc", "-5", "1e15", " ", "9" * 19, "0x10", "+"]
# Timestamps the decoder takes and later stages must cope with (past the year 9999: the fold
# skips such an entry, and records why).
ODD_TIMES = ["0", "1", "253402300800000000", "999999999999999999", "１２", "00000000000000000"]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
)
json_values = st.one_of(
    st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner),
        max_leaves=12,
    ),
    st.lists(st.integers(min_value=-300, max_value=600), min_size=1, max_size=8),  # byte arrays
    st.lists(st.lists(st.integers(min_value=-2, max_value=300), max_size=3), max_size=3),
    st.sampled_from(BAD_TIMES + ODD_TIMES),
    st.just("x" * 200_000),
    st.just([[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]),
)
hostile_fields = st.dictionaries(st.sampled_from(NAMES), json_values, min_size=1, max_size=4)


def _good(i: int) -> dict[str, str]:
    return {**BASE, "__CURSOR": f"s=good;i={i:x}", "MESSAGE": f"good line {i}"}


def _mixed(plan: list[dict[str, Any] | None]) -> tuple[list[dict[str, Any]], set[str]]:
    """The entries (a good one for each None, else BASE overridden by the hostile fields) and
    the cursors of the good ones."""
    entries: list[dict[str, Any]] = []
    good: set[str] = set()
    for i, hostile in enumerate(plan):
        if hostile is None:
            entries.append(_good(i))
            good.add(f"s=good;i={i:x}")
        else:
            entries.append({**BASE, "__CURSOR": f"s=bad;i={i:x}", **hostile})
    return entries, good


def _bad_time(fields: dict[str, Any]) -> bool:
    return fields.get("__REALTIME_TIMESTAMP") in BAD_TIMES


def _stored_cursors(store: EventStore) -> set[str]:
    return {ev.payload.cursor for ev in store.read()}  # type: ignore[union-attr]


plans = st.lists(st.one_of(st.none(), hostile_fields), min_size=1, max_size=12)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


@SETTINGS
@given(plans)
def test_json_lines_with_hostile_fields(plan: list[dict[str, Any] | None]) -> None:
    entries, good = _mixed(plan)
    data = b"".join(orjson.dumps(e) + b"\n" for e in entries)
    store: EventStore = open_store("sqlite://")
    try:
        report = ingest_json_stream(store, io.BytesIO(data))
        assert report.read == len(entries)
        assert report.appended + report.duplicates + report.malformed_count == len(entries)
        assert report.malformed_count >= sum(map(_bad_time, entries))
        assert good <= _stored_cursors(store)
    finally:
        store.close()


@SETTINGS
@given(plans)
def test_classify_reads_past_hostile_lines(
    tmp_path: Path, plan: list[dict[str, Any] | None]
) -> None:
    entries, _ = _mixed(plan)
    path = tmp_path / "journal.jsonl"  # the same file, rewritten for each example
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in entries))
    malformed: list[tuple[int, str]] = []
    _, lines = open_log(str(path), malformed=malformed)
    read = list(lines)
    assert len(read) + len(malformed) == len(entries)
    assert len(malformed) >= sum(map(_bad_time, entries))
    assert {f"good line {i}" for i, h in enumerate(plan) if h is None} <= {ln.text for ln in read}


# In the export stream every value is bytes (a repeated field: a list of them).
export_values = st.one_of(
    st.binary(max_size=64),
    st.sampled_from([t.encode() for t in BAD_TIMES + ODD_TIMES]),
    st.just(b"\xff" * 100_000),
    st.lists(st.binary(max_size=16), min_size=2, max_size=3),
)
export_fields = st.dictionaries(st.sampled_from(NAMES), export_values, min_size=1, max_size=4)


def _export(entries: list[dict[str, Any]]) -> bytes:
    out = io.BytesIO()
    for fields in entries:
        flat: list[tuple[str, bytes | str]] = []
        for name, value in fields.items():
            flat += [(name, v) for v in value] if isinstance(value, list) else [(name, value)]
        write_export_entry(out, flat)
    return out.getvalue()


@SETTINGS
@given(st.lists(st.one_of(st.none(), export_fields), min_size=1, max_size=12))
def test_export_entries_with_hostile_fields(plan: list[dict[str, Any] | None]) -> None:
    entries, good = _mixed(plan)
    store: EventStore = open_store("sqlite://")
    try:
        records = export_records(iter_export(io.BytesIO(_export(entries))))
        report = Ingester(store, "<export>").feed(records)
        assert report.read == len(entries)
        assert report.appended + report.duplicates + report.malformed_count == len(entries)
        bad_times = sum(
            e.get("__REALTIME_TIMESTAMP") in map(str.encode, BAD_TIMES) for e in entries
        )
        assert report.malformed_count >= bad_times
        assert good <= _stored_cursors(store)
    finally:
        store.close()


def _pid_256_file(tmp_path: Path) -> Path:
    """A good line, PID 1's message with `_PID` an array holding 256, and a good line."""
    lines = [_good(0), {**BASE, "__CURSOR": "s=bad;i=1", "_PID": [256]}, _good(2)]
    path = tmp_path / "journal.jsonl"
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in lines))
    return path


def test_a_pid_of_256_is_one_malformed_line_for_ingest(tmp_path: Path) -> None:
    path = _pid_256_file(tmp_path)
    db = f"sqlite:///{tmp_path / 'store.db'}"
    args = ["ingest", "journal", "--file", str(path), "--json", "--db", db, "--no-diagnose"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["appended"], report["malformed"]) == (2, 1)
    assert report["malformed_lines"][0]["line"] == 2


def test_a_pid_of_256_is_one_malformed_line_for_classify(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["classify", str(_pid_256_file(tmp_path)), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["input"] == {
        "format": "journald-json",
        "lines": 2,
        "malformed": 1,
    }
