"""Diagnosis does not depend on the order events arrive in: the same events ingested newer
half first, in any permutation of slices, or by concurrent ingesters of consecutive slices
give the runs and incidents (ids, lines, labels, statuses, counts) of the journal ingested in
order — on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import advisor.views.fold.projector as projections
from advisor.core.events import NewEvent, validate_batch
from advisor.core.payloads import LogRecorded
from advisor.execution.backends import DryRunBackend
from advisor.execution.decisions import plan_rows
from advisor.execution.run import Executor
from advisor.pipeline.auto import auto_once
from advisor.pipeline.processing import Processor
from advisor.planning.policy import Policy
from advisor.store import EventStore
from advisor.views.fold.keys import order_key
from advisor.views.fold.projector import Projector
from advisor.views.read.reading import read_rows
from ingest.journal import json_line_record
from ingest.nvidia_smi import ingest_nvidia_smi_file
from tests.conftest import SCENARIOS, advisor_argv

UNIT = "vllm-minimax-m25.service"
SEED = SCENARIOS / "seed-minimax-m25.journal.jsonl"
# The unit's history: the seed's sampler-OOM run ("oom") and its wedged stop ("wedge"), each
# copied with its own invocation, and runs that come up and stop cleanly ("up").
HISTORY = ("oom", "oom", "oom", "up", "wedge", "oom", "oom", "up", "oom")
BLOCK_US = 200_000_000
TABLES = ("runs", "incidents", "gpu_samples", "actions", "run_labels")


def _invocation(entry: dict[str, Any]) -> str | None:
    return entry.get("INVOCATION_ID", entry.get("_SYSTEMD_INVOCATION_ID"))


def history_journal(host: str = "gpu-node-07") -> list[dict[str, Any]]:
    """HISTORY as journal entries (`journalctl -o json`), in the journal's order: cursors
    numbered in it, times as the seed has them (not always ascending), shifted per block."""
    seed = [json.loads(line) for line in SEED.read_text().splitlines()]
    blocks = {
        "oom": [e for e in seed if _invocation(e) == _invocation(seed[0])],
        "wedge": [e for e in seed if _invocation(e) != _invocation(seed[0])],
    }
    base = int(seed[0]["__REALTIME_TIMESTAMP"])
    out: list[dict[str, Any]] = []
    for n, kind in enumerate(HISTORY):
        invocation = f"{n + 1:032x}"
        shift = n * BLOCK_US
        if kind == "up":
            entries = _up_run(base + shift, invocation)
        else:
            start = int(blocks[kind][0]["__REALTIME_TIMESTAMP"])
            entries = []
            for e in blocks[kind]:
                e = dict(e)
                e["__REALTIME_TIMESTAMP"] = str(
                    base + shift + int(e["__REALTIME_TIMESTAMP"]) - start
                )
                for key in ("INVOCATION_ID", "_SYSTEMD_INVOCATION_ID"):
                    if key in e:
                        e[key] = invocation
                entries.append(e)
        out.extend(entries)
    for i, e in enumerate(out):
        e["_HOSTNAME"] = host
        e["__CURSOR"] = f"s=5eed;i={0x4A000 + i:x};b={host}"  # the host's own events
    return out


def _up_run(t0: int, invocation: str) -> list[dict[str, Any]]:
    def pid1(dt: int, message: str) -> dict[str, Any]:
        return {
            "__REALTIME_TIMESTAMP": str(t0 + dt),
            "MESSAGE": message,
            "_PID": "1",
            "SYSLOG_IDENTIFIER": "systemd",
            "_TRANSPORT": "journal",
            "UNIT": UNIT,
            "INVOCATION_ID": invocation,
        }

    return [
        pid1(0, f"Started {UNIT} - vLLM."),
        {
            "__REALTIME_TIMESTAMP": str(t0 + 9_000_000),
            "_PID": "227612",
            "MESSAGE": "INFO:     Application startup complete.",
            "SYSLOG_IDENTIFIER": "vllm",
            "_TRANSPORT": "stdout",
            "_SYSTEMD_UNIT": UNIT,
            "_SYSTEMD_INVOCATION_ID": invocation,
        },
        pid1(60_000_000, f"Stopping {UNIT} - vLLM..."),
        pid1(62_000_000, f"{UNIT}: Deactivated successfully."),
        pid1(62_000_000, f"Stopped {UNIT} - vLLM."),
    ]


def events_of(entries: list[dict[str, Any]]) -> list[NewEvent]:
    records = [json_line_record(json.dumps(e).encode(), n) for n, e in enumerate(entries, 1)]
    return validate_batch([r.event for r in records if r.event is not None])


def summary(store: EventStore, host: str | None = None) -> dict[str, Any]:
    """What must not depend on the order: the runs (id, lines, label, outcome, incident), the
    incidents (id, status, runs, label, first and last run), and which of them has a plan.
    Ids without the host, so that stores of another host compare."""

    def bare(value: str | None) -> str | None:
        return None if value is None else value.split("/", 1)[1]

    incidents = [i for i in read_rows(store, "incidents", host=host) if i["status"] != "superseded"]
    current = {i["incident_id"] for i in incidents}
    return {
        "runs": [
            (bare(r["run_id"]), r["lines"], r["label"], r["outcome"], bare(r["incident_id"]))
            for r in read_rows(store, "runs", host=host)
        ],
        "incidents": [
            (
                bare(i["incident_id"]),
                i["status"],
                i["runs"],
                i["label"],
                bare(i["first_run_id"]),
                bare(i["last_run_id"]),
            )
            for i in incidents
        ],
        "plans": sorted(
            {
                bare(a["plan_id"])
                for a in read_rows(store, "actions", host=host)
                if a["incident_id"] in current
            }
        ),
        "proposed": sum(
            1 for a in read_rows(store, "actions", host=host) if a["incident_id"] in current
        ),
    }


def in_order(store: EventStore, events: list[NewEvent]) -> dict[str, Any]:
    store.append(events)
    Processor(store).run(final=True)
    return summary(
        store, events[0].payload.host if isinstance(events[0].payload, LogRecorded) else None
    )


def snapshot(store: EventStore) -> dict[str, list[dict[str, Any]]]:
    return {table: read_rows(store, table) for table in TABLES}


EXPECTED_INCIDENTS = [
    ("sampler_warmup_oom", "resolved", 3),
    ("wedged_stop", "resolved", 1),
    ("sampler_warmup_oom", "resolved", 2),
    ("sampler_warmup_oom", "open", 1),
]


def test_the_history_in_order_is_four_incidents_with_their_plans(
    store_url: str, opener: Callable[[str], EventStore]
) -> None:
    got = in_order(opener(store_url), events_of(history_journal()))
    assert len(got["runs"]) == len(HISTORY)
    assert [r[2] for r in got["runs"]] == ["sampler_warmup_oom"] * 3 + [
        "healthy",
        "wedged_stop",
    ] + ["sampler_warmup_oom"] * 2 + ["healthy", "sampler_warmup_oom"]
    assert [(i[3], i[1], i[2]) for i in got["incidents"]] == EXPECTED_INCIDENTS
    assert len(got["plans"]) == 4 and got["proposed"] == 22


def test_the_newer_half_first_gives_the_runs_and_incidents_in_order(
    store_url: str, opener: Callable[[str], EventStore]
) -> None:
    """Reproduces the issue: the newer half of a journal ingested (and diagnosed) before the
    older half split runs at the wrong places and left incidents and plans that in-order
    ingestion does not have."""
    store = opener(store_url)
    entries = history_journal()
    expected = in_order(store, events_of(history_journal("in-order")))
    half = len(entries) // 2
    for part in (entries[half:], entries[:half]):
        store.append(events_of(part))
        Processor(store).run(final=True)
    assert summary(store, "gpu-node-07") == expected
    # The newer half alone began with the tail of a run, which failed and had an incident and
    # a plan: with the older half that run is another (whole) one. The id stays, superseded.
    rows = read_rows(store, "incidents", host="gpu-node-07")
    superseded = [i for i in rows if i["status"] == "superseded"]
    runs = {r["run_id"]: r for r in read_rows(store, "runs", host="gpu-node-07")}
    assert superseded and all(plan_rows(store, i["incident_id"]) for i in superseded)
    for incident in superseded:
        run = runs.get(incident["incident_id"])
        assert incident["superseded_by"] == (None if run is None else run["incident_id"])
    before = snapshot(store)
    Projector(store).rebuild()
    assert snapshot(store) == before
    # Analytics and auto's history count incidents, not the superseded ids.
    from advisor.reports.stats import store_stats

    by_label = store_stats(store_url, host="gpu-node-07")["crashes_by_label"]
    counted = sum(int(row["incidents"]) for row in by_label)
    assert counted == len(rows) - len(superseded) == len(expected["incidents"])


def test_gpu_samples_before_or_after_the_lines_give_the_same_runs(
    store_url: str, opener: Callable[[str], EventStore], tmp_path: Path
) -> None:
    """GPU samples ingested before the lines, or after them (a run judged without its peak
    is judged again once the samples raise it): the same runs, peaks and labels."""
    store = opener(store_url)
    csv = SCENARIOS / "seed-minimax-m25.nvidia-smi.csv"
    store.append(events_of(history_journal("after")))
    Processor(store).run(final=True)
    ingest_nvidia_smi_file(store, csv, "after", tz="UTC")
    Processor(store).run(final=True)
    ingest_nvidia_smi_file(store, csv, "before", tz="UTC")
    entries = history_journal("before")
    half = len(entries) // 2
    for part in (entries[half:], entries[:half]):
        store.append(events_of(part))
        Processor(store).run(final=True)

    def peaks(host: str) -> list[tuple[Any, ...]]:
        return [
            (r["run_id"].split("/", 1)[1], r["peak_gpu_used_bytes"], r["label_stale"])
            for r in read_rows(store, "runs", host=host)
        ]

    assert summary(store, "before") == summary(store, "after")
    assert peaks("before") == peaks("after")
    assert any(used for _, used, _ in peaks("after"))


@settings(
    max_examples=10,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_runs_and_incidents_do_not_depend_on_the_order_of_slices(
    store_url: str, opener: Callable[[str], EventStore], data: st.DataObject
) -> None:
    """Slices of the journal appended in any order, folded (in chunks of any size) and
    diagnosed after each, end as the journal in order does."""
    store = _shared(store_url, opener)
    n = _examples.get(store_url, 0) + 1
    _examples[store_url] = n
    host = f"h{n}"
    entries = history_journal(host)
    cuts = sorted(data.draw(st.sets(st.integers(1, len(entries) - 1), min_size=1, max_size=5)))
    slices = [entries[a:b] for a, b in zip([0, *cuts], [*cuts, len(entries)], strict=True)]
    order = data.draw(st.permutations(range(len(slices))))
    finals = data.draw(st.lists(st.booleans(), min_size=len(slices), max_size=len(slices)))
    chunk = data.draw(st.sampled_from([7, 40, 5000]))
    processor = Processor(store)
    with mock.patch.object(projections, "CHUNK", chunk):
        for i, final in zip(order, finals, strict=True):
            store.append(events_of(slices[i]))
            processor.run(final=final)
        processor.run(final=True)
    assert summary(store, host) == _reference(store_url, store)
    assert read_rows(store, "fold_pending") == []  # every re-derivation settled


_stores: dict[str, EventStore] = {}
_examples: dict[str, int] = {}
_references: dict[str, dict[str, Any]] = {}


def _shared(url: str, opener: Callable[[str], EventStore]) -> EventStore:
    """One store for all of a test's examples (each its own host): a fresh store per
    example would be mostly schema creation."""
    if url not in _stores:
        _stores.clear()
        _examples.clear()
        _references.clear()
        _stores[url] = opener(url)
    return _stores[url]


def _reference(url: str, store: EventStore) -> dict[str, Any]:
    if url not in _references:
        _references[url] = in_order(store, events_of(history_journal("reference")))
    return _references[url]


def test_four_concurrent_ingesters_of_consecutive_slices(
    store_url: str, opener: Callable[[str], EventStore], tmp_path: Path
) -> None:
    """`advisor ingest journal` as four processes at once on one store, each a consecutive
    slice of the journal (the newest started first): the journal's runs and incidents."""
    entries = history_journal()
    quarter = -(-len(entries) // 4)
    files = []
    for i in range(4):
        path = tmp_path / f"slice{i}.jsonl"
        path.write_text(
            "".join(json.dumps(e) + "\n" for e in entries[i * quarter : (i + 1) * quarter])
        )
        files.append(path)
    store = opener(store_url)  # created (migrated) before the ingesters start
    procs = []
    for path in reversed(files):
        procs.append(
            subprocess.Popen(
                advisor_argv("ingest", "journal", "--file", str(path), "--db", store_url),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        )
        time.sleep(0.05)
    for proc in procs:
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    expected = in_order(store, events_of(history_journal("in-order")))
    assert summary(store, "gpu-node-07") == expected


def test_a_superseded_incident_is_not_acted_on(
    sqlite_url: str, opener: Callable[[str], EventStore]
) -> None:
    """A plan made for an incident the older lines then showed to be a recurrence: `auto`
    leaves it, and to the executor its incident is not open (its steps are stale)."""
    store = opener(sqlite_url)
    entries = history_journal()
    first_up = next(i for i, e in enumerate(entries) if "startup complete" in e["MESSAGE"])
    loop = entries[:first_up]  # three failed runs of the restart loop
    third = next(i for i, e in enumerate(loop) if _invocation(e) == f"{3:032x}")
    store.append(events_of(loop[third:]))
    Processor(store).run(final=True)
    (early,) = read_rows(store, "incidents")
    assert early["status"] == "open" and plan_rows(store, early["incident_id"])
    store.append(events_of(loop[:third]))
    Processor(store).run(final=True)
    rows = {i["incident_id"]: i for i in read_rows(store, "incidents")}
    (current,) = [i for i in rows.values() if i["status"] != "superseded"]
    assert current["runs"] == 3 and current["incident_id"] != early["incident_id"]
    assert rows[early["incident_id"]]["status"] == "superseded"
    assert rows[early["incident_id"]]["superseded_by"] == current["incident_id"]
    report = auto_once(store, None, Policy(), "test")
    assert early["incident_id"] not in report.would + report.applied + list(report.left)
    step = plan_rows(store, early["incident_id"])[0]
    assert not Executor(store, DryRunBackend())._context(step).incident_open


def test_lines_of_one_microsecond_keep_the_journals_order() -> None:
    def line(cursor: str | None = None, line_no: int | None = None) -> LogRecorded:
        return LogRecorded(origin="journald", message="x", cursor=cursor, line_no=line_no)

    same_time = [order_key(5, line(cursor=f"s=1;i={i:x};b=0")) for i in (9, 10, 255, 4096)]
    assert same_time == sorted(same_time)
    assert order_key(4, line(cursor="s=1;i=ffff")) < order_key(5, line(cursor="s=1;i=1"))
    assert order_key(5, line(line_no=2)) < order_key(5, line(line_no=10))
    assert order_key(5, line()) == order_key(5, line())  # the same line, in any store


@pytest.fixture(autouse=True)
def _forget_shared_stores() -> Any:
    yield
    _stores.clear()
