"""Which hosts a store holds events of, and how each is doing (`advisor hosts`, the console's
hosts page, the per-host metrics).

`log_hosts`: the hosts of the streams that hold log lines: `advisor ingest nvidia-smi` asks
before it files a CSV under this host's name.

`host_health`: every host (a stream `HOST/...`, or an incident of it) with its newest event,
its newest heartbeat (`agent.heartbeat`, advisor.core.heartbeat: agent version, interval,
GPUs), its ship lag, its open incidents and GPU faults, and whether it is silent. Ship lag is
read on a central store, for a host that ships to it: now minus the time the host recorded
the newest event the central store holds of it (with heartbeats, a healthy shipper keeps it
under a heartbeat interval plus a round of shipping). A host is silent when its newest
heartbeat (without any, its newest event) is older than twice its heartbeat interval (the
default interval for a host that sent none). Each stream's newest event, heartbeat and
shipped event come from the fold's `stream_heads` (advisor.views.fold.heads) and the events
after the fold's position; the heartbeats and shipped events themselves are then read by seq.
"""

from __future__ import annotations

import contextlib
import re
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import orjson
from sqlalchemy import func, select

from advisor.core.events import load_payload
from advisor.core.heartbeat import DEFAULT_INTERVAL_S, HEARTBEAT, AgentHeartbeat, agent_stream
from advisor.core.payloads import GpuFault
from advisor.core.statuses import IncidentStatus
from advisor.core.taxonomy import GPU_HARDWARE_FAULT
from advisor.core.xids import HARDWARE
from advisor.store.engine import in_parts
from advisor.store.schema import events, incidents, sources
from advisor.views.fold.heads import Seen, load_heads, merge
from advisor.views.fold.projector import folded_through

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from advisor.store import EventStore

GPU_STREAM: Final = re.compile(r"/gpu\d+\Z")  # HOST/gpuN holds GPU samples, never log lines
SILENT_AFTER: Final = 2.0  # heartbeat intervals without one: silent
GPU_FAULT: Final = GpuFault.model_fields["type"].default


def log_hosts(store: EventStore, at_most: int = 2) -> set[str]:
    """The hosts of the streams that hold a `log.recorded` event, up to `at_most` of them.
    Streams are found one at a time through the (stream, seq) index, so a store of millions
    of events costs one index look-up per stream, not a scan."""
    hosts: set[str] = set()
    with store.connect() as conn:
        for stream in _streams(conn):
            if len(hosts) >= at_most:
                break
            host = stream.split("/", 1)[0]
            if host not in hosts and not GPU_STREAM.search(stream):
                logged = conn.execute(
                    select(events.c.seq)
                    .where(events.c.stream == stream, events.c.type == "log.recorded")
                    .limit(1)
                ).first()
                if logged is not None:
                    hosts.add(host)
    return hosts


def _streams(conn: Connection) -> Any:
    """Every stream, in order, one index look-up each."""
    stream = conn.execute(select(func.min(events.c.stream))).scalar()
    while stream is not None:
        yield stream
        stream = conn.execute(
            select(func.min(events.c.stream)).where(events.c.stream > stream)
        ).scalar()


@dataclass(frozen=True)
class HostHealth:
    """One host as `advisor hosts` shows it; times in µs since the epoch."""

    host: str
    last_event_us: int | None
    last_heartbeat_us: int | None
    agent_version: str | None
    interval_s: float  # its heartbeat interval (the default when it sent none)
    shipped: bool  # its events reached this store by `advisor ship`
    ship_lag_s: float | None  # None: not shipped here
    gpus: tuple[dict[str, Any], ...]  # index, name, uuid, memory_total_bytes, driver_version
    open_incidents: int
    # hardware GPU faults: `gpu.fault` events of hardware severity (docs/gpu-health.md), or
    # incidents labelled gpu_hardware_fault where more of those (a store without the events)
    gpu_faults: int
    silent: bool

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["gpus"] = list(self.gpus)
        return out


def host_health(store: EventStore, now_s: float | None = None) -> list[HostHealth]:
    """Every host of the store, by name; read on one connection."""
    now = time.time() if now_s is None else now_s
    with store.connect() as conn:
        by_host = _heads_by_host(conn)
        counts = _incident_counts(conn)
        for host, n in _hardware_faults(conn).items():
            open_n, faults = counts.get(host, (0, 0))
            counts[host] = (open_n, max(faults, n))
        names = sorted(set(by_host) | set(counts))
        wanted = [s for h in by_host.values() for s in (h.beat_seq, h.ship_seq) if s is not None]
        rows = _events_at(conn, wanted)
    out = []
    for name in names:
        heads = by_host.get(name, _HostHeads(None, None, None))
        beat = None if heads.beat_seq is None else rows.get(heads.beat_seq)
        shipped = None if heads.ship_seq is None else rows.get(heads.ship_seq)
        out.append(
            _health(
                name,
                heads.time_us,
                _heartbeat(beat),
                _ship_lag(shipped, now),
                counts.get(name, (0, 0)),
                now,
            )
        )
    return out


def _health(
    host: str,
    last: int | None,
    heartbeat: tuple[AgentHeartbeat | None, int | None],
    lag: float | None,
    counts: tuple[int, int],
    now: float,
) -> HostHealth:
    beat, beat_us = heartbeat
    interval = beat.interval_s if beat is not None else DEFAULT_INTERVAL_S
    seen = beat_us if beat_us is not None else last
    return HostHealth(
        host=host,
        last_event_us=last,
        last_heartbeat_us=beat_us,
        agent_version=beat.agent_version if beat is not None else None,
        interval_s=interval,
        shipped=lag is not None,
        ship_lag_s=lag,
        gpus=tuple(g.model_dump() for g in beat.gpus) if beat is not None else (),
        open_incidents=counts[0],
        gpu_faults=counts[1],
        silent=seen is None or now - seen / 1e6 > SILENT_AFTER * interval,
    )


class _HostHeads(NamedTuple):
    time_us: int | None  # its newest event's time: the newest by seq of each of its streams
    beat_seq: int | None  # its newest heartbeat (in its agent stream)
    ship_seq: int | None  # the newest event it shipped here


def _heads_by_host(conn: Connection) -> dict[str, _HostHeads]:
    """Each host's heads: the fold's `stream_heads` and the events it has not folded yet."""
    heads = load_heads(conn)
    tail = conn.execute(
        select(
            events.c.seq,
            events.c.stream,
            events.c.type,
            events.c.event_time_us,
            sources.c.name,
        )
        .join(sources, sources.c.id == events.c.source_id)
        .where(events.c.seq > folded_through(conn))
        .order_by(events.c.seq)
    )
    merge(heads, (Seen(*row) for row in tail))
    out: dict[str, _HostHeads] = {}
    for stream, head in heads.items():
        if "/" not in stream:
            continue  # not a host's (the pipeline's own records)
        host = stream.split("/", 1)[0]
        had = out.get(host, _HostHeads(None, None, None))
        out[host] = _HostHeads(
            max(had.time_us or 0, head.time_us),
            head.beat_seq if stream == agent_stream(host) else had.beat_seq,
            had.ship_seq,
        )
    for head in heads.values():  # shipped: by the host that shipped it, whichever stream
        shipper = out.get(head.shipper or "")
        if shipper is None or head.ship_seq is None:
            continue
        if shipper.ship_seq is None or head.ship_seq > shipper.ship_seq:
            out[str(head.shipper)] = shipper._replace(ship_seq=head.ship_seq)
    return out


def _events_at(conn: Connection, seqs: list[int]) -> dict[int, Any]:
    """The events (rows) of these seqs (an event retention has taken is not there)."""
    found: dict[int, Any] = {}
    for part in in_parts(seqs):
        rows = conn.execute(
            select(
                events.c.seq,
                events.c.type,
                events.c.schema_version,
                events.c.event_time_us,
                events.c.recorded_time_us,
                events.c.payload,
                events.c.origin,
            ).where(events.c.seq.in_(part))
        )
        found.update((int(r.seq), r) for r in rows)
    return found


def _incident_counts(conn: Connection) -> dict[str, tuple[int, int]]:
    """host → (open incidents, GPU hardware faults)."""
    counts: dict[str, tuple[int, int]] = {}
    rows = conn.execute(
        select(incidents.c.host, incidents.c.status, incidents.c.label, func.count())
        .where(incidents.c.status != IncidentStatus.SUPERSEDED.value)
        .group_by(incidents.c.host, incidents.c.status, incidents.c.label)
    )
    for host, status, label, n in rows:
        open_n, faults = counts.get(host, (0, 0))
        if status == IncidentStatus.OPEN.value:
            open_n += n
        if label == GPU_HARDWARE_FAULT:
            faults += n
        counts[host] = (open_n, faults)
    return counts


def _hardware_faults(conn: Connection) -> dict[str, int]:
    """host → its `gpu.fault` events of hardware severity (they are few: an Xid, or a health
    counter that grew)."""
    found: dict[str, int] = {}
    rows = conn.execute(select(events.c.payload).where(events.c.type == GPU_FAULT))
    for (raw,) in rows:
        payload = orjson.loads(raw) if isinstance(raw, str | bytes) else raw
        if isinstance(payload, dict) and payload.get("severity") == HARDWARE:
            host = str(payload.get("host"))
            found[host] = found.get(host, 0) + 1
    return found


def _ship_lag(row: Any, now: float) -> float | None:
    """Now minus when the host recorded the newest event this store holds as shipped by it
    (`row`); None when it ships nothing here."""
    if row is None:
        return None
    recorded = int(row.recorded_time_us)  # shipped before origins were kept: when it arrived
    with contextlib.suppress(TypeError, ValueError, KeyError):
        recorded = int(orjson.loads(row.origin)["recorded_us"])
    return round(max(0.0, now - recorded / 1e6), 3)


def _heartbeat(row: Any) -> tuple[AgentHeartbeat | None, int | None]:
    """The host's newest heartbeat (`row`) and its time."""
    if row is None or row.type != HEARTBEAT:
        return None, None
    beat = load_payload(HEARTBEAT, int(row.schema_version), row.payload)
    return (beat, int(row.event_time_us)) if isinstance(beat, AgentHeartbeat) else (None, None)
