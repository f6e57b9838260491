"""The cheap tests that spare most lines the rules' patterns never drop a line a pattern
finds: a pattern's literals (`literal_cue`, `literal_cues`), the gates streaming `classify`
tries on every line after a run's head, and the paused garbage collector (which frees
nothing when the lines hold no reference cycles)."""

from __future__ import annotations

import gc
import re
from pathlib import Path

import pytest

from advisor.diagnosis.cues import literal_cue, literal_cues
from advisor.diagnosis.model import load_model
from advisor.diagnosis.rules import load_rules
from advisor.diagnosis.stream import _gates, _hits, _Watch, diagnose_stream
from advisor.parsing.catalog import shipped_catalog
from advisor.parsing.lines import lines_from_texts
from advisor.parsing.parsed import parse
from advisor.pipeline.inputs import open_log, read_log

ROOT = Path(__file__).parents[2]
LOGS = sorted(
    p
    for pattern in ("tests/golden/*/*", "data/*", "tests/fixtures/*")
    for p in ROOT.glob(pattern)
    if p.suffix in (".log", ".jsonl", ".txt")
)
# A line each `also`/`absent` pattern of the shipped rules finds, beyond the logs above.
EXAMPLES = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "RuntimeError: CUDA error: out of memory",
    "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.",
    "NVRM: Xid (PCI:0000:3b:00): 48, pid=1234, An uncorrectable double bit error",
    "llama_model_load: error loading model: tensor 'blk.0' data is not within bounds",
    "main: exiting due to model loading error",
    "common_init_from_params: failed to load model '/models/q.gguf'",
    "llama_kv_cache_init: failed to allocate buffer for kv cache",
    "misc/strongstream.cc:53 NCCL WARN Cuda failure 'out of memory'",
    "include/alloc.h:48 NCCL WARN Failed to CUDA calloc 1024 bytes",
    "NCCL WARN Call to cudaMalloc failed: out of memory",
    "vllm.service: State 'stop-sigterm' timed out. Aborting.",
    "vllm.service: Found left-over process 4242 (python3) in control group while starting",
    "[ 12.5] do_group_exit+0x33/0xa0",
    "[ 12.5] do_exit+0x3a2/0xb40",
    "Main PID: 4242 (python3) (code=killed, signal=KILL)",
    "Process: 4242 ExecStart=/usr/bin/vllm serve (code=killed, signal=KILL)",
    "The above exception was the direct cause: see the root cause above",
    "see the stack trace above",
    "see the stack trace (above)",
    "thread 'tokio-runtime-worker' panicked at router/src/infer/mod.rs:120:45:",
)


@pytest.fixture(scope="module")
def bodies() -> list[str]:
    found = [e for m in shipped_catalog().messages for e in m.spec.examples]
    for path in LOGS:
        found.extend(p.body for p in parse(read_log(str(path))[1]))
    return [*found, *(p.body for p in parse(lines_from_texts(EXAMPLES)))]


def test_literal_cues_of_patterns() -> None:
    assert literal_cue(r"CUDA (?P<what>out) of memory") == "CUDA out of memory"
    assert literal_cues("failed to load|error loading model") == (
        "failed to load",
        "error loading model",
    )
    assert literal_cues(r"\b(?:do_exit|do_group_exit)\+0x") == ("+0x",)
    assert literal_cues("abc|d") is None  # an alternative without a literal of 3
    assert literal_cues("(?:abc|def)x") is None  # an alternation inside: not the top level
    # Case ignored: the literals are not the text found ("OUT OF MEMORY" is found).
    assert literal_cue("(?i)out of memory") is None
    assert literal_cues("(?i)out of memory|oom") is None


def test_every_watched_pattern_has_a_line_it_finds(bodies: list[str]) -> None:
    """Else the test below proves nothing about it: add a line it finds to EXAMPLES."""
    watch = _Watch.of(load_rules())
    missing = [w[1].pattern for w in watch.patterns if not any(w[1].search(b) for b in bodies)]
    assert missing == []


def test_gates_admit_every_line_a_watched_pattern_finds(bodies: list[str]) -> None:
    watch = _Watch.of(load_rules())
    everything = _gates(watch.patterns)
    assert everything is not None  # every shipped pattern has literals: the gates apply
    for w in watch.patterns:
        own = _gates([w])
        for body in bodies:
            if w[1].search(body) is None:
                continue
            assert _hits(w, body), (w[1].pattern, body)
            assert own is None or any(g in body for g in own), (w[1].pattern, body)
            assert any(g in body for g in everything), (w[1].pattern, body)


def test_gates_drop_a_literal_that_contains_another() -> None:
    x = re.compile("x")
    patterns = [(("CUDA out of memory",), x), (("out of memory", "OOM!"), x)]
    assert _gates(patterns) == ("OOM!", "out of memory")
    assert _gates([*patterns, (None, x)]) is None


@pytest.mark.parametrize("path", LOGS[:8], ids=lambda p: p.name)
def test_streaming_makes_no_cyclic_garbage(path: Path) -> None:
    """`diagnose_stream` runs with the collector paused: what it reads must be freed by
    reference counting alone, or memory would grow with the input."""
    rules, model = load_rules(), load_model()
    gc.collect()
    gc.disable()
    try:
        _, lines = open_log(str(path))
        result = diagnose_stream(lines, rules, model)
        del result, lines
        assert gc.collect() == 0
    finally:
        gc.enable()
    assert gc.isenabled()
