"""Python tracebacks stitched back together per writer, however the workers interleave.

Each vLLM process writes its own tracebacks; in the journal their lines interleave with the
other workers' and carry the main process's `_PID`. The writer is therefore the process in
vLLM's prefix (`(Worker_TP1 pid=…)`), else the journal pid, else the input as a whole.
A traceback runs from `Traceback (most recent call last):` through its frames to the
exception line; chained exceptions (`The above exception was the direct cause…`,
`During handling of the above exception…`) continue the same record.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

_FRAME = re.compile(r'^\s*File "([^"]*)", line \d+, in (\S+)')
# IPython's and Jupyter's frames (a traceback pasted from a notebook): `File PATH:LINE, in
# Class.function(args)` and the cell's own `Cell In[3], line 5`; their code lines are
# numbered, the failing one marked with an arrow (`----> 5 llm = LLM(...)`).
_NOTEBOOK_FRAME = re.compile(
    r"^\s*(?:File (\S+?):\d+, in (?:[\w.]*\.)?(\w+)\(|(Cell) In\[\d+\], line \d+)"
)
_ARROW = re.compile(r"^-+> ")
_EXCEPTION = re.compile(
    r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Interrupt|Exit|Warning|Fault)\b"
    r"|^(?:[a-z_][\w]*\.)+[A-Z]\w+: |^[A-Z]\w*Error$"
)
_CHAIN: Final = ("The above exception was the direct cause", "During handling of the above")

# Function names in a traceback that say which startup phase failed (innermost wins).
FRAME_PHASES: Final = {
    "_dummy_sampler_run": "sampler_warmup",
    "_dummy_pooler_run": "sampler_warmup",
    "_dummy_pooler_run_task": "sampler_warmup",
    "capture_model": "cuda_graph_capture",
    "_capture_cudagraphs": "cuda_graph_capture",
    "capture_one_batch_size": "cuda_graph_capture",
    "capture_graph": "cuda_graph_capture",
    # PyTorch's own graph capture, whoever calls it (a foreign server's too).
    "capture_begin": "cuda_graph_capture",
    "capture_end": "cuda_graph_capture",
    "make_graphed_callables": "cuda_graph_capture",
    # transformers: loading a checkpoint, and generating for a request.
    "from_pretrained": "weights_loading",
    "_load_pretrained_model": "weights_loading",
    "_load_state_dict_into_meta_model": "weights_loading",
    "_sample": "ready",
    "greedy_search": "ready",
    "beam_search": "ready",
    "load_model": "weights_loading",
    "load_weights": "weights_loading",
    "initialize_model": "weights_loading",
    "_initialize_model": "weights_loading",
    "get_model": "weights_loading",
    "weight_loader": "weights_loading",
    "_process_weights_after_loading": "weights_loading",
    "profile_run": "memory_profiling",
    "determine_available_memory": "memory_profiling",
    "determine_num_available_blocks": "memory_profiling",
    "profile_max_batch_size": "memory_profiling",
    "initialize_kv_cache": "kv_cache_allocation",
    "_allocate_kv_cache": "kv_cache_allocation",
    "_initialize_kv_caches": "kv_cache_allocation",
    "init_memory_pool": "kv_cache_allocation",
    "initialize_cache": "kv_cache_allocation",
    "_init_cache_engine": "kv_cache_allocation",
    "raise_if_cache_size_invalid": "kv_cache_allocation",
    "check_enough_kv_cache_memory": "kv_cache_allocation",
    "get_kv_cache_config": "kv_cache_allocation",
    "get_kv_cache_configs": "kv_cache_allocation",
    "configure_kv_pool": "kv_cache_allocation",
    "init_cublas": "kv_cache_allocation",
    "execute_model": "ready",
    "run_busy_loop": "ready",
    "forward_batch_generation": "ready",
    "generate_token": "ready",
    "event_loop_normal": "ready",
    "step_with_batch_queue": "ready",
    # TGI's start-up warm-up (the router's gRPC Warmup, FlashCausalLM.warmup) runs a prefill
    # through the serving code to size the KV cache: a serving frame inside it is warm-up.
    "Warmup": "kv_cache_allocation",
    "warmup": "kv_cache_allocation",
}
SERVING: Final = "ready"


@dataclass(slots=True)
class Traceback:
    writer: object
    indexes: list[int] = field(default_factory=list)  # positions of its lines
    functions: list[str] = field(default_factory=list)  # frame functions, outermost first
    exceptions: list[int] = field(default_factory=list)  # positions of exception lines
    closed: bool = False
    # Where each traceback of an exception chain begins in `functions` ("The above exception
    # was the direct cause …", "During handling of the above …"): the first is the root cause.
    chain: list[int] = field(default_factory=lambda: [0])

    def phase(self) -> str | None:
        """The startup phase of the root cause: of the first traceback of the chain with a
        recognised frame, the phase its innermost recognised frame belongs to. A serving
        frame (`generate_token`, `execute_model` …) called from a start-up frame is that
        start-up phase (a warm-up runs the serving code)."""
        ends = [*self.chain[1:], len(self.functions)]
        for start, end in zip(self.chain, ends, strict=True):
            found = _phase_of_frames(self.functions[start:end])
            if found is not None:
                return found
        return None


def _phase_of_frames(functions: list[str]) -> str | None:
    found = None
    for name in reversed(functions):
        phase = FRAME_PHASES.get(name)
        if phase is None:
            continue
        if phase != SERVING:
            return phase
        found = found or phase
    return found


@dataclass(slots=True)
class _Open:
    tb: Traceback
    after_frame: bool = False
    after_exception: bool = False
    chained: bool = False


class Stitcher:
    """`stitch`, one line at a time: feed each line of a run in order, then `finish`. With
    `limit`, only the first and the latest `limit` closed tracebacks are kept (a server that
    logs a traceback per failed request for hours has no use for all of them)."""

    def __init__(self, limit: int | None = None) -> None:
        self._open: dict[object, _Open] = {}
        self._heads: dict[object, str | None] = {}
        self._done: list[Traceback] = []
        self._recent: deque[Traceback] = deque(maxlen=limit)
        self._limit = limit

    def _close(self, tb: Traceback) -> None:
        if self._limit is None or len(self._done) < self._limit:
            self._done.append(tb)
        else:
            self._recent.append(tb)

    def feed(self, i: int, body: str, writer: object, record: str | None = None) -> bool:
        """Add the line at position `i`; True when it is a traceback's exception line."""
        text = body.strip()
        state = self._open.get(writer)
        if "Traceback (most recent call last)" in text:
            if state is not None and (not state.after_exception or state.chained):
                state.tb.indexes.append(i)
                state.after_frame = state.after_exception = state.chained = False
                return False
            if state is not None:
                self._close(state.tb)
            self._open[writer] = _Open(Traceback(writer, [i]))
            self._heads[writer] = record
            return False
        frame = _FRAME.match(body) or _NOTEBOOK_FRAME.match(body)
        if state is None:
            if frame is None:
                return False
            state = self._open[writer] = _Open(Traceback(writer, []))
            self._heads[writer] = record
        return self._continue(state, i, body, text, frame, record)

    def _continue(
        self,
        state: _Open,
        i: int,
        body: str,
        text: str,
        frame: re.Match[str] | None,
        record: str | None,
    ) -> bool:
        tb = state.tb
        same_record = record is not None and record == self._heads.get(tb.writer)
        if frame:
            tb.indexes.append(i)
            tb.functions.append(frame.group(2) or "<cell>")
            state.after_frame, state.after_exception = True, False
        elif text.startswith(_CHAIN):
            tb.indexes.append(i)
            tb.chain.append(len(tb.functions))
            state.after_frame, state.chained = False, True
        elif _EXCEPTION.match(text):
            tb.indexes.append(i)
            tb.exceptions.append(i)
            state.after_frame, state.after_exception = False, True
            return True
        elif (
            not text
            or set(text) <= set("^~ ")
            or _ARROW.match(text)
            or state.after_frame
            or body[:1].isspace()
            or (same_record and not state.after_exception)
        ):
            tb.indexes.append(i)  # code lines, carets, blank lines of a logger record
            state.after_frame = False
        else:
            self._close(tb)
            del self._open[tb.writer]
        return False

    def finish(self) -> list[Traceback]:
        """The tracebacks, in order of their first line."""
        done = [*self._done, *self._recent, *(state.tb for state in self._open.values())]
        done = [tb for tb in done if tb.indexes]
        done.sort(key=lambda tb: tb.indexes[0])
        return done


def stitch(
    bodies: Sequence[str], writers: Sequence[object], records: Sequence[str | None] | None = None
) -> list[Traceback]:
    """Group line positions into tracebacks; `writers[i]` says who wrote line i, and
    `records[i]` the logger header (file:line) of a vLLM log record, whose lines all belong
    to the record. A frame line with no traceback open starts one (a paste cut above it)."""
    stitcher = Stitcher()
    for i, (body, writer) in enumerate(zip(bodies, writers, strict=True)):
        stitcher.feed(i, body, writer, records[i] if records is not None else None)
    return stitcher.finish()
