"""Live follow's commits (ingest.follow): a quiet stream is committed at once, a flowing one
while it flows and in batches, each batch with its checkpoint. No timing is asserted: the
record source waits on the commits it expects, with generous limits."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from advisor.core.events import Prepared
from advisor.core.records import Record
from advisor.store.types import AppendResult, Checkpoint
from ingest.follow import Reader, Timing, flush_on_idle
from ingest.journal import json_line_record
from tests.journal_fixtures import entry, json_line
from tests.waiting import wait

PATIENCE_S = 30.0


@dataclass
class Commits:
    """A sink standing in for the store: each transaction's events and checkpoint."""

    batches: list[tuple[int, str | None]] = field(default_factory=list)
    happened: threading.Event = field(default_factory=threading.Event)

    def __call__(self, events: list[Prepared], cp: Checkpoint | None) -> AppendResult:
        self.batches.append((len(events), None if cp is None else cp.position["cursor"]))
        self.happened.set()
        return AppendResult(appended=len(events))

    @property
    def stored(self) -> int:
        return sum(n for n, _ in self.batches)


def record(i: int) -> Record:
    return json_line_record(json_line(entry(i, f"line {i}")), i, position={"cursor": f"c{i}"})


def reader(commits: Commits, batch_size: int = 2500) -> Reader:
    return Reader(None, "follow", checkpoint="follow", batch_size=batch_size, sink=commits)


def test_a_record_is_committed_when_the_stream_goes_quiet_before_more_comes() -> None:
    commits = Commits()
    committed_first: list[bool] = []

    def records() -> Iterator[Record]:
        yield record(0)
        committed_first.append(commits.happened.wait(PATIENCE_S))  # the stream is quiet
        yield record(1)

    flush_on_idle(reader(commits), records())
    assert committed_first == [True]
    assert commits.batches[0] == (1, "c0")  # the record and its position, together
    assert commits.stored == 2
    assert commits.batches[-1][1] == "c1"


def test_a_flowing_stream_is_committed_while_it_flows() -> None:
    """Entries that keep coming, never pausing long, are committed before they stop (and
    before a batch fills): a busy service's crash is not held back by its own chatter."""
    commits = Commits()
    produced: list[int] = []

    def records() -> Iterator[Record]:
        deadline = time.monotonic() + PATIENCE_S
        i = 0
        while not commits.happened.is_set() and time.monotonic() < deadline:
            yield record(i)
            i += 1
            time.sleep(0.001)
        produced.append(i)
        flowing.append(commits.happened.is_set())

    flowing: list[bool] = []
    flush_on_idle(reader(commits, batch_size=1_000_000), records())
    assert flowing == [True], "nothing was committed until the stream ended"
    first, cursor = commits.batches[0]
    assert 0 < first <= produced[0]
    assert cursor == f"c{first - 1}"  # each batch commits the position of its last record
    assert commits.stored == produced[0]


def test_a_burst_is_committed_in_a_few_transactions_not_one_a_line() -> None:
    commits = Commits()
    burst = [record(i) for i in range(3000)]
    flush_on_idle(reader(commits), iter(burst))
    assert commits.stored == 3000
    assert len(commits.batches) <= 3000 // 30, commits.batches
    ends = [cursor for n, cursor in commits.batches if n]
    assert ends[-1] == "c2999"
    assert ends == sorted(ends, key=lambda c: int(c[1:]))


def test_the_reader_s_failure_is_raised_after_what_came_is_committed() -> None:
    commits = Commits()

    def records() -> Iterator[Record]:
        yield record(0)
        raise OSError("journalctl went away")

    with pytest.raises(OSError, match="went away"):
        flush_on_idle(reader(commits), records())
    assert commits.stored == 1


def test_a_stop_ends_the_follow_between_records_and_commits_what_came() -> None:
    """SIGTERM's way (`stop` set): the loop returns although journalctl would go on, with
    what it read committed; nothing raised into it mid-commit."""
    commits, stop, never = Commits(), threading.Event(), threading.Event()

    def records() -> Iterator[Record]:
        yield from (record(i) for i in range(3))
        never.wait(PATIENCE_S)  # a live journal with nothing more to say
        yield record(3)

    done = threading.Event()
    follower = threading.Thread(
        target=lambda: (flush_on_idle(reader(commits), records(), stop=stop), done.set())
    )
    follower.start()
    assert commits.happened.wait(PATIENCE_S)  # the three came and were committed
    stop.set()
    assert done.wait(PATIENCE_S / 2), "the follower did not stop while its source was silent"
    follower.join()
    assert commits.stored == 3 and commits.batches[-1][1] == "c2"


@dataclass
class Ticking:
    """A selection that keeps every entry and counts its ticks."""

    name: str = "all"
    ticks: int = 0

    def keep(self, event: Mapping[str, Any]) -> bool:
        return True

    def tick(self) -> None:
        self.ticks += 1


def test_routine_entries_wait_for_company_and_an_urgent_one_commits_them_at_once() -> None:
    """With `urgent`, routine entries are not committed when the stream pauses (they wait
    up to `routine_wait_s`, here an hour), while the selection goes on ticking; the first
    urgent one commits them all at once. (Each tick is a time-out of the follower's wait,
    after which a follower that commits routine entries on a pause would have.)"""
    commits, selection = Commits(), Ticking()
    seen: list[int] = []

    def records() -> Iterator[Record]:
        yield record(0)
        yield record(1)
        wait("three ticks with the routine entries pending", lambda: selection.ticks >= 3)
        seen.append(len(commits.batches))
        yield record(2)  # urgent
        seen.append(int(commits.happened.wait(PATIENCE_S)))
        yield record(3)

    def urgent(event: Mapping[str, Any]) -> bool:
        return str(event["payload"]["message"]) == "line 2"

    timing = Timing(routine_wait_s=3600.0, tick_s=0.01)
    flush_on_idle(reader(commits), records(), selection, timing, urgent=urgent)
    assert seen == [0, 1]
    assert commits.batches[0] == (3, "c2")  # the routine two and the urgent one, together
    assert commits.stored == 4


def test_routine_entries_are_committed_once_the_oldest_has_waited() -> None:
    commits = Commits()
    committed: list[bool] = []

    def records() -> Iterator[Record]:
        yield record(0)
        committed.append(commits.happened.wait(PATIENCE_S))  # no urgent entry comes
        yield record(1)

    timing = Timing(routine_wait_s=0.05)
    flush_on_idle(reader(commits), records(), timing=timing, urgent=lambda _event: False)
    assert committed == [True]
    assert commits.batches[0] == (1, "c0")
