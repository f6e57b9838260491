"""Cutting a stream's log lines into runs, in the stream's order (`order_key`), whatever
order they arrived in: a chunk's lines that come after the stream's last folded line go on
from there; a stream that gets an older line is marked (`fold_pending`) and re-derived once
at the end of the catch-up (`rederive`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy import select

from advisor.core.events import StoredEvent, load_payload
from advisor.core.payloads import LogRecorded
from advisor.parsing.runfold import starts_new_run
from advisor.store.schema import events, fold_pending, runs
from advisor.views.fold.foldbase import IN, PAGE, FoldBase, Unparsed, parsed_line
from advisor.views.fold.keys import cut_into_runs, order_key, run_id_of
from advisor.views.fold.logpages import log_event, log_query, log_rows
from advisor.views.fold.runrow import RunRow
from advisor.views.fold.sink import Line
from advisor.views.fold.skipped import environmental, reason_of, unusable


class RunCutting(FoldBase):
    """The fold's part that puts log lines into runs."""

    def _latest(self, stream: str) -> RunRow | None:
        if stream not in self.current:
            row = self.conn.execute(
                select(runs)
                .where(runs.c.stream == stream)
                .order_by(runs.c.started_us.desc())
                .limit(1)
            ).first()
            self.current[stream] = self._loaded(RunRow.from_row(row)) if row is not None else None
        return self.current[stream]

    def _log(self, event: StoredEvent, p: LogRecorded) -> None:
        if not cut_into_runs(event.stream):
            host, _, rest = event.stream.partition("/")
            if self.sink is not None and rest == "kernel":  # runs are judged with these
                self._hand_kernel(host, event, p)
            return
        key = order_key(event.time_us, p)
        self.lines.setdefault(event.stream, []).append(
            Unparsed(key, event.seq, event.time_us, event, p)
        )

    def _hand_kernel(self, host: str, event: StoredEvent, p: LogRecorded) -> None:
        """A kernel line to the sink; one that cannot be parsed is left out (a run judged
        with it is then read back, and says why), not skipped by the fold."""
        assert self.sink is not None
        try:
            line = _line(event, p)
        except Exception as e:
            if environmental(e):
                raise
            return
        self.sink.kernel(host, line)

    def _place_lines(self) -> None:
        """Put the chunk's lines into their streams' runs, in each stream's order; a stream
        that gets a line older than its last (or is marked already) is marked instead, to be
        re-derived at the end of the catch-up."""
        streams = sorted(self.lines)
        marked: dict[str, Any] = {}
        for i in range(0, len(streams), IN):
            for row in self.conn.execute(
                select(fold_pending).where(fold_pending.c.stream.in_(streams[i : i + IN]))
            ).all():
                marked[row.stream] = row
        for stream in streams:
            lines = sorted(self.lines[stream], key=lambda line: (line.key, line.seq))
            first, last = lines[0], lines[-1]
            mark = marked.get(stream)
            latest = None if mark is not None else self._latest(stream)
            if mark is None and (latest is None or first.key >= latest.last_key):
                run = latest
                for line in lines:
                    run = self._take(stream, run, _line(line.event, line.payload))
                self.current[stream] = run
            elif mark is None:
                self.marks[stream] = (first.key, first.time_us, last.key)
            else:
                earlier = first.key < mark.first_key
                self.marks[stream] = (
                    first.key if earlier else mark.first_key,
                    first.time_us if earlier else mark.first_us,
                    max(last.key, mark.last_key),
                )

    def _begins(self, run: RunRow | None, line: Line) -> bool:
        """Does `line` start a run after `run` (the run of the line before it)?"""
        return run is None or (line.time_us != run.started_us and starts_new_run(run, line.parsed))

    def _take(self, stream: str, run: RunRow | None, line: Line) -> RunRow | None:
        """Add `line` after `run`: to it, or to the new run it starts; return the run it is
        in now. A line that cannot be used is left out (reported once, when first folded)."""
        try:
            if self._begins(run, line):
                host, _, unit = stream.partition("/")
                taker = RunRow(
                    run_id=run_id_of(stream, line.time_us),
                    stream=stream,
                    host=host,
                    unit=unit,
                    invocation_id=line.invocation_id,
                    first_seq=line.seq,
                    last_seq=line.seq,
                    started_us=line.time_us,
                    first_key=line.key,
                    last_key=line.key,
                    last_us=line.time_us,
                )
            else:
                assert run is not None
                taker = run
                if taker.invocation_id is None and line.invocation_id is not None:
                    taker.invocation_id = line.invocation_id
            taker.add_line(line.parsed, line.seq, line.time_us, line.key)
        except Exception as e:
            if environmental(e):
                raise
            if line.event is not None:
                self.skipped.append((line.event, reason_of(e)))
            return run
        if self.sink is not None:
            self.sink.line(taker.run_id, taker is not run, line, taker.ended_us)
        if taker is not run:
            self.runs[taker.run_id] = taker
            self.fresh.add(taker.run_id)
            self.deleted.discard(taker.run_id)
        return taker

    def rederive(self, stream: str, first_key: str, first_us: int, last_key: str) -> None:
        """Cut `stream`'s runs again from the stored run its line at `first_key` falls in, in
        order, until past `last_key` a run starts where a stored run starts."""
        start = self._start_of(stream, first_key, first_us)
        since = first_us if start is None else start
        stored = self._stored_runs(stream, since)
        pending = next(stored, None)
        run: RunRow | None = None
        for line in self._stream_lines(stream, since):
            while pending is not None and pending.first_key < line.key:
                self._drop(pending)
                pending = next(stored, None)
            if (
                pending is not None
                and run is not None
                and line.key > last_key
                and pending.first_key == line.key
                and self._safely_begins(run, line)
            ):
                return  # the runs from `pending` on are what they were; so is the latest
            run = self._take(stream, run, line)
        while pending is not None:
            self._drop(pending)
            pending = next(stored, None)
        self.current[stream] = run if run is not None else self._before(stream, since)

    def _safely_begins(self, run: RunRow, line: Line) -> bool:
        try:
            return self._begins(run, line)
        except Exception as e:
            if environmental(e):
                raise
            return False

    def _start_of(self, stream: str, key: str, time_us: int) -> int | None:
        """When the stored run the line at `key` falls in started (None: before them all)."""
        rows = self.conn.execute(
            select(runs.c.started_us, runs.c.first_key)
            .where(runs.c.stream == stream)
            .where(runs.c.started_us <= time_us)
            .order_by(runs.c.started_us.desc())
            .limit(2)
        ).all()
        for started_us, first_key in rows:
            if (first_key or "") <= key:
                return int(started_us)
        return None

    def _stored_runs(self, stream: str, since: int) -> Iterator[RunRow]:
        """The stream's stored runs that start at `since` or later, in order."""
        after = since - 1
        while True:
            rows = self.conn.execute(
                select(runs)
                .where(runs.c.stream == stream)
                .where(runs.c.started_us > after)
                .order_by(runs.c.started_us)
                .limit(PAGE)
            ).all()
            for row in rows:
                known = self.runs.get(row.run_id)
                yield (
                    known
                    if known is not None and row.run_id not in self.fresh
                    else RunRow.from_row(row)
                )
            if len(rows) < PAGE:
                return
            after = rows[-1].started_us

    def _stream_lines(self, stream: str, since: int) -> Iterator[Line]:
        """The stream's log lines from `since` on, folded by the end of this chunk, in the
        stream's order: a range read on (stream, time), each microsecond's lines put in order."""
        query = log_query(stream).where(events.c.seq <= self.upto)
        group: list[Line] = []
        for row in log_rows(self.conn, query, since):
            if group and row.event_time_us != group[0].time_us:
                yield from sorted(group, key=lambda line: (line.key, line.seq))
                group = []
            line = self._stored_line(stream, row)
            if line is not None:
                group.append(line)
        yield from sorted(group, key=lambda line: (line.key, line.seq))

    def _stored_line(self, stream: str, row: Any) -> Line | None:
        """A stored log line as the fold first took it; None for one it left out then."""
        try:
            p = load_payload("log.recorded", row.schema_version, row.payload)
            assert isinstance(p, LogRecorded)
            event = log_event(row, stream, p)
            if unusable(event) is not None:
                return None
            return _line(event, p)._replace(event=None)  # reported when first folded
        except Exception as e:
            if environmental(e):
                raise
            return None

    def _drop(self, stored: RunRow) -> None:
        """A stored run the re-derivation did not cut again: it goes (unless cut again)."""
        self._remember(stored)
        if stored.run_id in self.fresh:
            return
        if self.sink is not None:
            self.sink.dropped(stored.run_id)
        self.runs.pop(stored.run_id, None)
        self.deleted.add(stored.run_id)

    def _before(self, stream: str, since: int) -> RunRow | None:
        row = self.conn.execute(
            select(runs)
            .where(runs.c.stream == stream)
            .where(runs.c.started_us < since)
            .order_by(runs.c.started_us.desc())
            .limit(1)
        ).first()
        return None if row is None else self._loaded(RunRow.from_row(row))


def _line(event: StoredEvent, p: LogRecorded) -> Line:
    """`event`'s line (its payload `p`), parsed, at its place in its stream's order."""
    return Line(
        order_key(event.time_us, p),
        event.seq,
        event.time_us,
        p.invocation_id,
        parsed_line(event.seq, event.time_us, p),
        event,
    )
