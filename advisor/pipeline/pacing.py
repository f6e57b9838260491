"""When lines are committed and passes run, live.

The journal follower commits an entry at once (within milliseconds) unless it is routine —
a request's line, an access log's, a throughput line (`parsing.parsed.routine`), or a line of
a stream the fold does not cut into runs (the kernel's) — which changes no diagnosis and
waits up to five seconds for company (`urgent_entry`, given to `ingest.follow.flush_on_idle`).
A busy server's traffic then costs a commit and a pass every few seconds rather than one
every 50 ms, and a crash's lines are never held back.

Appends come from several threads (the journal follower, the GPU sampler, the heartbeat):
one pass runs at a time (`Passes`). A batch committed by another thread while a pass runs
makes that pass go round once more, so it is never left for an append that may not come.
The pass's own appends (its diagnoses and plans, on its own thread) come back here and are
ignored.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, Final

from advisor.parsing.parsed import routine as routine_line
from advisor.store.types import AppendResult
from advisor.views.fold.keys import cut_into_runs

_LOG: Final = "log.recorded"  # the payload type of a log line (not an action kind)


def routine(stream: str, type_: str, payload: Mapping[str, Any]) -> bool:
    """Does this event change no run? A log line `parse` calls noise, or a line of a stream
    the fold does not cut into runs (the kernel's: those are read as evidence when a run is
    judged, which the run's own lines set off)."""
    if type_ != _LOG:
        return False
    if not cut_into_runs(stream):
        return True
    return routine_line(
        payload.get("message") or "", payload.get("identifier"), payload.get("transport")
    )


def urgent_entry(event: Mapping[str, Any]) -> bool:
    """For the journal follower (`ingest.follow.Urgent`): an entry (a raw event: stream,
    payload) to store at once, not routine."""
    payload = event.get("payload")
    if not isinstance(payload, Mapping):
        return True
    return not routine(str(event.get("stream")), str(payload.get("type")), payload)


class Passes:
    """The store's observer that runs `work` (a pass) after appends, one at a time."""

    def __init__(self, work: Callable[[], None]) -> None:
        self.work = work
        self._lock = threading.Lock()
        self._owner: int | None = None  # the thread running a pass
        self._again = False  # another thread committed during the pass

    def __call__(self, _result: AppendResult) -> None:
        if self._owner == threading.get_ident():
            return  # the pass's own events
        if not self._lock.acquire(blocking=False):
            self._again = True
            return
        self._owner = threading.get_ident()
        try:
            while True:
                self._again = False
                self.work()
                if not self._again:
                    return
        finally:
            self._owner = None
            self._lock.release()
