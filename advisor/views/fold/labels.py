"""A run's label: what `run.classified` said of the lines it has now (`run_labels` keeps
every classification, by run and content)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Row, bindparam, delete, select

from advisor.store.schema import run_labels
from advisor.views.fold.foldbase import IN, FoldBase
from advisor.views.fold.skipped import fit_row


def label_for(
    content: str, found: Sequence[Row[Any]]
) -> tuple[str | None, float | None, bool, int | None]:
    """(label, confidence, stale, seq): the latest label given for these lines (or by a
    version 1 event, for any), else the latest given to the run at all, stale."""
    for wanted in (content, ""):
        same = [r for r in found if r.content == wanted]
        if same:
            best = max(same, key=lambda r: r.seq)
            return best.label, best.confidence, False, best.seq
    if found:
        best = max(found, key=lambda r: r.seq)
        return best.label, best.confidence, True, best.seq
    return None, None, False, None


class Labelling(FoldBase):
    """The fold's part that labels runs."""

    def _label_runs(self) -> None:
        """Keep this chunk's classifications; label the runs they name and the runs whose
        lines changed (a run cut again finds the label its lines were given)."""
        if self.labels:
            keys = sorted(self.labels)
            self.conn.execute(
                delete(run_labels)
                .where(run_labels.c.run_id == bindparam("r"))
                .where(run_labels.c.content == bindparam("c")),
                [{"r": r, "c": c} for r, c in keys],
            )
            self.conn.execute(
                run_labels.insert(), [fit_row(run_labels, self.labels[k]) for k in keys]
            )
        for run_id in sorted(self.named):
            self._run(run_id)
        todo = [
            run
            for run in self.runs.values()
            if run.run_id in self.fresh
            or run.run_id in self.named
            or self.loaded[run.run_id].content != run.content
        ]
        found: dict[str, list[Row[Any]]] = {}
        ids = sorted({run.run_id for run in todo})
        for i in range(0, len(ids), IN):
            for row in self.conn.execute(
                select(run_labels).where(run_labels.c.run_id.in_(ids[i : i + IN]))
            ).all():
                found.setdefault(row.run_id, []).append(row)
        for run in todo:
            run.label, run.confidence, run.label_stale, run.label_seq = label_for(
                run.content, found.get(run.run_id, ())
            )
