"""What the learned model sees of a run: masked words of its evidence window plus tokens for
the structure around them (phase reached, readiness, stop, exit, traceback frames).

Numbers, hex, paths and ids are masked so that a model trained on generated logs does not
learn particular values; function names and exception classes are kept, because a reworded
message in a new version still fails in the same function.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import Final

from advisor.parsing.parsed import Parsed
from advisor.parsing.sequence import Run

WINDOW_TAIL: Final = 160
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b|\b[0-9a-f]{12,}\b")
_PATH = re.compile(r"(?:/[\w.@+-]+)+/([\w.@+-]+)")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_WORD = re.compile(r"[a-z_]{2,}")
_NOISE: Final = ('"GET /', '"POST /', "Avg prompt throughput", "% Completed |", "it/s]")


def _mask(text: str) -> str:
    text = _HEX.sub(" hex ", text)
    text = _PATH.sub(r" \1 ", text)
    return _NUMBER.sub(" 0 ", text).lower()


def _bucket_seconds(seconds: float) -> str:
    for limit, name in ((10, "lt10s"), (60, "lt1m"), (600, "lt10m"), (3600, "lt1h")):
        if seconds < limit:
            return name
    return "ge1h"


def window(run: Run, parsed: Sequence[Parsed]) -> list[int]:
    """The lines the model reads: the run's tail, plus every line that marks a phase or a
    lifecycle step earlier on."""
    tail = run.indexes[-WINDOW_TAIL:]
    first_tail = tail[0] if tail else 0
    head = [
        i
        for i in run.indexes
        if i < first_tail
        and (parsed[i].facts.phase is not None or parsed[i].facts.event is not None)
    ]
    return head + tail


def featurize(
    run: Run, parsed: Sequence[Parsed], gpu_peak_fraction: float | None = None
) -> list[str]:
    """Sorted distinct tokens of a run."""
    tokens: set[str] = set()
    for i in window(run, parsed):
        body = parsed[i].body
        if parsed[i].facts.noise or any(cue in body for cue in _NOISE):
            tokens.add("line:noise")
            continue
        words = _WORD.findall(_mask(body))
        tokens.update(words)
        tokens.update(f"{a}_{b}" for a, b in itertools.pairwise(words))
    last = run.last_phase()
    tokens.add(f"phase:{last or 'none'}")
    tokens.add(f"engine:{run.engine or 'none'}")
    tokens.add("ready:yes" if run.ready_at is not None else "ready:no")
    tokens.add("stop:yes" if run.stop_at is not None else "stop:no")
    tokens.add("died:yes" if run.died else "died:no")
    facts = run.event_facts
    if facts.get("stop_timed_out"):
        tokens.add("stop_timed_out")
    code = facts.get("exit_code")
    if code is not None:
        tokens.add(f"exit:{code if code in (0, 1, 2) else 'other'}")
    if facts.get("exit_signal") is not None:
        tokens.add(f"signal:{facts['exit_signal']}")
    if facts.get("unit_result") is not None:
        tokens.add(f"result:{facts['unit_result']}")
    for event in run.events:
        tokens.add(f"event:{event}")
    for tb in run.tracebacks:
        tokens.add("traceback")
        tokens.update(f"frame:{name}" for name in tb.functions[-12:])
        for position in tb.exceptions:
            head = parsed[position].body.strip().split(":", 1)[0]
            tokens.add(f"exc:{head.rsplit('.', 1)[-1][:60]}")
        phase = tb.phase()
        if phase is not None:
            tokens.add(f"tbphase:{phase}")
    times = [parsed[i].line.time_us for i in (run.indexes[0], run.indexes[-1])]
    if times[0] is not None and times[1] is not None:
        tokens.add(f"uptime:{_bucket_seconds((times[1] - times[0]) / 1e6)}")
    if gpu_peak_fraction is not None:
        tokens.add(f"gpu_peak:{min(10, int(gpu_peak_fraction * 10))}")
    return sorted(tokens)
