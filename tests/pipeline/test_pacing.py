"""Live pacing (advisor.pipeline.pacing): which journal entries may wait for company, and
one pass at a time however many threads commit."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import orjson
import pytest

from advisor.parsing.lines import VLLM, LogLine
from advisor.parsing.parsed import parse, routine
from advisor.pipeline.pacing import Passes, urgent_entry
from advisor.store.types import AppendResult

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
SEED = Path(__file__).resolve().parents[1] / "fixtures" / "seed-minimax-m25.journal.jsonl"
PATIENCE_S = 30.0

ACCESS = 'INFO:     10.0.0.1:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK'
COLOURED = f"\x1b[1;36m(APIServer pid=7)\x1b[0;0m {ACCESS}"
THROUGHPUT = (
    "INFO 12-04 10:11:12 [loggers.py:123] Engine 000: Avg prompt throughput: 12.3 tokens/s, "
    "Avg generation throughput: 45.6 tokens/s, Running: 3 reqs, Waiting: 0 reqs"
)
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 782.00 MiB."


def _lines() -> list[tuple[str, str | None, str | None]]:
    """Every line of the golden logs and the seed journal: (text, identifier, transport)."""
    out: list[tuple[str, str | None, str | None]] = []
    for path in sorted(GOLDEN.glob("*/*.log")):
        out += [(line, None, None) for line in path.read_text(errors="replace").splitlines()]
    for raw in SEED.read_bytes().splitlines():
        entry = orjson.loads(raw)
        message = entry.get("MESSAGE")
        if isinstance(message, str):
            out.append((message, entry.get("SYSLOG_IDENTIFIER"), entry.get("_TRANSPORT")))
    return out


def test_routine_is_what_parse_calls_noise_on_every_known_line() -> None:
    lines = _lines() + [(text, VLLM, "stdout") for text in (ACCESS, COLOURED, THROUGHPUT, OOM)]
    assert len(lines) > 1000
    parsed = parse(
        LogLine(number=i, text=text, identifier=ident, transport=transport)
        for i, (text, ident, transport) in enumerate(lines)
    )
    noise = [p.facts.noise for p in parsed]
    assert [routine(text, ident, transport) for text, ident, transport in lines] == noise
    assert any(noise) and not all(noise)


def _entry(message: str, stream: str = "gpu-1/vllm.service", **payload: Any) -> dict[str, Any]:
    fields = {"type": "log.recorded", "message": message, "transport": "stdout"}
    return {"stream": stream, "time_us": 1, "payload": fields | payload}


@pytest.mark.parametrize(
    ("event", "urgent"),
    [
        (_entry(ACCESS), False),
        (_entry(COLOURED), False),
        (_entry(THROUGHPUT), False),
        (_entry("[UFW BLOCK] IN=eno1 OUT=", "gpu-1/kernel", transport="kernel"), False),
        (_entry(OOM), True),
        (_entry("vllm.service: Main process exited, code=exited, status=1/FAILURE"), True),
        ({"stream": "gpu-1/gpu0", "time_us": 1, "payload": {"type": "gpu.sampled"}}, True),
        ({"stream": "gpu-1/vllm.service", "payload": None}, True),
    ],
)
def test_only_routine_entries_may_wait(event: dict[str, Any], urgent: bool) -> None:
    assert urgent_entry(event) is urgent


def test_a_commit_during_a_pass_makes_it_go_round_again_and_its_own_are_ignored() -> None:
    entered, release = threading.Event(), threading.Event()
    passes: list[int] = []
    own: list[None] = []

    def work() -> None:
        passes.append(len(passes))
        pacer(AppendResult(appended=1))  # the pass's own diagnosis events: ignored
        own.append(None)
        if len(passes) == 1:
            entered.set()
            assert release.wait(PATIENCE_S)

    pacer = Passes(work)
    first = threading.Thread(target=pacer, args=(AppendResult(appended=1),))
    first.start()
    assert entered.wait(PATIENCE_S)
    pacer(AppendResult(appended=1))  # another thread commits while the pass runs
    assert passes == [0]  # it did not run a pass of its own...
    release.set()
    first.join(PATIENCE_S)
    assert passes == [0, 1]  # ...the running pass went round once more
    assert len(own) == 2
