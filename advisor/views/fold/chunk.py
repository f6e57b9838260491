"""One chunk's fold (or a re-derivation's): every part of it over the state they share,
the rows written back at the end."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import delete

from advisor.core.events import StoredEvent
from advisor.core.payloads import GpuSampled, IncidentClassified, LogRecorded, RunClassified
from advisor.store.schema import actions, fold_pending, incidents, runs
from advisor.views.fold.actions import ActionRows
from advisor.views.fold.cutting import RunCutting
from advisor.views.fold.foldbase import IN
from advisor.views.fold.gpu import GpuPeaks
from advisor.views.fold.incidents import IncidentRows
from advisor.views.fold.labels import Labelling
from advisor.views.fold.skipped import environmental, fit_row, reason_of, unusable


class Fold(RunCutting, Labelling, GpuPeaks, IncidentRows, ActionRows):
    """One chunk's fold: rows loaded on first touch, written back at the end."""

    def apply(self, batch: Iterable[StoredEvent]) -> None:
        for event in batch:
            # An event the tables cannot hold is skipped before it changes anything; one that
            # raises all the same is skipped too (the store's own failures propagate).
            reason = unusable(event)
            if reason is None:
                try:
                    self._apply_one(event)
                    continue
                except Exception as e:
                    if environmental(e):
                        raise
                    reason = reason_of(e)
            self.skipped.append((event, reason))
        self._place_lines()
        self.finish()

    def finish(self) -> None:
        """What the chunk's (or the re-derivation's) runs change: peaks, labels, incidents;
        all written."""
        self._recompute_peaks()
        self._label_runs()
        self._write_runs()
        self._recompute_incidents()
        self._write()

    def _apply_one(self, event: StoredEvent) -> None:
        p = event.payload
        if isinstance(p, LogRecorded):
            self._log(event, p)
        elif isinstance(p, GpuSampled):
            self._sample(event, p)
        elif isinstance(p, RunClassified):
            content = p.content or ""
            self.labels[(p.run_id, content)] = {
                "run_id": p.run_id,
                "content": content,
                "label": p.label,
                "confidence": p.confidence,
                "phase": p.phase,
                "seq": event.seq,
            }
            self.named.add(p.run_id)
        elif event.type.startswith("action."):
            self._action(event)
        elif isinstance(p, IncidentClassified):
            self.classified[p.incident_id] = (event, p)
        # incident.opened / recurred / resolved: what the diagnoser saw when it wrote them;
        # the incidents are worked out from the runs (`_recompute_incidents`)

    # -- writing -----------------------------------------------------------------------
    def _write_runs(self) -> None:
        for run in self.runs.values():
            loaded = self.loaded.get(run.run_id)
            if run.run_id in self.fresh and loaded is not None:
                run.incident_id = loaded.incident_id  # the incidents say if that changes
        gone = sorted(self.deleted | set(self.runs))
        for i in range(0, len(gone), IN):
            self.conn.execute(delete(runs).where(runs.c.run_id.in_(gone[i : i + IN])))
        if self.runs:
            self.conn.execute(
                runs.insert(), [fit_row(runs, self.runs[i].row()) for i in sorted(self.runs)]
            )

    def _write(self) -> None:
        if self.marks:
            streams = sorted(self.marks)
            self.conn.execute(delete(fold_pending).where(fold_pending.c.stream.in_(streams)))
            self.conn.execute(
                fold_pending.insert(),
                [
                    {
                        "stream": stream,
                        "first_key": self.marks[stream][0],
                        "first_us": self.marks[stream][1],
                        "last_key": self.marks[stream][2],
                    }
                    for stream in streams
                ],
            )
        if self.incidents or self.dropped:
            ids = sorted(set(self.incidents) | self.dropped)
            for i in range(0, len(ids), IN):
                self.conn.execute(
                    delete(incidents).where(incidents.c.incident_id.in_(ids[i : i + IN]))
                )
            if self.incidents:
                self.conn.execute(
                    incidents.insert(),
                    [fit_row(incidents, self.incidents[i]) for i in sorted(self.incidents)],
                )
        if self.actions:
            ids = sorted(self.actions)
            self.conn.execute(delete(actions).where(actions.c.action_id.in_(ids)))
            self.conn.execute(actions.insert(), [fit_row(actions, self.actions[i]) for i in ids])
