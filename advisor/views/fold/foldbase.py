"""One chunk's fold, the state its parts share: rows loaded on first touch (runs,
incidents, actions), what the chunk changed, and the events it could not use."""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from sqlalchemy import Column, Connection, select

from advisor.core.events import StoredEvent
from advisor.core.payloads import IncidentClassified, LogRecorded
from advisor.core.taxonomy import NOT_FAILURES
from advisor.parsing.lines import LogLine
from advisor.parsing.parsed import Parsed, parse
from advisor.store.schema import runs
from advisor.views.fold.keys import config_key
from advisor.views.fold.runrow import RunRow
from advisor.views.fold.sink import LineSink

PAGE: Final = 2000  # rows a re-derivation reads at a time
IN: Final = 500  # ids in one IN (…)


class Loaded(NamedTuple):
    """A stored run as the chunk found it."""

    stream: str
    started_us: int
    window: tuple[int, int | None]
    content: str
    incidence: tuple[Any, ...] | None
    incident_id: str | None


class Unparsed(NamedTuple):
    """A chunk's log line at its place in its stream's order, not parsed yet: a line that
    lands before its stream's last folded line is only marked (re-derived, and parsed, at the
    end of the catch-up), so it is parsed once, not twice."""

    key: str
    seq: int
    time_us: int
    event: StoredEvent
    payload: LogRecorded


def parsed_line(seq: int, time_us: int, p: LogRecorded) -> Parsed:
    line = LogLine(
        number=seq,
        text=p.message or "",
        time_us=time_us,
        unit=p.unit,
        host=p.host,
        invocation_id=p.invocation_id,
        pid=p.pid,
        identifier=p.identifier,
        message_id=p.message_id,
        transport=p.transport,
        fields=p.fields or {},
    )
    return parse([line])[0]


def incidence(run: RunRow) -> tuple[Any, ...] | None:
    """What of a run the incidents depend on (None: nothing, it neither failed nor came up)."""
    failed = run.label is not None and run.label not in NOT_FAILURES
    if not failed and run.ready_us is None:
        return None
    if not failed:
        return (None, None, None, None, None, run.ready_us)
    return (
        run.label,
        run.confidence,
        config_key(run.config),
        run.ended_us,
        run.first_seq,
        run.ready_us,
    )


class FoldBase:
    """The state of one chunk's fold: rows loaded on first touch, written back at the end."""

    def __init__(self, conn: Connection, upto: int, sink: LineSink | None = None) -> None:
        self.conn = conn
        self.upto = upto  # the chunk's last seq
        self.sink = sink  # where each line put into a run is handed
        self.current: dict[str, RunRow | None] = {}  # stream → its latest run
        self.runs: dict[str, RunRow] = {}  # run_id → row, touched in this chunk
        self.fresh: set[str] = set()  # runs cut in this chunk
        self.deleted: set[str] = set()  # stored runs a re-derivation dropped
        self.loaded: dict[str, Loaded] = {}  # run_id → the stored run as found
        self.lines: dict[str, list[Unparsed]] = {}  # stream → this chunk's log lines
        self.marks: dict[str, tuple[str, int, str]] = {}  # stream → fold_pending, changed
        self.labels: dict[tuple[str, str], dict[str, Any]] = {}  # this chunk's run.classified
        self.named: set[str] = set()  # runs those name
        self.classified: dict[str, tuple[StoredEvent, IncidentClassified]] = {}
        self.incidents: dict[str, dict[str, Any]] = {}
        self.dropped: set[str] = set()  # incident rows no longer kept
        self.actions: dict[str, dict[str, Any]] = {}
        self.samples: list[dict[str, Any]] = []  # gpu_samples rows of this chunk
        self.skipped: list[tuple[StoredEvent, str]] = []  # events not folded, and why

    def _run(self, run_id: str) -> RunRow | None:
        if run_id in self.deleted:
            return None
        if run_id not in self.runs:
            row = self.conn.execute(select(runs).where(runs.c.run_id == run_id)).first()
            if row is None:
                return None
            self._loaded(RunRow.from_row(row))
        return self.runs[run_id]

    def _loaded(self, run: RunRow) -> RunRow:
        if run.run_id not in self.runs:
            self.runs[run.run_id] = run
            self._remember(run)
        return self.runs[run.run_id]

    def _remember(self, run: RunRow) -> None:
        if run.run_id not in self.loaded:
            self.loaded[run.run_id] = Loaded(
                run.stream,
                run.started_us,
                (run.started_us, run.ended_us),
                run.content,
                incidence(run),
                run.incident_id,
            )

    def _load(
        self, cache: dict[str, dict[str, Any]], key: Column[str], value: str
    ) -> dict[str, Any] | None:
        """The row of `key`'s table whose `key` is `value`, from `cache` or the database."""
        if value not in cache:
            row = self.conn.execute(select(key.table).where(key == value)).first()
            if row is None:
                return None
            cache[value] = {str(k): v for k, v in row._mapping.items()}
        return cache[value]
