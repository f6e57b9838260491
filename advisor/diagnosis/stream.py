"""`classify` on an input of any length, in bounded memory: lines are parsed as they are
read, cut into runs as they come (`RunCutter`), and a run no line can join any more is judged
and let go.

What a run keeps of its lines is what judging reads (`judge_run`, the rules, the model's
window, `verdict_facts`, the contract): every line of its first `HEAD` lines, then only the
lines that mark something — a phase, a lifecycle event, a rule's cue, a fact stated first, an
error-level or kernel line, a traceback's exception, the first match of a rule's `also` or
`absent` pattern, the first few request lines — up to `MARKED` of them and the latest
`MARKED_TAIL`, and always its latest `TAIL` lines. A run shorter than `HEAD` lines is judged
on all of them, so on such inputs the answer is `diagnose`'s exactly. Positions are the
lines' places in the whole input, as in `diagnose`.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Final, overload

from advisor.core.gcpause import gc_paused
from advisor.diagnosis.classify import Diagnosis, RunVerdict, judge_run
from advisor.diagnosis.cues import literal_cues
from advisor.diagnosis.model import LinearModel
from advisor.diagnosis.rules import RuleSet, cued_search
from advisor.parsing.lines import LogLine
from advisor.parsing.parsed import Parsed, parse
from advisor.parsing.runfold import says_died
from advisor.parsing.sequence import Run, RunCutter, settle
from advisor.parsing.tracebacks import Stitcher
from advisor.parsing.values import CONFIG_FACTS

HEAD: Final = 5_000  # a run's first lines, all kept
TAIL: Final = 300  # a run's latest lines, all kept (the model reads the last 160)
MARKED: Final = 2_000  # marked lines after the head, kept
MARKED_TAIL: Final = 500  # and the latest marked lines after those
NOISE_KEPT: Final = 3  # request lines kept after the head (`is_serving` counts 3)
TRACEBACKS: Final = 100  # the first and the latest tracebacks of a run
GRACE: Final = 5_000  # lines a displaced run waits for late kernel lines before judgement
_BATCH: Final = 512


class LineView(Sequence[Parsed]):
    """The lines kept, by their position in the whole input; its length is the input's."""

    def __init__(self, lines: dict[int, Parsed], total: int) -> None:
        self._lines = lines
        self._total = total

    @overload
    def __getitem__(self, index: int) -> Parsed: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Parsed]: ...
    def __getitem__(self, index: int | slice) -> Parsed | Sequence[Parsed]:
        if isinstance(index, slice):
            raise TypeError("a LineView is read by position only")
        return self._lines[index]

    def __len__(self) -> int:
        return self._total

    def __iter__(self) -> Iterator[Parsed]:
        return iter(self._lines[i] for i in sorted(self._lines))


@dataclass
class StreamDiagnosis:
    """`Diagnosis` of a streamed input: `parsed` holds the lines the report may cite."""

    parsed: LineView
    verdicts: list[RunVerdict]

    @property
    def primary(self) -> RunVerdict | None:
        return Diagnosis([], self.verdicts).primary


# A watched pattern: literals one of which every line it finds contains (None: unknown).
_Watched = tuple[tuple[str, ...] | None, re.Pattern[str]]


@dataclass(frozen=True)
class _Watch:
    """The rules' `also` and `absent` patterns, each with the literals one of which it
    needs."""

    patterns: tuple[_Watched, ...]

    @classmethod
    def of(cls, rules: RuleSet) -> _Watch:
        found: dict[str, _Watched] = {}
        for rule in rules.rules:
            texts = (*rule.spec.also, *rule.spec.absent)
            for text, compiled in zip(texts, (*rule.also, *rule.absent), strict=True):
                found.setdefault(text, (literal_cues(text), compiled))
        return cls(tuple(found.values()))


def _hits(pattern: _Watched, body: str) -> bool:
    cues, compiled = pattern
    return cued_search(compiled, cues, body)


def _gates(patterns: Iterable[_Watched]) -> tuple[str, ...] | None:
    """Substrings one of which a line must contain for any of `patterns` to find it: their
    literals, less each that contains another (it is absent where that one is); None when a
    pattern has none."""
    cues: set[str] = set()
    for found_in, _ in patterns:
        if found_in is None:
            return None
        cues.update(found_in)
    return tuple(sorted(c for c in cues if not any(o != c and o in c for o in cues)))


class _Kept:
    """What one run keeps of its lines (see the module's text), and its tracebacks."""

    def __init__(self, rules: RuleSet, watch: _Watch) -> None:
        self.lines: dict[int, Parsed] = {}
        self.stitcher = Stitcher(limit=TRACEBACKS)
        self._rules = rules
        self._watch = watch
        self._unseen: list[_Watched] | None = None
        self._gates: tuple[str, ...] | None = None
        self._fact_keys: set[str] = set()
        self._count = self._marked = self._noise = 0
        self._head_end = -1
        self._pinned: set[int] = set()
        self._tail: deque[int] = deque()
        self._marked_tail: deque[int] = deque()

    def add(self, i: int, p: Parsed) -> None:
        exception = self.stitcher.feed(i, p.body, p.writer, p.split.logger)
        self._count += 1
        self.lines[i] = p
        if self._count <= HEAD:
            self._head_end = i
            if p.facts.facts:
                self._fact_keys.update(k for k, v in p.facts.facts.items() if v is not None)
            return
        if self._marks(p, exception):
            self._pinned.add(i)
            if self._marked < MARKED:
                self._marked += 1
            else:
                self._marked_tail.append(i)
                if len(self._marked_tail) > MARKED_TAIL:
                    old = self._marked_tail.popleft()
                    self._pinned.discard(old)
                    if self._tail and old < self._tail[0]:
                        del self.lines[old]
        self._tail.append(i)
        if len(self._tail) > TAIL:
            old = self._tail.popleft()
            if old not in self._pinned:
                del self.lines[old]

    def add_header(self, i: int, p: Parsed) -> None:
        """A held-back status header line: kept. It comes before all of the run's lines, so
        it is stitched only where it is all the run has (elsewhere it starts no traceback)."""
        if self._count == 0:
            self.stitcher.feed(i, p.body, p.writer, p.split.logger)
        self.lines[i] = p
        self._pinned.add(i)

    def _marks(self, p: Parsed, exception: bool) -> bool:
        f, body = p.facts, p.body
        if exception or f.phase is not None or f.event is not None:
            return True
        if p.split.level in ("ERROR", "CRITICAL") or p.engine == "kernel":
            return True
        if f.noise and self._noise < NOISE_KEPT:
            self._noise += 1
            return True
        if self._new_match(body) or self._new_facts(p):
            return True
        if "(most recent call first)" in body:
            return True
        return not f.noise and (says_died(body) or self._rules.may_match(body))

    def _new_facts(self, p: Parsed) -> bool:
        if not p.facts.facts:  # most lines state none
            return False
        new = [k for k, v in p.facts.facts.items() if v is not None and k not in self._fact_keys]
        self._fact_keys.update(new)
        return any(k not in CONFIG_FACTS for k in new)

    def _new_match(self, body: str) -> bool:
        """Is this the first line after the head an `also`/`absent` pattern finds?"""
        if self._unseen is None:  # the patterns no line of the head finds
            self._unseen = list(self._watch.patterns)
            self._gates = _gates(self._unseen)
            for i, p in self.lines.items():
                if i <= self._head_end and self._unseen:
                    self._seen_in(p.body)
        return self._seen_in(body)

    def _seen_in(self, body: str) -> bool:
        """Does an unseen pattern find `body`? Those that do are seen from now on."""
        assert self._unseen is not None
        if self._gates is not None:  # this runs on every line: most contain no gate
            for gate in self._gates:
                if gate in body:
                    break
            else:
                return False
        found = [w for w in self._unseen if _hits(w, body)]
        if found:
            self._unseen = [w for w in self._unseen if w not in found]
            self._gates = _gates(self._unseen)
        return bool(found)


class _Stream:
    """The state of one streamed diagnosis."""

    def __init__(self, rules: RuleSet, model: LinearModel | None) -> None:
        self.rules, self.model = rules, model
        self.watch = _Watch.of(rules)
        self.cutter = RunCutter()
        self.total = 0
        self.kept: dict[int, _Kept] = {}
        self.pending: deque[tuple[int, Run]] = deque()
        self.verdicts: dict[int, RunVerdict] = {}
        self.order: dict[int, int] = {}  # id(run) → its place among the runs
        self.full: dict[int, dict[int, Parsed]] = {}  # id(run) → all it kept (maybe primary)
        self.cited: dict[int, Parsed] = {}  # first and last line of every run judged
        self.firsts: dict[str, int] = {}  # the first failed, first died, newest run judged

    def _keep(self, run: Run) -> _Kept:
        kept = self.kept.get(id(run))
        if kept is None:
            kept = self.kept[id(run)] = _Kept(self.rules, self.watch)
            self.order[id(run)] = len(self.order)
        return kept

    def add(self, p: Parsed) -> None:
        i = self.total
        self.total += 1
        for run in self.cutter.add(i, p):
            self._keep(run).add(i, p)
        for run in self.cutter.take_displaced():
            self.pending.append((i + GRACE, run))
        while self.pending and self.pending[0][0] <= i:
            self._release(self.pending.popleft()[1])

    def finish(self) -> StreamDiagnosis:
        for i, p, targets in self.cutter.finish():
            for run in targets:
                self._keep(run).add_header(i, p)
        for run in self.cutter.runs:
            if id(run) in self.kept:
                self._release(run)
        verdicts = [self.verdicts[id(run)] for run in self.cutter.runs]
        lines = dict(self.cited)
        for kept in self.full.values():
            lines.update(kept)
        return StreamDiagnosis(LineView(lines, self.total), verdicts)

    def _release(self, run: Run) -> None:
        kept = self.kept.pop(id(run))
        self.cutter.release(run)
        run.indexes = sorted(kept.lines)
        view = LineView(kept.lines, self.total)
        settle(run, view, kept.stitcher.finish())
        verdict = judge_run(run, view, self.rules, self.model)
        self.verdicts[id(run)] = verdict
        for i in (run.indexes[0], run.indexes[-1]):
            self.cited[i] = kept.lines[i]
        self.full[id(run)] = kept.lines
        self._prune(id(run))

    def _prune(self, key: int) -> None:
        """Keep all lines only of the runs that may yet be the primary one: the first that
        failed, the first that died, and the newest (`key` was just judged)."""
        verdict, order = self.verdicts[key], self.order
        for kind, applies in (("failed", verdict.failed), ("died", verdict.run.died)):
            best = self.firsts.get(kind)
            if applies and (best is None or order[key] < order[best]):
                self.firsts[kind] = key
        newest = self.firsts.get("newest")
        if newest is None or order[key] > order[newest]:
            self.firsts["newest"] = key
        wanted = set(self.firsts.values())
        for other in [k for k in self.full if k not in wanted]:
            run = self.verdicts[other].run
            del self.full[other]
            run.indexes = [run.indexes[0], run.indexes[-1]]
            run.tracebacks = []


def _batches(lines: Iterable[LogLine]) -> Iterator[list[LogLine]]:
    it = iter(lines)
    while batch := list(islice(it, _BATCH)):
        yield batch


class RunJudging:
    """One stored run's lines on their way to its verdict: fed one at a time in the fold's
    order (its boundaries decided already: a run the fold cut), kept as a streamed run keeps
    them, and judged once fed. The fold hands its parsed lines to one of these as it cuts
    them (`diagnosis.held`); a run's lines read back from the store feed one the same way
    (`judge_lines`)."""

    def __init__(self, rules: RuleSet, watch: _Watch | None = None) -> None:
        self.kept = _Kept(rules, watch if watch is not None else _Watch.of(rules))
        self.run = Run(unit=None, invocation_id=None, indexes=[])
        self.total = 0

    @staticmethod
    def watch_of(rules: RuleSet) -> _Watch:
        """What every run judged with `rules` watches for: built once, shared by many."""
        return _Watch.of(rules)

    def feed(self, p: Parsed) -> None:
        self.run.absorb(self.total, p)
        self.kept.add(self.total, p)
        self.total += 1

    @property
    def held(self) -> int:
        """How many lines it holds now (bounded whatever the run's length)."""
        return len(self.kept.lines)

    def judge(
        self,
        unit: str | None,
        invocation_id: str | None,
        rules: RuleSet,
        model: LinearModel | None,
        gpu_peak_fraction: float | None = None,
    ) -> tuple[RunVerdict, LineView]:
        """The run's verdict on the lines fed, and those it kept, by their position."""
        run, kept = self.run, self.kept
        run.unit, run.invocation_id = unit, invocation_id
        run.indexes = sorted(kept.lines)
        view = LineView(kept.lines, self.total)
        settle(run, view, kept.stitcher.finish())
        return judge_run(run, view, rules, model, gpu_peak_fraction), view


def judge_lines(
    lines: Iterable[LogLine],
    unit: str | None,
    invocation_id: str | None,
    rules: RuleSet,
    model: LinearModel | None,
    gpu_peak_fraction: float | None = None,
) -> tuple[RunVerdict, LineView]:
    """All of `lines` as one run (its boundaries decided already: a stored run the fold cut),
    judged in bounded memory, on the lines a streamed run keeps; and those lines, by their
    position among `lines`."""
    judging = RunJudging(rules)
    with gc_paused():
        for batch in _batches(lines):
            for p in parse(batch):
                judging.feed(p)
    return judging.judge(unit, invocation_id, rules, model, gpu_peak_fraction)


def diagnose_stream(
    lines: Iterable[LogLine], rules: RuleSet, model: LinearModel | None
) -> StreamDiagnosis:
    """`diagnose` over lines as they are read, in memory bounded whatever their number."""
    state = _Stream(rules, model)
    with gc_paused():
        for batch in _batches(lines):
            for p in parse(batch):
                state.add(p)
        return state.finish()
