"""The console's incident list on both kinds of store: the open incidents whose plans await a
decision first, then the newest, at most `limit`; the total it selects; each line's pending
steps counted only while its incident is open. Read as two index-ordered queries, checked
here against the order worked out from the rows themselves."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from advisor.core.events import NewEvent
from advisor.core.statuses import ActionStatus, IncidentStatus
from advisor.pipeline.processing import Processor
from advisor.store import EventStore
from advisor.views.read.actions import all_actions
from advisor.views.read.console import IncidentFilter, incident_list
from advisor.views.read.reading import read_rows

T0 = 1_790_000_000_000_000
SAMPLER = (
    "(Worker_TP0 pid=7) ERROR 12-01 10:00:00 [multiproc_executor.py:671] RuntimeError: CUDA out "
    "of memory occurred when warming up sampler with 1024 dummy requests."
)


def _line(unit: str, t: int, key: int, message: str, by_systemd: bool) -> NewEvent:
    return NewEvent.model_validate(
        {
            "stream": f"node-1/{unit}",
            "time_us": t,
            "source": "test",
            "key": key,
            "payload": {
                "type": "log.recorded",
                "origin": "journald",
                "host": "node-1",
                "unit": unit,
                "message": message,
                "identifier": "systemd" if by_systemd else "vllm",
                "pid": 1 if by_systemd else 4242,
            },
        }
    )


def _crash(unit: str, t: int, key: int, *, recovers: bool) -> Iterator[NewEvent]:
    """A crash in the sampler warm-up; with `recovers`, a restart that comes up healthy."""
    lines = [
        (True, f"Started {unit} - vLLM."),
        (False, "INFO 12-01 10:00:00 [gpu_model_runner.py:1] Warming up sampler with 1024"),
        (False, SAMPLER),
        (True, f"{unit}: Main process exited, code=exited, status=1/FAILURE"),
        (True, f"{unit}: Failed with result 'exit-code'."),
    ]
    if recovers:
        lines += [
            (True, f"{unit}: Scheduled restart job, restart counter is at 1."),
            (True, f"Started {unit} - vLLM."),
            (False, "INFO:     Application startup complete."),
        ]
    for n, (by_systemd, message) in enumerate(lines):
        yield _line(unit, t + n * 1_000_000, key + n, message, by_systemd)


def test_waiting_plans_first_then_the_newest(
    store_url: str, opener: Callable[[str], EventStore]
) -> None:
    store = opener(store_url)
    events: list[NewEvent] = []
    # the oldest crash stays open (its plan waits); six newer ones, on other units, recover
    events += _crash("vllm-0.service", T0, 100, recovers=False)
    for i in range(1, 7):
        events += _crash(f"vllm-{i}.service", T0 + i * 3_600_000_000, 100 * (i + 1), recovers=True)
    store.append(events)
    Processor(store).run(final=True)

    rows = [r for r in read_rows(store, "incidents") if r["status"] != IncidentStatus.SUPERSEDED]
    waiting: dict[str, int] = {}
    for a in all_actions(store):
        if a.status == ActionStatus.PROPOSED and not a.alternative and a.incident_id:
            waiting[a.incident_id] = waiting.get(a.incident_id, 0) + 1
    opened = {r["incident_id"] for r in rows if r["status"] == IncidentStatus.OPEN}
    assert len(rows) == 7 and len(opened) == 1 and waiting.get(next(iter(opened)), 0) > 0
    pending = {
        i: (waiting.get(i, 0) if i in opened else 0) for i in (r["incident_id"] for r in rows)
    }
    expected = sorted(
        rows, key=lambda r: (pending[r["incident_id"]] == 0, -r["opened_us"], r["incident_id"])
    )

    lines, total = incident_list(store, IncidentFilter(), limit=4)
    assert total == 7
    assert [line.incident.incident_id for line in lines] == [r["incident_id"] for r in expected[:4]]
    assert lines[0].incident.status == IncidentStatus.OPEN and lines[0].pending > 0
    assert [line.pending for line in lines[1:]] == [0, 0, 0]  # resolved: nothing waits
    # a filter that leaves the open one out: the newest resolved ones only
    lines, total = incident_list(store, IncidentFilter(unit="vllm-6.service"))
    assert total == 1 and [line.incident.unit for line in lines] == ["vllm-6.service"]
