"""A run's lines parsed once (`diagnosis.held`): the diagnoser judges the lines the fold handed
it as it cut them, instead of reading the run's lines back from the store, and says the same
— whole inputs and inputs arriving in slices, on SQLite and PostgreSQL; a run whose lines this
process did not fold all, or one with kernel lines in its window, is read back; what a write
transaction handed over counts only once it committed; the held lines keep to their budget."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from advisor.core.events import NewEvent
from advisor.diagnosis.held import HELD_LINES, HeldLines
from advisor.diagnosis.rules import load_rules
from advisor.diagnosis.stream import HEAD
from advisor.parsing.lines import LogLine
from advisor.parsing.parsed import parse
from advisor.pipeline.processing import Processor
from advisor.store import EventStore
from advisor.views.fold.projector import Projector
from advisor.views.fold.sink import Line
from advisor.views.read.reading import read_rows
from advisor.views.read.rows import RunView
from tests.views.test_order_independence import events_of, history_journal

Opener = Callable[[str], EventStore]


def _diagnosis(store: EventStore) -> list[dict[str, Any]]:
    """What the diagnoser and the planner wrote (their events' source: `diagnosis`), in the
    order written, and the runs' labels."""
    said = [e.payload.model_dump(mode="json") for e in store.read() if e.source == "diagnosis"]
    runs = [
        (r["run_id"], r["lines"], r["label"], r["confidence"]) for r in read_rows(store, "runs")
    ]
    return [*said, {"runs": runs}]


def _slices(events: list[NewEvent], size: int) -> Iterator[list[NewEvent]]:
    for i in range(0, len(events), size):
        yield events[i : i + size]


def _processed(store: EventStore, events: list[NewEvent], size: int, held: int) -> Processor:
    """`events` appended `size` at a time, each slice diagnosed as `watch` does, then the
    input finished as `ingest` does."""
    processor = Processor(store, held_lines=held)
    for part in _slices(events, size):
        store.append(part)
        processor.run(final=False)
    processor.run(final=True)
    return processor


@pytest.mark.parametrize("size", [10_000, 37, 5])
def test_held_lines_judge_as_lines_read_back(
    size: int, store_url: str, sqlite_url: str, tmp_path: Path, opener: Opener
) -> None:
    """The unit's history (sampler OOMs, a wedged stop, runs that come up), whole and in
    slices: every run judged from the fold's lines, the same events as read back."""
    events = events_of(history_journal())
    held_store = opener(store_url)
    held = _processed(held_store, events, size, HELD_LINES)
    read_store = opener(f"sqlite:///{tmp_path / 'read.db'}")
    read = _processed(read_store, events, size, 0)
    assert read.diagnoser.judged_from["held"] == 0
    assert held.diagnoser.judged_from["read"] == 0
    assert held.diagnoser.judged_from["held"] == read.diagnoser.judged_from["read"] >= 9
    assert _diagnosis(held_store) == _diagnosis(read_store)


def test_a_run_another_process_folded_part_of_is_read_back(
    sqlite_url: str, tmp_path: Path, opener: Opener
) -> None:
    """Process A folds the first part of the history, another folder the next few lines, A
    the rest: the run the other folder saw lines of is read back by A, the others are A's
    own; all judged as a reader that reads every run back judges them."""
    events = events_of(history_journal())
    cut = len(events) // 2

    def diagnosed(url: str, held: int) -> Processor:
        store = opener(url)
        a = Processor(store, held_lines=held)
        store.append(events[:cut])
        a.run(final=False)
        store.append(events[cut : cut + 3])
        Projector(opener(url)).catch_up()  # another process's fold: A holds none of these
        store.append(events[cut + 3 :])
        a.run(final=True)
        return a

    a = diagnosed(sqlite_url, HELD_LINES)
    assert a.diagnoser.judged_from["read"] >= 1 and a.diagnoser.judged_from["held"] >= 1
    reference_url = f"sqlite:///{tmp_path / 'ref.db'}"
    assert diagnosed(reference_url, 0).diagnoser.judged_from["held"] == 0
    assert _diagnosis(opener(sqlite_url)) == _diagnosis(opener(reference_url))


def _kernel_entry(entries: list[dict[str, Any]], after_us: int, n: int) -> dict[str, Any]:
    return {
        "__REALTIME_TIMESTAMP": str(int(entries[0]["__REALTIME_TIMESTAMP"]) + after_us),
        "MESSAGE": f"NVRM: Xid (PCI:0000:1b:00): 79, pid={227612 + n}, GPU has fallen off the bus.",
        "_TRANSPORT": "kernel",
        "SYSLOG_IDENTIFIER": "kernel",
        "_HOSTNAME": entries[0]["_HOSTNAME"],
        "__CURSOR": f"s=5eed;i={n};b=kernel",
    }


@pytest.mark.parametrize("late", [False, True])
def test_runs_are_judged_with_the_hosts_kernel_lines(
    late: bool, sqlite_url: str, tmp_path: Path, opener: Opener
) -> None:
    """The host's kernel lines join a run's lines by time when it is judged: held with the
    run's when they come in order (here an Xid inside the first run, and one a second after
    another run's start); one that comes after the run was folded past it sends that run
    back to the store. Either way the diagnosis is the read-back's."""
    entries = history_journal()
    kernel = [_kernel_entry(entries, 1_000_000, 1), _kernel_entry(entries, 601_000_000, 2)]
    events = events_of(sorted([*entries, *kernel], key=lambda e: int(e["__REALTIME_TIMESTAMP"])))
    if late:  # the first Xid arrives three slices after its time, before its run ends
        first = events_of(kernel[:1])[0]
        events = [e for e in events if e.key != first.key]
        events.insert(35, first)
    store = opener(sqlite_url)
    processor = _processed(store, events, 10, HELD_LINES)
    judged = processor.diagnoser.judged_from
    assert judged["read"] == (1 if late else 0) and judged["held"] >= 8
    reference = opener(f"sqlite:///{tmp_path / 'ref.db'}")
    _processed(reference, events, 10, 0)
    assert _diagnosis(store) == _diagnosis(reference)


# -- HeldLines alone ---------------------------------------------------------------------


def _line(key: str, text: str = "INFO 01-01 00:00:00 [api_server.py:1] line") -> Line:
    """A line at place `key` (its time: the key's digits, as seconds)."""
    seq = int("".join(c for c in key if c.isdigit()) or 0)
    parsed = parse([LogLine(number=seq, text=f"{text} {key}")])[0]
    return Line(key, seq, seq * 1_000_000, None, parsed, None)


def _row(run_id: str, first_key: str, last_key: str, lines: int) -> RunView:
    return RunView.from_row(
        {
            "run_id": run_id,
            "stream": "h/u",
            "host": "h",
            "unit": "u",
            "invocation_id": None,
            "first_seq": 1,
            "last_seq": lines,
            "started_us": 1,
            "ended_us": None,
            "lines": lines,
            "engine": None,
            "phases": "[]",
            "last_phase": None,
            "ready_us": None,
            "stop_us": None,
            "config": "{}",
            "exit_code": None,
            "exit_signal": None,
            "unit_result": None,
            "restart_count": None,
            "stop_timed_out": False,
            "ended": False,
            "died": False,
            "outcome": "starting",
            "peak_gpu_used_bytes": None,
            "peak_gpu_total_bytes": None,
            "label": None,
            "confidence": None,
            "incident_id": None,
            "peak_gpu_from_unit": None,
            "first_key": first_key,
            "last_key": last_key,
            "last_us": 1,
            "content": None,
            "lifecycle": None,
            "label_stale": None,
            "label_seq": None,
        }
    )


@pytest.fixture(scope="module")
def rules() -> Any:
    return load_rules()


class _RolledBack(Exception):
    pass


def _hand(
    held: HeldLines,
    *lines: tuple[Any, ...],
    kernel: tuple[tuple[str, str], ...] = (),
    fails: bool = False,
) -> None:
    """One fold's write transaction: the chunk's kernel lines ((host, key)), then its runs'
    lines ((run_id, begins, key[, ended_us])); `fails`: it rolls back."""
    with contextlib.suppress(_RolledBack), held.handing():
        for host, key in kernel:
            held.kernel(host, _line(key))
        for run_id, begins, key, *ended in lines:
            held.line(run_id, begins, _line(key), ended[0] if ended else None)
        if fails:
            raise _RolledBack


def _take(held: HeldLines, row: RunView, kernel: tuple[int, ...] = ()) -> Any:
    with held.judging(row, list(kernel)) as judging:
        return judging


def test_what_a_transaction_handed_counts_once_committed(rules: Any) -> None:
    held = HeldLines(rules)
    _hand(held, ("r", True, "k1"), ("r", False, "k2"), fails=True)
    assert _take(held, _row("r", "k1", "k2", 2)) is None
    _hand(held, ("r", True, "k1"), ("r", False, "k2"))
    _hand(held, ("r", False, "k3"), fails=True)  # the next chunk's, rolled back
    judging = _take(held, _row("r", "k1", "k2", 2))
    assert judging is not None and judging.total == 2
    _hand(held, ("r", False, "k3"))  # a line after the run was judged: it goes on
    assert _take(held, _row("r", "k1", "k2", 2)) is None
    judging = _take(held, _row("r", "k1", "k3", 3))
    assert judging is not None and judging.total == 3


def test_a_state_is_used_only_for_exactly_the_rows_lines(rules: Any) -> None:
    held = HeldLines(rules)
    _hand(
        held,
        *((run_id, True, "k1") for run_id in "abcd"),
        *((run_id, False, "k2") for run_id in "abcd"),
        ("x", False, "k9"),  # a run begun before this process: not held
    )
    assert _take(held, _row("x", "k1", "k9", 1)) is None
    assert _take(held, _row("a", "k1", "k2", 3)) is None  # a line folded elsewhere
    assert _take(held, _row("b", "k0", "k2", 2)) is None  # another first line
    assert _take(held, _row("c", "k1", "k3", 2)) is None  # another last line
    assert _take(held, _row("d", "k1", "k2", 2)) is not None
    _hand(held, ("e", True, "k5"))
    _hand(held, ("e", False, "k4"))  # before what it holds: not the run's order
    assert _take(held, _row("e", "k5", "k5", 1)) is None


def test_a_run_cut_again_or_dropped_starts_over(rules: Any) -> None:
    held = HeldLines(rules)
    _hand(held, ("r", True, "k1"), ("r", False, "k3"))
    # re-derived: an older line came between
    _hand(held, ("r", True, "k1"), ("r", False, "k2"), ("r", False, "k3"))
    judging = _take(held, _row("r", "k1", "k3", 3))
    assert judging is not None and judging.total == 3
    _hand(held, ("s", True, "k1"))
    with held.handing():
        held.dropped("s")
    assert _take(held, _row("s", "k1", "k1", 1)) is None


def test_a_line_the_state_cannot_take_lets_it_go(rules: Any) -> None:
    """The sink never raises into the fold: a line its bookkeeping refuses lets the run's
    state go (the run is read back, where judging it says what is wrong)."""
    held = HeldLines(rules)
    _hand(held, ("r", True, "k1"))
    with held.handing():
        held.line("r", False, _line("k2")._replace(parsed=None), None)  # type: ignore[arg-type]
    assert _take(held, _row("r", "k1", "k2", 2)) is None
    assert _take(held, _row("r", "k1", "k1", 1)) is None
    with held.handing():
        held.line("s", True, _line("k1")._replace(parsed=None), None)  # type: ignore[arg-type]
        held.line("s", False, _line("k2"), None)
    assert len(held) == 0


def test_the_held_lines_keep_to_their_budget(rules: Any) -> None:
    """Each state keeps what a streamed run keeps (bounded), and all of them at most the
    budget, the states fed least recently let go first — also inside one transaction (a
    re-derivation of many runs)."""
    held = HeldLines(rules, budget=HEAD)
    _hand(
        held,
        *(("old" if n < HEAD else "new", n % HEAD == 0, f"{n:08d}") for n in range(2 * HEAD)),
    )
    assert len(held) == 1
    assert _take(held, _row("old", "00000000", f"{HEAD - 1:08d}", HEAD)) is None
    assert _take(held, _row("new", f"{HEAD:08d}", f"{2 * HEAD - 1:08d}", HEAD)) is not None
    small = HeldLines(rules, budget=100)
    _hand(
        small,
        *(
            (f"r{i}", suffix == "", f"{i:03d}{suffix}")
            for i in range(50)
            for suffix in ("", "x", "y")
        ),
    )
    assert 0 < len(small) <= 100 // 3
    assert _take(small, _row("r49", "049", "049y", 3)) is not None
    assert _take(small, _row("r0", "000", "000y", 3)) is None


def test_kernel_lines_are_held_in_the_runs_order_and_window(rules: Any) -> None:
    """A run is judged with its host's kernel lines from 5 s before its first line to 5 s
    after its end, merged in order: those before it from earlier chunks, those of its own
    chunks between its lines; it is used only for exactly the kernel lines the store has."""
    held = HeldLines(rules)
    # more than 5 s before the run; within 5 s before its first line
    _hand(held, kernel=(("h", "k002"), ("h", "k007")))
    _hand(
        held,
        ("h/u@10", True, "k010"),
        ("h/u@10", False, "k015"),
        ("h/u@10", False, "k020", 20_000_000),  # it ends
        # between its lines; 10 s after its end; within 5 s after; another host's
        kernel=(("h", "k012"), ("h", "k030"), ("h", "k022"), ("other", "k011")),
    )
    row = _row("h/u@10", "k010", "k020", 3)
    assert _take(held, row, (7, 12)) is None  # the store has another in its window
    judging = _take(held, row, (22, 12, 7))
    assert judging is not None and judging.total == 6
    assert [p.line.number for p in judging.kept.lines.values()] == [7, 10, 12, 15, 20, 22]
    _hand(held, kernel=(("h", "k013"),))  # one that came late, among the lines it holds
    assert _take(held, row, (7, 12, 13, 22)) is None


def test_every_fold_of_the_store_in_the_process_hands_its_lines_over(
    sqlite_url: str, tmp_path: Path, opener: Opener
) -> None:
    """A fold the executor or `auto` runs (a `Projector` of their own) between the
    diagnoser's passes hands its lines to the diagnoser's sink too: the run they folded
    lines of is still judged from held lines."""
    events = events_of(history_journal())
    store = opener(sqlite_url)
    processor = Processor(store)
    for part in _slices(events, 10):
        store.append(part)
        Projector(store).catch_up()  # another fold of the store in this process first
        processor.run(final=False)
    processor.run(final=True)
    assert processor.diagnoser.judged_from["read"] == 0
    assert processor.diagnoser.judged_from["held"] >= 9
