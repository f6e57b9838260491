"""Shipping what the fleet needs (advisor.fleet.selection): a host keeps its routine serving
lines and the GPU samples between the fleet's, ships everything else as it is, and each run
of kept events as one `ship.held` range that the central store chains across — checked by
`advisor_ship` in PostgreSQL, by the direct writer on SQLite, and by `advisor verify`."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine, text

from advisor.cli.main import cli
from advisor.core.errors import IntegrityError, StoreError
from advisor.core.events import NewEvent
from advisor.fleet.selection import Selection, routine_line
from advisor.fleet.ship import checkpoint_name, ship
from advisor.store import Checkpoint, EventStore, open_store
from advisor.store.chain import GENESIS_HASH, RawEvent
from advisor.store.integrity.central import (
    DirectWriter,
    Position,
    central_position,
    writer_for,
)
from advisor.store.integrity.heads import HostKey
from advisor.store.integrity.held import HELD_TYPE
from advisor.store.integrity.hostchain import central_head_findings, verify_host
from advisor.store.migrate import upgrade as upgrade_schema
from tests.conftest import seed_on_host
from tests.fleet.test_central_roles import shipper_role
from tests.fleet.test_ship import _tamper
from tests.store.test_seq_rowid import _downgrade

HOST = "gpu-node-07"
UNIT = "vllm-minimax-m25.service"
BASE_US = 1_771_640_000_000_000
OK = 'INFO:     10.0.0.{i}:4{i} - "POST /v1/completions HTTP/1.1" 200 OK'
ANSI_OK = (
    '\x1b[1;36m(APIServer pid=7)\x1b[0;0m INFO:     10.0.0.{i}:5{i} - "GET /health HTTP/1.1" 200 OK'
)
THROUGHPUT = (
    "INFO 02-20 21:00:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: 812.4 "
    "tokens/s, Avg generation throughput: 95.1 tokens/s, Running: 12 reqs"
)
# lines that look busy but are not routine: they ship
NOT_ROUTINE = [
    'INFO:     10.0.0.9:4431 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error',
    "ERROR 02-20 21:00:07 [serving_completion.py:88] Error in preprocessing prompt inputs",
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3/dist-packages/vllm/entrypoints/openai/api_server.py", line 9',
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
]


def test_routine_lines_are_the_registered_ones_only() -> None:
    def stored(message: str) -> str:  # the message as the store holds it (JSON-escaped)
        return orjson.dumps(message).decode()[1:-1]

    assert routine_line(stored(OK.format(i=3)))
    assert routine_line(stored(ANSI_OK.format(i=3)))
    assert routine_line(stored(THROUGHPUT.format(s=5)))
    assert routine_line(stored("slot print_timing: id  0 | task 12 | prompt eval time = 3 ms"))
    assert routine_line(stored("[UFW BLOCK] IN=eno1 OUT= SRC=203.0.113.64 DST=10.20.0.14"))
    for line in NOT_ROUTINE:
        assert not routine_line(stored(line)), line


def _line(i: int, message: str, stream: str = f"{HOST}/{UNIT}") -> NewEvent:
    return NewEvent.model_validate(
        {
            "stream": stream,
            "time_us": BASE_US + i * 100_000,
            "source": "traffic",
            "key": i,
            "payload": {
                "type": "log.recorded",
                "origin": "journald",
                "host": HOST,
                "unit": UNIT,
                "message": message,
            },
        }
    )


def _sample(i: int, t_s: int, pids: tuple[int, ...]) -> NewEvent:
    return NewEvent.model_validate(
        {
            "stream": f"{HOST}/gpu0",
            "time_us": BASE_US + t_s * 1_000_000,
            "source": "nvml",
            "key": i,
            "payload": {
                "type": "gpu.sampled",
                "origin": "nvml",
                "host": HOST,
                "index": 0,
                "memory_total_bytes": 80 << 30,
                "memory_used_bytes": (70 << 30) + i,
                "memory_free_bytes": (10 << 30) - i,
                "processes": [{"pid": p, "used_bytes": 1 << 30} for p in pids],
            },
        }
    )


def _busy_host(tmp_path: Path, seed_journal: Path) -> EventStore:
    """The seed scenario (start-up, a crash, the diagnosis), then an hour-like stretch of
    serving: request and throughput lines, a burst of errors with a traceback, and a GPU
    sampled every second whose processes change once."""
    store = seed_on_host(tmp_path, seed_journal, HOST, diagnose=True)
    traffic: list[NewEvent] = []
    for i in range(600):
        traffic.append(_line(i, (ANSI_OK if i % 7 == 0 else OK).format(i=i % 250)))
        if i % 50 == 0:
            traffic.append(_line(10_000 + i, THROUGHPUT.format(s=i % 60)))
        if i == 300:
            traffic += [_line(20_000 + k, m) for k, m in enumerate(NOT_ROUTINE)]
    samples = [_sample(i, i, (4242,) if i < 150 else (4242, 5151)) for i in range(200)]
    # the samples interleave with the lines, as the daemon appends them
    for k in range(0, len(traffic), 40):
        store.append(traffic[k : k + 40])
        store.append(samples[k // 20 : k // 20 + 2])
    return store


def _expected_shipped(host: EventStore) -> set[int]:
    """The host seqs that must ship, judged here from the payloads (not by the selection)."""
    keep_gpu_every_us, last = 60_000_000, -(10**18)
    last_pids: object = None
    out = set()
    for e in host.read_raw():
        p = orjson.loads(e.payload)
        if e.type == "log.recorded" and any(
            s in (p.get("message") or "") for s in ('HTTP/1.1" 200 OK', "Avg prompt throughput:")
        ):
            continue
        if e.type == "gpu.sampled":
            pids = p.get("processes")
            if pids == last_pids and e.time_us - last < keep_gpu_every_us:
                continue
            last, last_pids = e.time_us, pids
        out.add(e.seq)
    return out


def _central_rows(central: EventStore) -> list[tuple[int, str, str, str]]:
    with central.connect() as conn:
        return [
            (int(r[0]), r[1], r[2], r[3])
            for r in conn.execute(
                text(
                    "SELECT e.idem_key, e.type, e.payload, e.origin FROM events e "
                    "JOIN sources s ON s.id = e.source_id WHERE s.name = :s ORDER BY e.idem_key"
                ),
                {"s": f"ship:{HOST}"},
            )
        ]


def test_a_host_ships_what_the_fleet_needs_and_a_checked_digest_of_the_rest(
    tmp_path: Path, seed_journal: Path, store_url: str, opener: Callable[[str], EventStore]
) -> None:
    host = _busy_host(tmp_path, seed_journal)
    central = opener(store_url)
    report = ship(host, central, HOST, batch=97, selection=Selection(held_every_s=0))
    local = {e.seq: e for e in host.read_raw()}
    expected = _expected_shipped(host)
    rows = _central_rows(central)

    shipped = {k: payload for k, type_, payload, _ in rows if type_ != HELD_TYPE}
    assert set(shipped) == expected
    assert all(local[k].payload == payload for k, payload in shipped.items())
    assert len(expected) < len(local) / 3  # the routine lines stayed here
    assert report.held == len(local) - len(expected)
    # The kept ranges and the shipped events tile the host's seqs exactly, in order.
    covered: list[int] = []
    per_stream: dict[str, int] = {}
    for k, type_, payload, origin in rows:
        if type_ != HELD_TYPE:
            covered.append(k)
            continue
        held = orjson.loads(payload)
        assert held["last_seq"] == k
        assert held["from_hash"] == local[held["first_seq"] - 1].hash.hex()
        assert orjson.loads(origin)["hash"] == local[k].hash.hex()
        covered += range(held["first_seq"], k + 1)
        for stream, n in held["streams"].items():
            per_stream[stream] = per_stream.get(stream, 0) + n
    assert covered == sorted(local)
    kept = [local[k] for k in local if k not in expected]
    assert per_stream == {s: sum(1 for e in kept if e.stream == s) for s in per_stream}
    # Every event the diagnosis wrote shipped (none of it is routine).
    assert {k for k, e in local.items() if not e.type.startswith(("log.", "gpu."))} <= expected

    chain = verify_host(central, f"ship:{HOST}")
    assert (chain.ok, chain.checked, chain.last_seq) == (True, len(expected), max(local))
    result = CliRunner().invoke(cli, ["verify", "--json", "--db", store_url])
    assert result.exit_code == 0, result.output
    assert [(h["host"], h["ok"]) for h in json.loads(result.output)["hosts"]] == [(HOST, True)]

    # Shipping again sends nothing; a lost checkpoint resumes where the central store
    # stands; new routine lines become a new range after the last.
    assert ship(host, central, HOST, selection=Selection(held_every_s=0)).shipped == 0
    host.append_prepared([], Checkpoint(checkpoint_name(central.url), {"seq": 10}))
    again = ship(host, central, HOST, selection=Selection(held_every_s=0))
    assert (again.shipped, again.central_seq) == (0, max(local))
    host.append([_line(30_000 + i, OK.format(i=i)) for i in range(5)])
    more = ship(host, central, HOST, selection=Selection(held_every_s=0))
    assert (more.shipped, more.held) == (1, 5)
    assert verify_host(central, f"ship:{HOST}").ok
    host.close()


def test_a_kept_run_at_the_end_waits_for_company_and_its_minute(
    tmp_path: Path, seed_journal: Path, opener: Callable[[str], EventStore]
) -> None:
    """Routine lines at the end of what the host has stay pending across rounds (a host
    that only serves sends a digest a minute, not a round); the first event that ships
    takes one digest of the whole run with it. A new selection (the agent restarted) reads
    on from where the central store stands."""
    host = seed_on_host(tmp_path, seed_journal, HOST)
    central = opener(f"sqlite:///{tmp_path / 'central.db'}")
    selection = Selection(held_every_s=3600)
    assert ship(host, central, HOST, selection=selection).held == 0
    start = central_position(central, HOST)
    for first in (100, 200):
        host.append([_line(first + i, OK.format(i=i)) for i in range(5)])
        report = ship(host, central, HOST, selection=selection)
        assert (report.shipped, report.held, report.last_seq) == (0, 5, start.seq)
        assert central_position(central, HOST) == start
    host.append([_line(300, NOT_ROUTINE[1])])
    report = ship(host, central, HOST, selection=selection)
    assert (report.shipped, report.last_seq) == (2, start.seq + 11)
    held = orjson.loads(next(p for k, t, p, _ in _central_rows(central) if t == HELD_TYPE))
    assert (held["first_seq"], held["last_seq"]) == (start.seq + 1, start.seq + 10)

    host.append([_line(400 + i, OK.format(i=i)) for i in range(3)])
    assert ship(host, central, HOST, selection=selection).shipped == 0
    restarted = ship(host, central, HOST, selection=Selection(held_every_s=0))
    assert (restarted.shipped, restarted.held, restarted.last_seq) == (1, 3, start.seq + 14)
    assert verify_host(central, f"ship:{HOST}").ok
    host.close()


def test_the_chain_is_checked_across_a_kept_range(
    tmp_path: Path, seed_journal: Path, store_url: str, opener: Callable[[str], EventStore]
) -> None:
    """A range rewritten in the central store breaks the host's chain there: its starting
    hash (the range does not start from the chain as shipped), or its closing hash (the next
    shipped event does not extend it)."""
    host = _busy_host(tmp_path, seed_journal)
    central = opener(store_url)
    ship(host, central, HOST, selection=Selection(held_every_s=0))
    rows = _central_rows(central)
    ranges = [(k, orjson.loads(p)) for k, t, p, _ in rows if t == HELD_TYPE]
    # a range followed by a shipped event, not the last one
    k, held = next((k, h) for k, h in ranges if any(r[0] == k + 1 for r in rows))
    _tamper(
        central,
        "UPDATE events SET payload = replace(payload, :was, :now) WHERE type = :t "
        "AND idem_key = :k",
        was=held["from_hash"],
        now="0" * 64,
        t=HELD_TYPE,
        k=k,
    )
    broken = verify_host(central, f"ship:{HOST}")
    assert (broken.ok, broken.first_bad_seq) == (False, held["first_seq"])
    assert broken.reason is not None and "kept range" in broken.reason
    _tamper(
        central,
        "UPDATE events SET payload = replace(payload, :was, :now) WHERE type = :t "
        "AND idem_key = :k",
        was="0" * 64,
        now=held["from_hash"],
        t=HELD_TYPE,
        k=k,
    )
    assert verify_host(central, f"ship:{HOST}").ok
    closing = orjson.loads(next(o for r, t, _, o in rows if r == k))["hash"]
    _tamper(
        central,
        "UPDATE events SET origin = replace(origin, :was, :now) WHERE type = :t AND idem_key = :k",
        was=closing,
        now="1" * 64,
        t=HELD_TYPE,
        k=k,
    )
    broken = verify_host(central, f"ship:{HOST}")
    assert (broken.ok, broken.first_bad_seq) == (False, k + 1)
    host.close()


def _digest(store: EventStore, after: int, before: bytes, skip: int = 0) -> RawEvent:
    """The digest a selection makes of the store's events after `after` (all routine), the
    first `skip` of them left out, as if the chain's hash before them were `before`."""
    selection = Selection(held_every_s=0)
    glances = store.glance(after_seq=after, limit=1000)[skip:]
    assert selection.pick(glances, HOST, before, store.read_raw_at) == []
    (digest,) = selection.due(HOST, 0, flush=True)
    return digest


def test_the_central_store_refuses_a_range_that_does_not_follow_its_chain(
    tmp_path: Path, seed_journal: Path, store_url: str, opener: Callable[[str], EventStore]
) -> None:
    host = seed_on_host(tmp_path, seed_journal, HOST)
    central = opener(store_url)
    events = list(host.read_raw())
    ship(host, central, HOST, batch=10)
    host.append([_line(i, OK.format(i=i)) for i in range(6)])
    new = [e for e in host.read_raw() if e.seq > events[-1].seq]
    writer = writer_for(central)
    at = central_position(central, HOST)
    assert at == Position(events[-1].seq, events[-1].hash)
    forged = _digest(host, at.seq, GENESIS_HASH)  # the wrong start
    with pytest.raises(IntegrityError, match="kept range") as refused:
        writer.ship(HOST, [forged], at)
    assert refused.value.first_bad_seq == new[0].seq
    gap = _digest(host, at.seq, new[0].hash, skip=1)  # leaves one out
    with pytest.raises(IntegrityError, match="does not follow") as refused:
        writer.ship(HOST, [gap], at)
    assert refused.value.first_bad_seq == new[0].seq
    right = _digest(host, at.seq, events[-1].hash)
    assert writer.ship(HOST, [right], at) == (1, 0)
    assert writer.ship(HOST, [right], at) == (0, 1)  # sent twice: the same range, a duplicate
    assert verify_host(central, f"ship:{HOST}").ok
    host.close()


def test_a_shipping_role_ships_ranges_with_signed_heads(
    tmp_path: Path, seed_journal: Path, pg_url: str, opener: Callable[[str], EventStore]
) -> None:
    """Through `advisor_ship` as a host's own role, with heads signed after each batch: a
    head at the end of a kept range names the range's closing hash, which the central store
    holds, so every head checks out."""
    central = opener(pg_url)
    key = HostKey.generate()
    host = _busy_host(tmp_path, seed_journal)
    with shipper_role(central, pg_url, HOST, public_key=key.public_key) as url:
        as_role = open_store(url)
        try:
            report = ship(
                host, as_role, HOST, batch=250, key=key, selection=Selection(held_every_s=0)
            )
        finally:
            as_role.close()
    assert report.heads > 2 and report.held > 0
    findings = central_head_findings(central)[HOST]
    assert findings and all(f.ok for f in findings), findings
    assert verify_host(central, f"ship:{HOST}").ok
    host.close()


def test_ship_lines_all_ships_every_event_and_fleet_is_the_default(
    tmp_path: Path, seed_journal: Path, opener: Callable[[str], EventStore]
) -> None:
    host = _busy_host(tmp_path, seed_journal)
    total = sum(1 for _ in host.read_raw())
    runner = CliRunner()
    every = opener(f"sqlite:///{tmp_path / 'every.db'}")
    fleet = opener(f"sqlite:///{tmp_path / 'fleet.db'}")
    base = ["ship", "--host", HOST, "--db", host.url, "--json"]
    result = runner.invoke(cli, [*base, "--to", every.url, "--lines", "all"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["shipped"] == total
    result = runner.invoke(cli, [*base, "--to", fleet.url])
    assert result.exit_code == 0, result.output
    got = json.loads(result.output)
    assert got["held"] == total - len(_expected_shipped(host)) and got["shipped"] < total / 3
    result = runner.invoke(cli, ["ship", "--to", fleet.url, "--db", host.url, "--lines", "some"])
    assert result.exit_code == 2 and "'some' is not one of 'fleet', 'all'" in result.output
    host.close()


def test_a_glance_reads_a_lines_message_start_and_any_other_payload(
    store_url: str, opener: Callable[[str], EventStore]
) -> None:
    """What the selection decides on, on either kind of host store: a log line's message to
    its first characters (a quote as JSON writes it), none for a line without one, any other
    event's payload whole."""
    store = opener(store_url)
    long = 'INFO:     10.0.0.1:4 - "POST /v1/completions HTTP/1.1" 200 OK ' + "é" * 900
    store.append([_line(1, long), _sample(2, 0, (1,))])
    store.append(
        [
            NewEvent.model_validate(
                {
                    "stream": f"{HOST}/{UNIT}",
                    "time_us": BASE_US + 9,
                    "source": "traffic",
                    "key": 3,
                    "payload": {"type": "log.recorded", "origin": "journald", "host": HOST},
                }
            )
        ]
    )
    first, sample, bare = store.glance(after_seq=0, limit=10, message_chars=120)
    assert first.text == orjson.dumps(long).decode()[1:121]
    assert routine_line(first.text or "")
    assert sample.text == next(e.payload for e in store.read_raw() if e.seq == sample.seq)
    assert bare.text is None
    assert [g.seq for g in store.glance(after_seq=first.seq, limit=1)] == [sample.seq]
    assert [e.seq for e in store.read_raw_at([bare.seq, first.seq, 99])] == [first.seq, bare.seq]


def test_migration_0012_makes_advisor_ship_take_ranges_and_its_downgrade_undoes_it(
    tmp_path: Path, seed_journal: Path, pg_url: str, opener: Callable[[str], EventStore]
) -> None:
    """Both texts of `advisor_ship` are PostgreSQL's to run: after a downgrade to 0011 the
    function refuses a range (it does not follow the chain seq by seq); upgraded again, it
    takes it."""
    host = seed_on_host(tmp_path, seed_journal, HOST)
    central = opener(pg_url)
    ship(host, central, HOST)
    host.append([_line(i, OK.format(i=i)) for i in range(4)])
    at = central_position(central, HOST)
    digest = _digest(host, at.seq, at.hash or GENESIS_HASH)
    _downgrade(pg_url, "0011")
    with pytest.raises(IntegrityError, match="does not follow"):
        writer_for(central).ship(HOST, [digest], at)
    engine = create_engine(pg_url)
    try:
        assert upgrade_schema(engine) == "0014"
    finally:
        engine.dispose()
    assert writer_for(central).ship(HOST, [digest], at) == (1, 0)
    assert verify_host(central, f"ship:{HOST}").ok
    host.close()


TGI_SUCCESS = (
    "2026-02-20T21:00:01.000000Z  INFO generate{parameters=GenerateParameters { best_of: None, "
    "temperature: Some(0.7), repetition_penalty: None, frequency_penalty: None, top_k: None, "
    "top_p: Some(0.95), typical_p: None, do_sample: true, max_new_tokens: Some(512), "
    "return_full_text: None, stop: [], truncate: None, watermark: false, details: false, "
    "decoder_input_details: false, seed: None, top_n_tokens: None, grammar: None, adapter_id: "
    'None } total_time="1.36s" validation_time="210µs" queue_time="51µs" inference_time='
    '"1.36s" time_per_token="68ms" seed="None"}: text_generation_router::server: '
    "router/src/server.rs:511: Success"
)


def test_a_long_line_is_judged_on_all_of_it(
    tmp_path: Path, opener: Callable[[str], EventStore]
) -> None:
    """TGI's per-request `Success` comes after the request's parameters, past what a glance
    reads: such a line is read whole, and kept; a long line with no cue at all ships."""
    host = opener(f"sqlite:///{tmp_path / 'host.db'}")
    failed = TGI_SUCCESS.replace("Success", "Request failed during generation: Out of memory")
    host.append([_line(1, TGI_SUCCESS), _line(2, failed), _line(3, TGI_SUCCESS)])
    assert len(orjson.dumps(TGI_SUCCESS)) > 600
    central = opener(f"sqlite:///{tmp_path / 'central.db'}")
    report = ship(host, central, HOST, selection=Selection(held_every_s=0))
    assert report.held == 2
    rows = _central_rows(central)
    assert [(k, t) for k, t, _, _ in rows] == [(1, HELD_TYPE), (2, "log.recorded"), (3, HELD_TYPE)]
    assert "Request failed" in rows[1][2]


def test_retention_keeps_a_fleet_shipped_chain_checkable(
    tmp_path: Path, seed_journal: Path, pg_url: str, opener: Callable[[str], EventStore]
) -> None:
    """Partitions holding kept ranges are retained like any: the host's chain resumes at
    its anchor (a range's closing hash where one ends the retained part), and the host ships
    on after it."""
    central = opener(pg_url)
    with central.begin() as conn:  # a fresh store may choose its block size
        conn.execute(text("UPDATE advisor_partitioning SET block = 20"))
    host = _busy_host(tmp_path, seed_journal)
    ship(host, central, HOST, batch=50, selection=Selection(held_every_s=0))
    shipped = len(_central_rows(central))
    cutoff = time.time_ns() // 1000 + 1
    result = CliRunner().invoke(
        cli,
        [
            "retention",
            "--before",
            f"@{cutoff / 1e6:.6f}",
            "--to",
            str(tmp_path / "archive"),
            "--json",
            "--db",
            pg_url,
        ],
    )
    assert result.exit_code == 0, result.output
    retained = json.loads(result.output)
    assert retained and sum(r["events"] for r in retained) < shipped
    chain = verify_host(central, f"ship:{HOST}")
    assert chain.ok, chain
    host.append([_line(40_000 + i, OK.format(i=i)) for i in range(3)])
    host.append([_line(40_100, NOT_ROUTINE[0])])
    more = ship(host, central, HOST, selection=Selection(held_every_s=0))
    assert (more.shipped, more.held) == (2, 3)
    assert verify_host(central, f"ship:{HOST}").ok
    assert json.loads(CliRunner().invoke(cli, ["verify", "--json", "--db", pg_url]).output)["ok"]
    host.close()


def test_a_failed_round_judges_the_gpu_samples_again_from_what_arrived(
    tmp_path: Path, seed_journal: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The selection remembers the GPU samples it shipped, as of the batches the central
    store took: a batch refused (or lost) is judged again next round, so its samples ship
    then instead of being taken as shipped."""
    host = _busy_host(tmp_path, seed_journal)
    central = open_store(f"sqlite:///{tmp_path / 'central.db'}")
    real, calls = DirectWriter.ship, []

    def refuse_the_second(self: DirectWriter, *args: object) -> tuple[int, int]:
        calls.append(1)
        if len(calls) == 2:
            raise StoreError("the central store refused the batch")
        return real(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(DirectWriter, "ship", refuse_the_second)
    selection = Selection(held_every_s=0)
    try:
        with pytest.raises(StoreError, match="refused the batch"):
            ship(host, central, HOST, batch=97, selection=selection)
        ship(host, central, HOST, batch=97, selection=selection)
        shipped = {k for k, type_, _, _ in _central_rows(central) if type_ != HELD_TYPE}
        assert shipped == _expected_shipped(host)
        assert verify_host(central, f"ship:{HOST}").ok
    finally:
        central.close()
        host.close()
