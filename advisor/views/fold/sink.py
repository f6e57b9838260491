"""What the fold hands the diagnoser: each line it puts into a run, as it cuts it (`Line`),
to a `LineSink` (`advisor.diagnosis.held.HeldLines`: a run's lines parsed once)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import NamedTuple, Protocol

from advisor.core.events import StoredEvent
from advisor.parsing.parsed import Parsed


class Line(NamedTuple):
    """A log line on its way into a run, at its place in the stream's order."""

    key: str
    seq: int
    time_us: int
    invocation_id: str | None
    parsed: Parsed
    event: StoredEvent | None  # this chunk's own lines: to report one that cannot be used


class LineSink(Protocol):
    """Where the fold hands each line it puts into a run, in the run's order, and the host's
    kernel lines, which a run is judged with (the diagnoser's `diagnosis.held.HeldLines`: a
    run's lines parsed once). Lines are handed inside `handing()`, entered around the write
    transaction: what it was handed counts once the block ends without an exception (the
    transaction committed), and one fold at a time hands lines over. A chunk's kernel lines
    are handed before its runs' lines. A sink must not raise: a line it cannot take it
    leaves out of what it holds."""

    def handing(self) -> AbstractContextManager[None]:
        """One write transaction's lines (see above)."""
        ...

    def line(self, run_id: str, begins: bool, line: Line, ended_us: int | None) -> None:
        """`line` joined run `run_id` (`begins`: as its first line: the run is cut anew),
        which has ended at `ended_us` (None: not yet)."""

    def kernel(self, host: str, line: Line) -> None:
        """A kernel line of `host` (`HOST/kernel`)."""

    def dropped(self, run_id: str) -> None:
        """Run `run_id` is gone (a re-derivation did not cut it again)."""
