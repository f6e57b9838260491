"""The fold's parsed lines, held for the diagnoser: a run's lines are parsed once.

The fold parses every log line to cut runs (`views.fold.cutting`). As it puts a line into a
run it hands it here (`LineSink`), with the host's kernel lines, and the run's `RunJudging`
keeps what judging the run will read: its own lines and the host's kernel lines within
`KERNEL_MARGIN_US` of its window, in the stream's order, as a streamed run keeps them
(`diagnosis.stream`). When the run is to be judged, `Diagnoser` takes its state instead of
reading the run's lines back from the store and parsing them again.

What is handed over in a write transaction is staged, and joins the held states only when the
transaction committed (`handing`); one that rolled back, or is retried, leaves them as they
were. Every fold of the store in the process hands its lines over (`Projector` finds the
sink by store: the executor's and `auto`'s folds too), one at a time: a lock is held from
before the fold's write transaction to after its lines joined, and while a run is judged.

A run cut again from its first line (a re-derivation, a run cut anew) starts a new state;
lines added to a run this process holds nothing of (folded before it started, or its state
let go) are not held. A state is used only when it holds exactly the lines a read-back
would: the same first and last own line in the stream's order, as many, and the same kernel
lines as the store holds in the run's window. So a run another process folded part of, a
kernel line that came late, a line the state could not take (its bookkeeping raised: judging
the run read back says what is wrong), or a state that missed a line for any other reason
sends the run back to the store, as before.

Memory: each state is bounded (`stream.HEAD` + marked + tail lines, whatever the run's
length); all of them together hold at most `budget` lines (`HELD_LINES` by default, ~2.3 KB a
line of a busy vLLM journal: ~45 MB), the states fed least recently let go first: a run still
serving is fed all the time, one that ended lets go of its place as others are fed.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Final

from advisor.diagnosis.rules import RuleSet
from advisor.diagnosis.stream import RunJudging
from advisor.views.fold.sink import Line
from advisor.views.fold.skipped import environmental
from advisor.views.read.reading import KERNEL_MARGIN_US
from advisor.views.read.rows import RunView

HELD_LINES: Final = 20_000
KERNEL_HELD: Final = 10_000  # a state with more kernel lines in its window is read back


def _place(line: Line) -> tuple[str, int]:
    return line.key, line.seq


class _Kernel:
    """One host's kernel lines of a chunk, in order."""

    def __init__(self) -> None:
        self.lines: list[Line] = []
        self._places: list[tuple[str, int]] | None = None

    def add(self, line: Line) -> None:
        self.lines.append(line)
        self._places = None

    def between(self, after: tuple[str, int], before: tuple[str, int] | None) -> list[Line]:
        """Its lines after place `after` and before place `before` (None: all after)."""
        if self._places is None:
            self.lines.sort(key=_place)
            self._places = [_place(line) for line in self.lines]
        start = bisect_right(self._places, after)
        end = len(self.lines) if before is None else bisect_left(self._places, before)
        return self.lines[start:end]


@dataclass
class _Held:
    """One run's state, and where its lines stand in the stream's order."""

    judging: RunJudging
    host: str
    first_key: str
    first_us: int
    last_key: str = ""
    lines: int = 0
    ended_us: int | None = None
    fed: tuple[str, int] = ("", -1)  # the place of the latest line fed, its own or kernel
    kernel: list[int] = field(default_factory=list)  # seqs of the kernel lines fed

    def own(self, line: Line, ended_us: int | None) -> None:
        self.judging.feed(line.parsed)
        self.last_key, self.fed, self.ended_us = line.key, _place(line), ended_us
        self.lines += 1

    def kernel_lines(self, lines: Sequence[Line]) -> None:
        """Those of `lines` (a host's kernel lines after what it holds) in its window."""
        if self.kernel and self.kernel[-1] < 0:
            return  # it could not hold one already: the read-back will do
        for line in lines:
            if line.time_us < self.first_us - KERNEL_MARGIN_US:
                continue
            if self.ended_us is not None and line.time_us >= self.ended_us + KERNEL_MARGIN_US:
                return
            if len(self.kernel) >= KERNEL_HELD or _place(line) <= self.fed:
                self.kernel.append(-1)  # (it cannot hold that: the read-back will do)
                return
            self.judging.feed(line.parsed)
            self.kernel.append(line.seq)
            self.fed = _place(line)

    def catch_up(self, kernel: _Kernel | None, before: Line | None) -> None:
        """The host's kernel lines of this chunk between what it holds and `before`."""
        if kernel is not None:
            self.kernel_lines(kernel.between(self.fed, None if before is None else _place(before)))


@dataclass
class _Staged:
    """What one write transaction handed over: runs cut from their first line (fed as they
    come: bounded), lines added to runs begun before it (a chunk's at most), the chunk's
    kernel lines by host."""

    begun: dict[str, _Held] = field(default_factory=dict)
    added: dict[str, list[tuple[Line, int | None]]] = field(default_factory=dict)
    dropped: set[str] = field(default_factory=set)
    kernel: dict[str, _Kernel] = field(default_factory=dict)
    fed: int = 0  # lines fed to `begun` since their sizes were last added up


class HeldLines:
    """The `views.fold` `LineSink` that keeps runs' lines for judging (see the module)."""

    def __init__(self, rules: RuleSet, budget: int = HELD_LINES) -> None:
        self.rules = rules
        self.budget = budget
        self._watch = RunJudging.watch_of(rules)
        self._held: OrderedDict[str, _Held] = OrderedDict()
        self._staged = _Staged()
        self._lock = threading.RLock()
        # each host's latest kernel lines (`KERNEL_MARGIN_US` before its newest line): the
        # first lines of a run that starts in the next chunk are judged with them
        self._recent: dict[str, list[Line]] = {}

    # -- the fold's side (`views.fold.foldbase.LineSink`) ------------------------------
    @contextmanager
    def handing(self) -> Iterator[None]:
        with self._lock:
            self._staged = _Staged()
            try:
                yield
            except BaseException:
                self._staged = _Staged()
                raise
            self._commit()

    def kernel(self, host: str, line: Line) -> None:
        self._staged.kernel.setdefault(host, _Kernel()).add(line)

    def line(self, run_id: str, begins: bool, line: Line, ended_us: int | None) -> None:
        staged = self._staged
        try:
            if begins:
                staged.added.pop(run_id, None)
                staged.dropped.discard(run_id)
                host = run_id.partition("/")[0]
                state = _Held(RunJudging(self.rules, self._watch), host, line.key, line.time_us)
                staged.begun[run_id] = state
                state.kernel_lines(
                    [k for k in self._recent.get(host, ()) if _place(k) < _place(line)]
                )
            held = staged.begun.get(run_id)
            if held is not None:
                held.catch_up(staged.kernel.get(held.host), line)
                held.own(line, ended_us)
                staged.fed += 1
                if staged.fed > self.budget:  # a re-derivation of many runs: the budget holds
                    staged.fed = _fit(staged.begun, self.budget // 2, staged.dropped)
            elif run_id not in staged.dropped:
                staged.added.setdefault(run_id, []).append((line, ended_us))
        except Exception as e:
            if environmental(e):
                raise
            self.dropped(run_id)  # it cannot take the line: the run is read back

    def dropped(self, run_id: str) -> None:
        staged = self._staged
        staged.begun.pop(run_id, None)
        staged.added.pop(run_id, None)
        staged.dropped.add(run_id)

    def _commit(self) -> None:
        staged, held = self._staged, self._held
        self._staged = _Staged()
        for run_id in staged.dropped:
            held.pop(run_id, None)
        for run_id, lines in staged.added.items():
            state = held.get(run_id)
            if state is not None and not _extended(state, lines, staged.kernel.get(state.host)):
                del held[run_id]
            elif state is not None:
                held.move_to_end(run_id)
        for run_id, state in staged.begun.items():
            held[run_id] = state
            held.move_to_end(run_id)
        if staged.kernel:  # the kernel lines after each run's latest line
            for run_id, state in list(held.items()):
                if not _extended(state, [], staged.kernel.get(state.host)):
                    del held[run_id]
            self._remember(staged.kernel)
        _fit(held, self.budget, set())

    def _remember(self, kernel: dict[str, _Kernel]) -> None:
        for host, lines in kernel.items():
            recent = [*self._recent.get(host, ()), *lines.between(("", -1), None)]
            newest = max(line.time_us for line in recent)
            self._recent[host] = [k for k in recent if k.time_us >= newest - KERNEL_MARGIN_US][
                -KERNEL_HELD:
            ]

    # -- the diagnoser's side ----------------------------------------------------------
    @contextmanager
    def judging(self, run: RunView, kernel: Sequence[int]) -> Iterator[RunJudging | None]:
        """`run`'s state, held still while the caller judges it (no fold feeds it
        meanwhile), when it holds exactly the lines a read-back would — the row's own lines
        and the kernel lines `kernel` (their seqs); else None (the run is then read back).
        The state stays: lines that come after a run ended (systemd's last words about it)
        are judged with the rest."""
        with self._lock:
            yield self._matching(run, kernel)

    def _matching(self, run: RunView, kernel: Sequence[int]) -> RunJudging | None:
        state = self._held.get(run.run_id)
        if state is None:
            return None
        same = (
            state.first_key == (run.first_key or "")
            and state.last_key == (run.last_key or "")
            and state.lines == run.lines
            and sorted(state.kernel) == sorted(kernel)
        )
        return state.judging if same else None

    def __len__(self) -> int:
        return len(self._held)


def _extended(state: _Held, lines: list[tuple[Line, int | None]], kernel: _Kernel | None) -> bool:
    """Feed `state` a chunk's lines of its run (after what it holds) and the host's kernel
    lines among and after them; False when it cannot take them (then it is let go)."""
    try:
        if lines and _place(lines[0][0]) < state.fed:  # not after what it holds
            return False
        for line, ended_us in lines:
            state.catch_up(kernel, line)
            state.own(line, ended_us)
        state.catch_up(kernel, None)
        return True
    except Exception as e:
        if environmental(e):
            raise
        return False


def _fit(states: dict[str, _Held], budget: int, let_go: set[str]) -> int:
    """Let go of the states fed least recently (first in `states`) until the lines the rest
    hold fit `budget`, naming each in `let_go`; how many lines the rest hold."""
    total = sum(state.judging.held for state in states.values())
    while total > budget and states:
        oldest = next(iter(states))
        total -= states.pop(oldest).judging.held
        let_go.add(oldest)
    return total
