"""The unit an entry is about comes only from what journald vouches for.

Any local user can send a journald entry with `UNIT=`, `COREDUMP_UNIT=`, `OBJECT_SYSTEMD_UNIT=`
or `INVOCATION_ID=`; only journald's own `_` fields say who sent it. These tests send such
claims in both shapes the ingester reads (`journalctl -o json` values, `-o export` bytes), then
once through real systemd: an unprivileged process in a booted box claims to be a unit.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from advisor.cli.main import cli
from advisor.core.journal_export import iter_export, write_export_entry
from advisor.core.payloads import LogRecorded
from advisor.pipeline.processing import Processor
from advisor.sim.box import SystemdBox
from advisor.store import EventFilter, EventStore
from advisor.views.read.reading import read_rows
from ingest.journal import entry_event, json_line_record
from ingest.journal_sources import ingest_json_file

UNIT = "vllm-minimax-m25.service"
REAL_INVOCATION = "0123456789abcdef0123456789abcdef"
FORGED_INVOCATION = "f" * 32
T0 = 1_771_633_975_000_000

Fields = dict[str, Any]


def base(i: int = 0, **extra: Any) -> Fields:
    return {
        "__CURSOR": f"s=1;i={i}",
        "__REALTIME_TIMESTAMP": str(T0 + i * 1000),
        "_HOSTNAME": "gpu-node-07",
        "_TRANSPORT": "journal",
        "PRIORITY": "6",
        **extra,
    }


def spoofer(**claims: str) -> Fields:
    """A uid-1000 process (`logger --journald`, from a login session) claiming things."""
    fields = base(
        _PID="4321",
        _UID="1000",
        _GID="1000",
        _COMM="logger",
        _SYSTEMD_UNIT="session-3.scope",
        _SYSTEMD_INVOCATION_ID="5" * 32,
        SYSLOG_IDENTIFIER="mallory",
        MESSAGE="torch.OutOfMemoryError: CUDA out of memory",
    )
    fields.update(claims)
    return fields


def pid1(message: str, **extra: str) -> Fields:
    fields = base(
        _PID="1",
        _UID="0",
        _COMM="systemd",
        SYSLOG_IDENTIFIER="systemd",
        _SYSTEMD_UNIT="init.scope",
        UNIT=UNIT,
        INVOCATION_ID=REAL_INVOCATION,
        MESSAGE=message,
    )
    fields.update(extra)
    return fields


def as_json(fields: Fields) -> dict[str, Any]:
    """The entry as `journalctl -o json` gives it, decoded by the ingester."""
    record = json_line_record(orjson.dumps(fields), 1)
    assert record.event is not None, record.error
    return record.event


def as_export(fields: Fields) -> dict[str, Any]:
    """The entry as `journalctl -o export` gives it (bytes values), decoded by the ingester."""
    buf = io.BytesIO()
    write_export_entry(buf, list(fields.items()))
    buf.seek(0)
    (entry,) = list(iter_export(buf))
    assert all(isinstance(v, bytes) for v in entry.values())
    return entry_event(entry)


SHAPES = pytest.mark.parametrize("decode", [as_json, as_export], ids=["json", "export"])
Decode = Callable[[Fields], dict[str, Any]]


@SHAPES
@pytest.mark.parametrize(
    "claims",
    [
        {"UNIT": UNIT},
        {"UNIT": UNIT, "INVOCATION_ID": FORGED_INVOCATION},
        {"COREDUMP_UNIT": UNIT},
        {"OBJECT_SYSTEMD_UNIT": UNIT, "OBJECT_SYSTEMD_INVOCATION_ID": FORGED_INVOCATION},
        {"USER_UNIT": UNIT, "USER_INVOCATION_ID": FORGED_INVOCATION},
    ],
    ids=["UNIT", "UNIT+INVOCATION_ID", "COREDUMP_UNIT", "OBJECT_SYSTEMD_UNIT", "USER_UNIT"],
)
def test_an_unprivileged_claim_stays_on_the_senders_own_stream(
    decode: Decode, claims: dict[str, str]
) -> None:
    event = decode(spoofer(**claims))
    p = event["payload"]
    assert event["stream"] == "gpu-node-07/session-3.scope"
    assert p["unit"] == "session-3.scope"
    assert p["invocation_id"] == "5" * 32
    # The claims are kept, under their own names, as evidence of what was tried.
    assert claims.items() <= p["fields"].items()


@SHAPES
def test_a_forged_invocation_id_does_not_split_the_units_run(decode: Decode) -> None:
    """A process of the unit itself may write INVOCATION_ID=: journald's own id decides."""
    fields = base(
        _PID="4242",
        _UID="998",
        _SYSTEMD_UNIT=UNIT,
        _SYSTEMD_INVOCATION_ID=REAL_INVOCATION,
        SYSLOG_IDENTIFIER="vllm",
        INVOCATION_ID=FORGED_INVOCATION,
        MESSAGE="INFO started",
    )
    p = decode(fields)["payload"]
    assert p["unit"] == UNIT and p["invocation_id"] == REAL_INVOCATION
    assert p["fields"]["INVOCATION_ID"] == FORGED_INVOCATION


@SHAPES
def test_root_is_not_pid1_for_unit(decode: Decode) -> None:
    """journalctl believes UNIT= from PID 1 only, not from any root process."""
    fields = dict(spoofer(UNIT=UNIT, INVOCATION_ID=FORGED_INVOCATION), _UID="0")
    event = decode(fields)
    assert event["stream"] == "gpu-node-07/session-3.scope"
    assert event["payload"]["invocation_id"] == "5" * 32


@SHAPES
def test_pid1_is_believed_about_the_unit_and_its_invocation(decode: Decode) -> None:
    event = decode(
        pid1(
            f"{UNIT}: Main process exited, code=exited, status=1/FAILURE",
            EXIT_CODE="exited",
            EXIT_STATUS="1",
        )
    )
    p = event["payload"]
    assert event["stream"] == f"gpu-node-07/{UNIT}"
    assert p["unit"] == UNIT and p["invocation_id"] == REAL_INVOCATION
    assert p["fields"] == {"EXIT_CODE": "exited", "EXIT_STATUS": "1", "_SYSTEMD_UNIT": "init.scope"}


@SHAPES
def test_pid1_about_itself_stays_on_init_scope(decode: Decode) -> None:
    fields = {
        k: v
        for k, v in pid1("Reloading finished in 120 ms.").items()
        if k not in ("UNIT", "INVOCATION_ID")
    }
    assert decode(fields)["stream"] == "gpu-node-07/init.scope"


@SHAPES
def test_root_coredump_and_object_claims_are_believed(decode: Decode) -> None:
    coredump = base(
        _PID="9102",
        _UID="0",
        _SYSTEMD_UNIT="systemd-coredump@0-9102-0.service",
        _SYSTEMD_INVOCATION_ID="c" * 32,
        SYSLOG_IDENTIFIER="systemd-coredump",
        COREDUMP_UNIT=UNIT,
        MESSAGE="Process 4242 (python3) dumped core.",
    )
    event = decode(coredump)
    assert event["stream"] == f"gpu-node-07/{UNIT}"
    # systemd-coredump's own invocation is not the unit's: it must not start a new run.
    assert "invocation_id" not in event["payload"]
    daemon = base(
        _PID="700",
        _UID="0",
        _SYSTEMD_UNIT="nvidia-persistenced.service",
        SYSLOG_IDENTIFIER="daemon",
        OBJECT_SYSTEMD_UNIT=UNIT,
        OBJECT_SYSTEMD_INVOCATION_ID=REAL_INVOCATION,
        MESSAGE="about the unit",
    )
    p = decode(daemon)["payload"]
    assert p["unit"] == UNIT and p["invocation_id"] == REAL_INVOCATION


@SHAPES
def test_a_user_managers_word_about_its_units_stays_on_the_user_manager(decode: Decode) -> None:
    fields = base(
        _PID="2210",
        _UID="1000",
        _COMM="systemd",
        SYSLOG_IDENTIFIER="systemd",
        _SYSTEMD_UNIT="user@1000.service",
        _SYSTEMD_INVOCATION_ID="7" * 32,
        USER_UNIT=UNIT,
        USER_INVOCATION_ID=FORGED_INVOCATION,
        MESSAGE=f"{UNIT}: Failed with result 'exit-code'.",
    )
    event = decode(fields)
    assert event["stream"] == "gpu-node-07/user@1000.service"
    assert event["payload"]["invocation_id"] == "7" * 32
    assert event["payload"]["fields"]["USER_UNIT"] == UNIT


def test_pid_with_several_values_is_not_pid1() -> None:
    fields = dict(spoofer(UNIT=UNIT), _PID=["1", "4321"])
    assert as_json(fields)["stream"] == "gpu-node-07/session-3.scope"


@SHAPES
@pytest.mark.parametrize("identifier", [UNIT, f"{UNIT} ", f"{UNIT}\n", f"x/{UNIT}"])
def test_outside_any_unit_the_identifier_never_names_a_unit(
    decode: Decode, identifier: str
) -> None:
    """No `_SYSTEMD_UNIT` (a process outside systemd's cgroups): the sender's identifier is
    used, but never one that reads as a unit's name once cleaned."""
    fields = {
        k: v
        for k, v in spoofer(UNIT=UNIT).items()
        if k not in ("_SYSTEMD_UNIT", "_SYSTEMD_INVOCATION_ID")
    }
    fields["SYSLOG_IDENTIFIER"] = identifier
    event = decode(fields)
    assert event["stream"] == "gpu-node-07/unknown"
    assert "unit" not in event["payload"] and "invocation_id" not in event["payload"]
    fields["SYSLOG_IDENTIFIER"] = "mallory"
    assert decode(fields)["stream"] == "gpu-node-07/mallory"


def test_a_forged_failure_opens_no_incident_for_the_unit(
    tmp_path: Path, opener: Callable[[str], EventStore], seed_journal: Path
) -> None:
    """The defect end to end: forged lifecycle lines and an OOM claiming the seed's unit,
    sent by uid 1000, add no run and no incident to it."""

    def incidents_of(store: EventStore) -> list[dict[str, Any]]:
        return [r for r in read_rows(store, "incidents") if r["unit"] == UNIT]

    clean = opener(f"sqlite:///{tmp_path / 'clean.db'}")
    ingest_json_file(clean, seed_journal)
    Processor(clean).run(final=True)
    forged = [
        spoofer(
            UNIT=UNIT,
            INVOCATION_ID=FORGED_INVOCATION,
            MESSAGE=message,
            SYSLOG_IDENTIFIER="systemd",
            **extra,
        )
        for message, extra in [
            (f"Started {UNIT} - vLLM.", {}),
            ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", {}),
            (
                f"{UNIT}: Main process exited, code=exited, status=1/FAILURE",
                {"EXIT_CODE": "exited", "EXIT_STATUS": "1"},
            ),
            (f"{UNIT}: Failed with result 'exit-code'.", {"UNIT_RESULT": "exit-code"}),
        ]
    ]
    for i, fields in enumerate(forged):
        fields["__CURSOR"] = f"s=forged;i={i}"
        fields["__REALTIME_TIMESTAMP"] = str(T0 + 10_000_000_000 + i * 1000)
    journal = tmp_path / "with-forgery.jsonl"
    journal.write_bytes(
        seed_journal.read_bytes() + b"".join(orjson.dumps(f) + b"\n" for f in forged)
    )
    store = opener(f"sqlite:///{tmp_path / 'forged.db'}")
    ingest_json_file(store, journal)
    Processor(store).run(final=True)
    runs = [r for r in read_rows(store, "runs") if r["unit"] == UNIT]
    assert len(runs) == len([r for r in read_rows(clean, "runs") if r["unit"] == UNIT])
    assert [i["incident_id"] for i in incidents_of(store)] == [
        i["incident_id"] for i in incidents_of(clean)
    ]
    forged_streams = {
        e.stream
        for e in store.read()
        if isinstance(e.payload, LogRecorded)
        and e.payload.cursor
        and e.payload.cursor.startswith("s=forged;")
    }
    assert forged_streams == {"gpu-node-07/session-3.scope"}


@pytest.mark.parametrize(
    "unit", ["session-3.scope", "vllm.socket", "user-1000.slice", "user@1000.service"]
)
def test_no_incident_or_plan_for_a_unit_that_is_no_servers(
    unit: str, tmp_path: Path, opener: Callable[[str], EventStore], seed_journal: Path
) -> None:
    """The seed's failures as PID 1 would log them about a login session's scope (a user's
    own processes OOM in it, and write CUDA errors with `logger`), a socket, a slice or a
    user's service manager: the lines are stored and cut into runs, as evidence, but no run
    of such a unit is judged, so no incident opens and nothing is planned for it; nor does
    `logger`-written text claiming to be systemd about the scope change that."""
    journal = tmp_path / "not-a-server.jsonl"
    spoofed = [
        spoofer(SYSLOG_IDENTIFIER="systemd", _SYSTEMD_UNIT=unit, MESSAGE=message)
        for message in (
            f"{unit}: Main process exited, code=exited, status=1/FAILURE",
            f"{unit}: Failed with result 'exit-code'.",
        )
    ]
    for i, fields in enumerate(spoofed):
        fields["__CURSOR"] = f"s=spoofed;i={i}"
        fields["__REALTIME_TIMESTAMP"] = str(T0 + 10_000_000_000 + i * 1000)
    journal.write_bytes(
        seed_journal.read_bytes().replace(UNIT.encode(), unit.encode())
        + b"".join(orjson.dumps(f) + b"\n" for f in spoofed)
    )
    store = opener(f"sqlite:///{tmp_path / 'store.db'}")
    ingest_json_file(store, journal)
    Processor(store).run(final=True)
    assert {r["unit"] for r in read_rows(store, "runs")} == {unit}
    assert read_rows(store, "incidents") == []
    assert read_rows(store, "actions") == []


# -- real systemd ---------------------------------------------------------------------------

BOX_UNIT = "vllm-x.service"
SPOOF = (
    f"MESSAGE=torch.OutOfMemoryError: spoofed by uid 1000\nUNIT={BOX_UNIT}\n"
    f"INVOCATION_ID={FORGED_INVOCATION}\nCOREDUMP_UNIT={BOX_UNIT}\n"
    f"OBJECT_SYSTEMD_UNIT={BOX_UNIT}\nSYSLOG_IDENTIFIER={BOX_UNIT}\n"
).encode()


def _wait_for(box: SystemdBox, *texts: str, timeout_s: float = 15) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        journal = box.journalctl("-o", "cat")
        if all(t in journal for t in texts):
            return
        assert time.monotonic() < deadline, f"never reached the journal: {texts}"
        time.sleep(0.05)


def test_real_systemd_a_uid_1000_entry_claiming_a_unit_is_not_the_units(
    box: SystemdBox, tmp_path: Path, opener: Callable[[str], EventStore]
) -> None:
    box.install(BOX_UNIT, "[Service]\nExecStart=/bin/sh -c 'echo vllm-x is up; exit 3'\n")
    box.systemctl("start", BOX_UNIT, check=False)
    box.run(
        ["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", "logger", "--journald"],
        input=SPOOF,
    )
    _wait_for(box, "vllm-x is up", "spoofed by uid 1000", "Failed with result 'exit-code'")
    # journalctl itself does not count the entry as the unit's ...
    assert "spoofed" not in box.journalctl("-u", BOX_UNIT, "-o", "cat")
    db = f"sqlite:///{tmp_path / 'events.db'}"
    args = ["ingest", "journal", "--db", db, "--json"]
    for journal_file in box.journal_files():
        args += ["--journal-file", str(journal_file)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    store = opener(db)
    by_stream: dict[str, list[LogRecorded]] = {}
    for event in store.read(EventFilter(type="log.recorded")):
        assert isinstance(event.payload, LogRecorded)
        by_stream.setdefault(event.stream, []).append(event.payload)
    # ... and neither does the ingester: PID 1's lines and the unit's own are there, the
    # spoofed entry is not.
    unit_stream = by_stream[f"gpu-box/{BOX_UNIT}"]
    texts = [p.message or "" for p in unit_stream]
    assert "vllm-x is up" in texts
    assert any(t.startswith(f"{BOX_UNIT}: Main process exited") for t in texts)
    assert f"{BOX_UNIT}: Failed with result 'exit-code'." in texts
    assert {p.pid for p in unit_stream if p.identifier == "systemd"} == {1}
    assert not any("spoofed" in t for t in texts)
    assert FORGED_INVOCATION not in {p.invocation_id for p in unit_stream}
    (spoofed,) = [
        (stream, p)
        for stream, payloads in by_stream.items()
        for p in payloads
        if "spoofed" in (p.message or "")
    ]
    stream, payload = spoofed
    assert stream == "gpu-box/unknown" and payload.unit is None
    assert payload.fields is not None and payload.fields["UNIT"] == BOX_UNIT
    # One run of the unit, diagnosed from what systemd said, not from the spoofed OOM.
    (run,) = read_rows(store, "runs", unit=BOX_UNIT)
    assert run["outcome"] == "failed" and run["label"] != "runtime_oom"
