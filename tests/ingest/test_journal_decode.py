"""journald entries in every shape `journalctl -o json` and `-o export` give them."""

from __future__ import annotations

import base64
import io

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.core.journal_export import ExportFormatError, iter_export, write_export_entry
from advisor.core.records import stable_key
from advisor.store import EventStore, open_store
from ingest.journal import JOURNALD_SOURCE, entry_event, json_line_payload, json_line_record
from ingest.journal_sources import export_records, ingest_json_stream
from tests.journal_fixtures import entry, json_line

PID1 = {
    "__CURSOR": "s=a;i=1",
    "__REALTIME_TIMESTAMP": "1771633975000000",
    "_HOSTNAME": "gpu-node-07",
    "_PID": "1",
    "_TRANSPORT": "journal",
    "_SYSTEMD_UNIT": "init.scope",
    "UNIT": "vllm.service",
    "INVOCATION_ID": "abc1",
    "MESSAGE": "vllm.service: Main process exited, code=exited, status=1/FAILURE",
    "MESSAGE_ID": "98e322203f7a4ed290d09fe03c09fe15",
    "EXIT_CODE": "exited",
    "EXIT_STATUS": "1",
    "PRIORITY": "5",
    "_CMDLINE": "/sbin/init",
}


def test_pid1_message_is_filed_under_the_unit_it_is_about() -> None:
    ev = entry_event(PID1)
    p = ev["payload"]
    assert ev["stream"] == "gpu-node-07/vllm.service"
    assert ev["time_us"] == 1771633975000000
    assert (ev["source"], ev["key"]) == (JOURNALD_SOURCE, stable_key(b"s=a;i=1"))
    assert p["unit"] == "vllm.service" and p["pid"] == 1 and p["priority"] == 5
    assert p["invocation_id"] == "abc1" and p["message_id"] == PID1["MESSAGE_ID"]
    assert p["fields"] == {"EXIT_CODE": "exited", "EXIT_STATUS": "1", "_SYSTEMD_UNIT": "init.scope"}
    assert "_CMDLINE" not in orjson.dumps(p).decode()


def test_byte_array_message_with_ansi_prefix() -> None:
    raw = b"\x1b[1;36m(VllmWorker rank=1 pid=254)\x1b[0;0m INFO 04-16 10:01:02 loading"
    line = json_line(entry(1, raw), cursor="s=x;i=2")
    assert b'"MESSAGE":[27,91' in line
    rec = json_line_record(line, 7)
    assert rec.error is None and rec.event is not None
    assert rec.event["payload"]["message"] == raw.decode()
    assert "message_b64" not in rec.event["payload"]


def test_invalid_utf8_keeps_the_raw_bytes() -> None:
    raw = b"bad utf8 \xff\xfe here"
    rec = json_line_record(json_line(entry(1, raw), cursor="c"), 1)
    payload = rec.event["payload"]  # type: ignore[index]
    assert payload["message"] == "bad utf8 \ufffd\ufffd here"
    assert base64.b64decode(payload["message_b64"]) == raw


def test_null_message_means_truncated_and_missing_message_is_allowed() -> None:
    fields = dict(PID1, MESSAGE=None)
    assert entry_event(fields)["payload"]["message_truncated"] is True
    assert "message" not in entry_event(fields)["payload"]
    no_message = {k: v for k, v in PID1.items() if k != "MESSAGE"}
    assert "message" not in entry_event(no_message)["payload"]


def test_fields_with_several_values() -> None:
    fields = dict(PID1, MESSAGE=["first", [104, 105], None], _HOSTNAME=["a", "b"])
    p = entry_event(fields)["payload"]
    assert p["message"] == "first\nhi"
    assert p["host"] == "a"


def test_kernel_lines_have_their_own_stream() -> None:
    fields = {
        "__CURSOR": "k",
        "__REALTIME_TIMESTAMP": "5",
        "_TRANSPORT": "kernel",
        "_HOSTNAME": "h",
        "MESSAGE": "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off",
    }
    assert entry_event(fields)["stream"] == "h/kernel"


@pytest.mark.parametrize(
    "line, reason",
    [
        (b"{not json", "invalid JSON"),
        (b"[1, 2]", "expected a JSON object"),
        (b'{"MESSAGE": "x"}', "__REALTIME_TIMESTAMP"),
        (b'{"__REALTIME_TIMESTAMP": "1", "MESSAGE": {"a": 1}}', "MESSAGE: expected a string"),
        (b'{"__REALTIME_TIMESTAMP": "1", "MESSAGE": [300, 1]}', "outside 0-255"),
        (b'{"__REALTIME_TIMESTAMP": "1", "_PID": 4242}', "_PID: expected a string"),
        (b'{"__REALTIME_TIMESTAMP": true}', "__REALTIME_TIMESTAMP"),
        (b"\x00\x01\x02 binary garbage", "invalid JSON"),
    ],
)
def test_malformed_lines_are_explained(line: bytes, reason: str) -> None:
    rec = json_line_record(line, 3)
    assert rec.event is None and rec.error is not None and reason in rec.error


def test_export_parser_reads_text_binary_and_repeated_fields() -> None:
    out = io.BytesIO()
    write_export_entry(
        out,
        [
            ("__CURSOR", "s=1;i=1"),
            ("__REALTIME_TIMESTAMP", "10"),
            ("MESSAGE", b"\x1b[32mINFO\x1b[0m colored\nsecond line"),
            ("TAG", "a"),
            ("TAG", "b"),
            ("BIG", "x" * 5000),
        ],
    )
    write_export_entry(
        out, [("__CURSOR", "s=1;i=2"), ("__REALTIME_TIMESTAMP", "11"), ("MESSAGE", "plain")]
    )
    raw = out.getvalue()
    assert b"MESSAGE\n" + (33).to_bytes(8, "little") in raw  # length-framed binary field
    entries = list(iter_export(io.BytesIO(raw)))
    assert entries[0]["MESSAGE"] == b"\x1b[32mINFO\x1b[0m colored\nsecond line"
    assert entries[0]["TAG"] == [b"a", b"b"] and entries[0]["BIG"] == b"x" * 5000
    assert entries[1]["MESSAGE"] == b"plain"
    records = list(export_records(iter(entries)))
    assert records[0].event["payload"]["message"].endswith("second line")  # type: ignore[index]
    assert records[1].position == {"cursor": "s=1;i=2"}
    resumed = list(export_records(iter(entries), skip_cursor="s=1;i=1"))
    assert [r.position for r in resumed] == [{"cursor": "s=1;i=2"}]


def test_export_parser_refuses_a_cut_binary_field() -> None:
    raw = b"MESSAGE\n" + (100).to_bytes(8, "little") + b"short"
    with pytest.raises(ExportFormatError, match="MESSAGE"):
        list(iter_export(io.BytesIO(raw)))


printable = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=300)
messages = st.one_of(printable, st.binary(max_size=300))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            messages,
            st.sampled_from(["vllm.service", "sglang.service", "x@1.service"]),
            st.integers(min_value=0, max_value=7),
        ),
        min_size=1,
        max_size=25,
    )
)
def test_round_trip_ingest_then_read(items: list[tuple[bytes | str, str, int]]) -> None:
    """Whatever journald can hold comes back out of the store as it went in."""
    lines = b"".join(
        json_line(entry(i, msg, unit=unit, priority=prio), cursor=f"s=prop;i={i:x}")
        for i, (msg, unit, prio) in enumerate(items)
    )
    store: EventStore = open_store("sqlite://")
    try:
        report = ingest_json_stream(store, io.BytesIO(lines))
        assert (report.appended, report.malformed_count) == (len(items), 0)
        again = ingest_json_stream(store, io.BytesIO(lines))
        assert (again.appended, again.duplicates) == (0, len(items))
        got = list(store.read())
        assert len(got) == len(items)
        for ev, (msg, unit, prio) in zip(got, items, strict=True):
            p = ev.payload
            raw = msg.encode() if isinstance(msg, str) else msg
            if p.message_b64 is not None:  # type: ignore[union-attr]
                assert base64.b64decode(p.message_b64) == raw  # type: ignore[union-attr]
            else:
                assert p.message == raw.decode()  # type: ignore[union-attr]
            assert ev.stream == f"gpu01/{unit}" and p.priority == prio  # type: ignore[union-attr]
            assert ev.time_us == 1_742_105_558_000_000 + (ev.seq - 1) * 1000
    finally:
        store.close()


_SHAPES = [
    orjson.dumps(PID1),
    b"\x1e" + orjson.dumps(PID1),  # -o json-seq
    b"  " + orjson.dumps({**PID1, "MESSAGE": list(b"caf\xe9")}) + b"\x0c",
    orjson.dumps({**PID1, "_PID": "4242", "UNIT": "other.service", "USER_UNIT": "x.service"}),
    orjson.dumps({**PID1, "_UID": "0", "COREDUMP_UNIT": "vllm.service", "MESSAGE": None}),
    orjson.dumps({k: v for k, v in PID1.items() if k != "_SYSTEMD_UNIT"}),
    orjson.dumps({**PID1, "_TRANSPORT": "kernel", "_PID": ["1", "2"]}),
    b"[1, 2]",
    b'"text"',
    b"{bad",
    b"  {bad",
    b'{"MESSAGE": "x"}',
    orjson.dumps(PID1) + b" trailing",
]


@pytest.mark.parametrize("line", _SHAPES)
def test_json_line_payload_is_json_line_record_s_event_or_error(line: bytes) -> None:
    """`advisor classify` decodes lines with `json_line_payload` (no stream, no key): it
    must give the time and payload, or the error, that `json_line_record` gives."""
    record = json_line_record(line, 1)
    expected = (
        record.error if record.event is None else (record.event["time_us"], record.event["payload"])
    )
    assert json_line_payload(line) == expected
