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

from advisor.core.payloads import LogRecorded
from advisor.parsing.parsed import routine
from advisor.store.types import AppendResult
from advisor.views.fold.keys import cut_into_runs

_LOG: Final = LogRecorded.model_fields["type"].default  # a log line's payload type


def urgent_entry(event: Mapping[str, Any]) -> bool:
    """For the journal follower (`ingest.follow.Urgent`): must this entry (a raw event:
    stream, payload) be stored at once? Not when it changes no run: a log line `parse` calls
    noise, or a line of a stream the fold does not cut into runs (the kernel's: those are
    read as evidence when a run is judged, which the run's own lines set off)."""
    payload = event.get("payload")
    if not isinstance(payload, Mapping) or payload.get("type") != _LOG:
        return True
    if not cut_into_runs(str(event.get("stream"))):
        return False
    return not routine(
        payload.get("message") or "", payload.get("identifier"), payload.get("transport")
    )


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
