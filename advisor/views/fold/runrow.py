"""A `runs` row being folded: the run fold (`parsing.runfold.RunFold`, marked by time) and
what the table keeps besides (its place in the stream, its label, its peak GPU memory)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import orjson

from advisor.parsing.parsed import Parsed
from advisor.parsing.runfold import RunFold, ended_badly
from advisor.store.schema import runs
from advisor.views.fold.keys import run_content

_FOLDED: Final = (
    "ended_us",
    "last_phase",
    "ready_us",
    "stop_us",
    "ended",
    "exit_code",
    "exit_signal",
    "unit_result",
    "restart_count",
    "stop_timed_out",
)


@dataclass(kw_only=True)
class RunRow(RunFold):
    """A `runs` row being folded. It answers `runfold.Boundary` for run cutting."""

    run_id: str
    stream: str
    host: str
    unit: str
    invocation_id: str | None
    first_seq: int
    last_seq: int
    started_us: int
    lines: int = 0
    died: bool = False
    outcome: str = "starting"
    peak_gpu_used_bytes: int | None = None
    peak_gpu_total_bytes: int | None = None
    label: str | None = None
    confidence: float | None = None
    incident_id: str | None = None
    peak_gpu_from_unit: bool | None = None
    first_key: str = ""
    last_key: str = ""
    last_us: int = 0
    label_stale: bool = False
    label_seq: int | None = None

    # -- the table's names for what the fold keeps ------------------------------------
    @property
    def ended_us(self) -> int | None:
        return self.ended_at

    @property
    def last_phase(self) -> str | None:
        return self.best_phase

    @property
    def ready_us(self) -> int | None:
        return self.ready_at

    @property
    def stop_us(self) -> int | None:
        return self.stop_at

    @property
    def exit_code(self) -> int | None:
        return self.event_facts.get("exit_code")

    @property
    def exit_signal(self) -> str | None:
        return self.event_facts.get("exit_signal")

    @property
    def unit_result(self) -> str | None:
        return self.event_facts.get("unit_result")

    @property
    def restart_count(self) -> int | None:
        return self.event_facts.get("restart_count")

    @property
    def stop_timed_out(self) -> bool:
        return bool(self.event_facts.get("stop_timed_out"))

    @property
    def content(self) -> str:
        return run_content(
            self.first_key,
            self.last_key,
            self.lines,
            self.peak_gpu_used_bytes,
            self.peak_gpu_total_bytes,
        )

    def add_line(self, p: Parsed, seq: int, time_us: int, key: str) -> None:
        """Fold one line (at `key` in the stream's order) into the run."""
        self.last_seq, self.last_key, self.last_us = seq, key, time_us
        self.lines += 1
        self.absorb(time_us, p)
        if not self.died and (ended_badly(self.event_facts, self.events) or self.said_died):
            self.died = True
        self.outcome = (
            "failed"
            if self.died
            else "stopped"
            if self.ended
            else "stopping"
            if self.stop_at is not None
            else "ready"
            if self.ready_at is not None
            else "starting"
        )

    def row(self) -> dict[str, Any]:
        values = {c.name: getattr(self, c.name) for c in runs.columns if c.name != "lifecycle"}
        values["phases"] = orjson.dumps(self.phases).decode()
        values["config"] = orjson.dumps(self.config, option=orjson.OPT_SORT_KEYS).decode()
        values["lifecycle"] = orjson.dumps(sorted(self.events)).decode()
        return values

    @classmethod
    def from_row(cls, row: Any) -> RunRow:
        values = dict(row._mapping)
        values.pop("content", None)
        lifecycle = values.pop("lifecycle", None)
        folded = {name: values.pop(name) for name in _FOLDED}
        values["phases"] = orjson.loads(values["phases"])
        values["config"] = orjson.loads(values["config"])
        values["first_key"] = values["first_key"] or ""
        values["last_key"] = values["last_key"] or ""
        values["last_us"] = values["last_us"] or values["started_us"]
        values["label_stale"] = bool(values["label_stale"])
        facts = {
            k: folded[k]
            for k in ("exit_code", "exit_signal", "unit_result", "restart_count")
            if folded[k] is not None
        }
        if folded["stop_timed_out"]:
            facts["stop_timed_out"] = True
        run = cls(
            **values,
            event_facts=facts,
            best_phase=folded["last_phase"],
            ready_at=folded["ready_us"],
            stop_at=folded["stop_us"],
            ended_at=folded["ended_us"] if folded["ended"] else None,
        )
        names = orjson.loads(lifecycle) if lifecycle else _events_implied(run)
        run.events = dict.fromkeys(names, 0)
        return run


def _events_implied(run: RunRow) -> set[str]:
    """Enough of the lifecycle to go on folding a run whose row did not keep it."""
    implied = set()
    if run.unit_result is not None:
        implied.add("failed")
    if run.ended:
        implied.add("exit")
    return implied
