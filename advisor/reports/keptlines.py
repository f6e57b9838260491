"""The post-mortem's word on the lines a host kept: in a central store, how many of the
routine lines of the incident's last ten minutes (`LAST_S`) are still on the host only (and
the command that brings them: `advisor fetch`), how many were fetched, and the last of those
before the incident's end — what the server was serving when it failed.

A host's own store holds every line and no kept range: there the section is absent.
"""

from __future__ import annotations

from typing import Final, TypedDict

from advisor.core.events import StoredEvent
from advisor.core.ids import short_id
from advisor.core.payloads import LogRecorded
from advisor.core.timefmt import format_us
from advisor.store import EventStore
from advisor.store.integrity.kept import fetched_keys, kept_ranges
from advisor.views.read.reading import fetched_lines
from advisor.views.read.rows import IncidentView, RunView

LAST_LINES: Final = 10
# What a post-mortem needs of the routine lines: the last ten minutes before the end (a run
# that served for a week is not fetched whole; `advisor fetch --last` says otherwise).
LAST_S: Final = 600.0


class KeptLine(TypedDict):
    time: str
    seq: int  # the host's seq
    text: str


class KeptSection(TypedDict):
    host: str
    unit: str
    on_host: int  # the service's lines in the last LAST_S kept on the host, not fetched
    fetched: int  # those fetched here
    ranges: int
    last_s: float  # the seconds before the end counted (LAST_S)
    command: str  # how to fetch the rest
    last_lines: list[KeptLine]


def window(runs: list[RunView], last_s: float = LAST_S) -> tuple[int, int]:
    """The last `last_s` seconds (0: all) of these runs' time span (µs), which runs from the
    first's start to the last's last line."""
    last = runs[-1]
    end = max(t for t in (last.started_us, last.last_us, last.ended_us) if t is not None)
    start = runs[0].started_us
    return (max(start, end - int(last_s * 1_000_000)) if last_s > 0 else start), end


def kept_section(
    store: EventStore, incident: IncidentView, runs: list[RunView]
) -> KeptSection | None:
    """How the kept lines of the incident's runs' last `LAST_S` stand in this store; None
    when it holds no range kept by the host there (a host's own store: every line is
    here)."""
    host, unit = incident.host, incident.unit
    stream, span = f"{host}/{unit}", window(runs)
    ranges = [r for r in kept_ranges(store, host, *span) if stream in r.streams]
    if not ranges:
        return None
    here = fetched_keys(store, host, [r.key for r in ranges])
    return KeptSection(
        host=host,
        unit=unit,
        on_host=sum(r.streams[stream] for r in ranges if r.key not in here),
        fetched=sum(r.streams[stream] for r in ranges if r.key in here),
        ranges=len(ranges),
        last_s=LAST_S,
        command=f"advisor fetch {stream} --incident {short_id(incident.incident_id)}",
        last_lines=[
            KeptLine(time=format_us(e.time_us), seq=e.key, text=_message(e))
            for e in fetched_lines(store, host, stream, span, LAST_LINES)
        ],
    )


def _message(event: StoredEvent) -> str:
    p = event.payload
    return (p.message or "") if isinstance(p, LogRecorded) else ""
