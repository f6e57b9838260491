"""Streaming `classify` (`diagnose_stream` over `open_log`) answers as `diagnose` over
`read_log` does, and its memory does not grow with the length of a run; nor does judging a
run the fold cut (`judge_lines`, what `advisor watch` runs)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from itertools import cycle, islice
from pathlib import Path
from typing import Any

import orjson
import pytest

from advisor.core.errors import InputError
from advisor.diagnosis.classify import diagnose, judge_run, verdict_facts
from advisor.diagnosis.model import load_model
from advisor.diagnosis.rules import load_rules
from advisor.diagnosis.stream import HEAD, diagnose_stream, judge_lines
from advisor.parsing.lines import LogLine
from advisor.parsing.parsed import parse
from advisor.parsing.sequence import single_run
from advisor.pipeline.inputs import open_log, read_log
from advisor.reports.contract import to_contract

ROOT = Path(__file__).parents[2]
LOGS = sorted(
    p
    for pattern in ("tests/golden/*/*", "data/*", "tests/fixtures/*")
    for p in ROOT.glob(pattern)
    if p.suffix in (".log", ".jsonl", ".txt")
)
# A vLLM 0.8.5 server in docker: start-up (lines 1-99), traffic (100-130), then a worker's
# CUDA OOM (197) kills the engine.
CRASH = ROOT / "tests/golden/runtime_oom/qwen25-32b-v085-tp2-worker-docker.log"
_PLAIN = "2025-07-02T21:15:50.000000000Z INFO 07-02 21:15:50 [scheduler.py:88] Heartbeat."


@pytest.fixture(scope="module")
def judges() -> Any:
    return load_rules(), load_model()


def _json(result: dict[str, Any]) -> bytes:
    return orjson.dumps(result, option=orjson.OPT_INDENT_2)


def _both(path: Path, judges: Any) -> tuple[bytes, bytes]:
    rules, model = judges
    fmt, lines = read_log(str(path))
    whole = _json(to_contract(diagnose(lines, rules, model), fmt))
    fmt, stream = open_log(str(path))
    streamed = _json(to_contract(diagnose_stream(stream, rules, model), fmt))
    return whole, streamed


@pytest.mark.parametrize("path", LOGS, ids=lambda p: str(p.relative_to(ROOT)))
def test_streaming_answers_as_the_whole_input_does(path: Path, judges: Any) -> None:
    whole, streamed = _both(path, judges)
    assert streamed == whole


def _long_texts(filler: int) -> Iterator[str]:
    """The crash log with `filler` lines of traffic (and a plain line now and then) in the
    middle of its run."""
    texts = CRASH.read_text().splitlines()
    yield from texts[:130]
    traffic = cycle([*texts[99:130], _PLAIN])
    yield from islice(traffic, filler)
    yield from texts[130:]


def test_a_run_longer_than_the_head_is_judged_the_same(tmp_path: Path, judges: Any) -> None:
    """Two runs, each longer than what is kept whole: the first is judged and let go while
    the second is read."""
    texts = [*_long_texts(HEAD + 1_000), *_long_texts(HEAD + 1_000)]
    log = tmp_path / "two-runs.log"
    log.write_text("\n".join(texts) + "\n")
    whole, streamed = _both(log, judges)
    assert streamed == whole
    result = orjson.loads(streamed)
    assert [r["label"] for r in result["runs"]].count("runtime_oom") == 2


def _lines(filler: int) -> Iterator[LogLine]:
    for number, text in enumerate(_long_texts(filler), start=1):
        yield LogLine(number=number, text=text)


def _peak(filler: int, judges: Any) -> tuple[int, dict[str, Any]]:
    rules, model = judges
    tracemalloc.start()
    try:
        result = to_contract(diagnose_stream(_lines(filler), rules, model), "text")
        return tracemalloc.get_traced_memory()[1], result
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_length_of_a_run(judges: Any) -> None:
    short_peak, short = _peak(20_000, judges)
    long_peak, long = _peak(200_000, judges)
    assert long_peak < short_peak * 1.25 + 2_000_000, (short_peak, long_peak)
    total = 200_000 + len(CRASH.read_text().splitlines())
    assert long["input"]["lines"] == total
    assert long["label"] == short["label"] == "runtime_oom"
    shift = 180_000
    assert [e["line"] for e in long["evidence"]] == [e["line"] + shift for e in short["evidence"]]
    assert [e["text"] for e in long["evidence"]] == [e["text"] for e in short["evidence"]]
    crash = CRASH.read_text().splitlines()
    for item in long["evidence"]:  # numbers are the lines' places in the input
        assert crash[item["line"] - 200_000 - 1].endswith(item["text"][-60:])
    assert long["facts"] == short["facts"]
    assert long["runs"][-1]["first_line"] == short["runs"][-1]["first_line"]
    assert long["runs"][-1]["last_line"] == total


def test_errors_are_read_logs(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"\n  \n")
    binary = tmp_path / "x.journal"
    binary.write_bytes(b"LPKSHHRH\x00\x00\x00" * 10)
    for path, message in [
        (tmp_path / "missing.log", "no such file"),
        (tmp_path, "is a folder"),
        (empty, "empty log"),
        (binary, "binary data"),
    ]:
        with pytest.raises(InputError, match=message) as streamed:
            open_log(str(path))
        with pytest.raises(InputError) as whole:
            read_log(str(path))
        assert str(streamed.value) == str(whole.value)


def test_a_bad_journal_line_is_reported_when_reached(tmp_path: Path) -> None:
    log = tmp_path / "bad.jsonl"
    good = (ROOT / "data/sample-vllm.journal.jsonl").read_bytes().splitlines()[0]
    log.write_bytes(good + b"\n" + good + b"\n{not json\n")
    fmt, lines = open_log(str(log))
    assert fmt == "journald-json"
    with pytest.raises(InputError, match=r"line 3: invalid JSON"):
        list(lines)


def test_lines_are_numbered_as_read_log_numbers_them(tmp_path: Path) -> None:
    log = tmp_path / "crlf.log"
    log.write_bytes(b"\n\r\nfirst\r\n" + b"x" * 5000 + b"\n\nlast")
    _, lines = read_log(str(log))
    assert [(line.number, line.text[:5]) for line in lines] == [
        (3, "first"),
        (4, "xxxxx"),
        (6, "last"),
    ]


def _judged(filler: int, judges: Any) -> tuple[int, Any, Any, dict[str, Any]]:
    """`judge_lines` over the crash log with `filler` lines of traffic, as one run: its
    traced peak, verdict, kept lines and facts."""
    rules, model = judges
    tracemalloc.start()
    try:
        verdict, kept = judge_lines(_lines(filler), "vllm.service", None, rules, model)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak, verdict, kept, verdict_facts(verdict, kept)


def test_a_stored_run_is_judged_as_one_run_on_the_lines_it_keeps(judges: Any) -> None:
    """What `advisor watch` does with a run the fold cut (`judge_lines`): the same label,
    phase, facts and evidence as judging all of its lines at once (`single_run`), holding
    only what a streamed run keeps."""
    rules, model = judges
    filler = HEAD + 3_000
    _, verdict, kept, facts = _judged(filler, judges)
    everything = parse(list(_lines(filler)))
    whole = judge_run(single_run(everything, "vllm.service", None), everything, rules, model)
    assert (verdict.label, verdict.phase, verdict.failed) == (whole.label, whole.phase, True)
    assert verdict.label == "runtime_oom"
    assert [kept[i].line.number for i in verdict.evidence] == [
        everything[i].line.number for i in whole.evidence
    ]
    assert facts == verdict_facts(whole, everything)
    assert len(kept) == len(everything)  # positions among all the lines
    assert len(verdict.run.indexes) < len(everything) - 2_500  # the traffic after the head: let go


def test_judging_a_stored_run_does_not_grow_with_its_length(judges: Any) -> None:
    short_peak, short, _, short_facts = _judged(20_000, judges)
    long_peak, long, _, long_facts = _judged(200_000, judges)
    assert long_peak < short_peak * 1.25 + 2_000_000, (short_peak, long_peak)
    assert (long.label, long_facts) == (short.label, short_facts)
