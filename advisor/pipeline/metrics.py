"""Prometheus metrics, read from the store at each scrape: what `advisor watch --metrics`
serves on /metrics, and what another server (`advisor serve`) can mount (`asgi_app`).

`StoreCollector` opens the store for each scrape (its own connection, in the scraping thread),
reads the projections as the daemon keeps them (it folds nothing itself) and the newest
events, and closes it. The metric names are listed in `METRICS` and in docs/metrics.md;
deploy/ holds a Grafana dashboard and Prometheus alert rules built on them.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final

from prometheus_client import CollectorRegistry, make_asgi_app, start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from advisor.core.address import host_port
from advisor.core.errors import InputError
from advisor.core.heartbeat import agent_version
from advisor.core.payloads import GpuSampled
from advisor.fleet.ship import checkpoint_name
from advisor.store import EventFilter
from advisor.store.engine import redact
from advisor.store.integrity.retained import last_seq
from advisor.views.read import tallies
from advisor.views.read.gpufaults import host_faults
from advisor.views.read.hosts import host_health

if TYPE_CHECKING:
    from advisor.store import EventStore

# Crash → proposal latency buckets, seconds.
LATENCY_BUCKETS: Final = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
GPU_EVENTS: Final = 512  # the newest GPU samples read per scrape (the latest of each GPU)

METRICS: Final = {
    "advisor_incidents": "Incidents, by host, unit, failure label and status.",
    "advisor_actions": "Action steps, by kind and outcome (status).",
    "advisor_plans_pending": "Plans of open incidents whose steps all wait for approval.",
    "advisor_proposal_latency_seconds": "From a crash to the first plan for its incident.",
    "advisor_journal_lag_seconds": "The newest stored log entry: stored minus written time.",
    "advisor_journal_last_entry_timestamp_seconds": "When the newest stored entry was written.",
    "advisor_ship_lag_events": "Events of this store not yet shipped to the central store.",
    "advisor_gpu_memory_used_bytes": "GPU memory used, per GPU (the newest sample).",
    "advisor_gpu_memory_total_bytes": "GPU memory, per GPU.",
    "advisor_gpu_unit_memory_used_bytes": "GPU memory used by a unit's processes, per GPU.",
    "advisor_gpu_sample_timestamp_seconds": "When each GPU was last sampled.",
    "advisor_build_info": "The advisor serving these metrics: its version (always 1).",
    "advisor_host_last_event_timestamp_seconds": "Each host's newest event (its time).",
    "advisor_host_last_heartbeat_timestamp_seconds": "Each host's newest agent heartbeat.",
    "advisor_host_heartbeat_interval_seconds": "Each host's heartbeat interval.",
    "advisor_host_ship_lag_seconds": "Per shipping host: now minus its newest event here.",
    "advisor_gpu_faults": "GPU faults stored (Xids, growing ECC/NVLink/row counters, throttling)"
    ", by host, GPU, kind, Xid and severity.",
}


def _gauge(name: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, METRICS[name], labels=labels)


class StoreCollector(Collector):
    """Every advisor metric from the store; `ship_to` names the central store shipped to."""

    def __init__(self, open_store: Callable[[], EventStore], ship_to: str | None = None) -> None:
        self.open_store = open_store
        self.ship_to = ship_to

    def describe(self) -> Iterator[Metric]:
        return iter(())  # the metrics depend on the store: nothing is read at registration

    def collect(self) -> Iterator[Metric]:
        store = self.open_store()
        try:
            yield from _incident_metrics(store)
            yield from _action_metrics(store)
            yield from _journal_metrics(store)
            yield from _ship_metrics(store, self.ship_to)
            yield from _gpu_metrics(store)
            yield from _host_metrics(store)
            yield from _fault_metrics(store)
        finally:
            store.close()


def _incident_metrics(store: EventStore) -> Iterator[Metric]:
    counts = Counter[tuple[str, str, str, str]]()
    for host, unit, label, status, n in tallies.incident_counts(store):
        counts[(host, unit, label or "unclassified", status)] += n
    family = _gauge("advisor_incidents", ["host", "unit", "label", "status"])
    for labels, n in sorted(counts.items()):
        family.add_metric(list(labels), n)
    yield family
    # superseded incidents too: the histogram only grows
    latencies = sorted(us / 1e6 for us in tallies.proposal_latencies_us(store))
    buckets = [(str(b), float(bisect_right(latencies, b))) for b in LATENCY_BUCKETS]
    buckets.append(("+Inf", float(len(latencies))))
    yield HistogramMetricFamily(
        "advisor_proposal_latency_seconds",
        METRICS["advisor_proposal_latency_seconds"],
        buckets=buckets,
        sum_value=sum(latencies),
    )


def _action_metrics(store: EventStore) -> Iterator[Metric]:
    family = _gauge("advisor_actions", ["kind", "status"])
    for kind, status, n in sorted(tallies.action_counts(store)):
        family.add_metric([kind, status], n)
    yield family
    yield GaugeMetricFamily(
        "advisor_plans_pending",
        METRICS["advisor_plans_pending"],
        value=tallies.plans_pending(store),
    )


def _journal_metrics(store: EventStore) -> Iterator[Metric]:
    newest = list(store.read(EventFilter(type="log.recorded", limit=1)))
    if not newest:
        return
    e = newest[-1]
    lag = _gauge("advisor_journal_lag_seconds", [])
    lag.add_metric([], max(0, e.recorded_us - e.time_us) / 1e6)
    yield lag
    last = _gauge("advisor_journal_last_entry_timestamp_seconds", [])
    last.add_metric([], e.time_us / 1e6)
    yield last


def _ship_metrics(store: EventStore, ship_to: str | None) -> Iterator[Metric]:
    if ship_to is None:
        return
    saved = store.checkpoint(checkpoint_name(ship_to))
    shipped = int(saved["seq"]) if saved else 0
    where = redact(ship_to)
    lag = _gauge("advisor_ship_lag_events", ["central"])
    lag.add_metric([where], max(0, last_seq(store) - shipped))
    yield lag


def _gpu_metrics(store: EventStore) -> Iterator[Metric]:
    latest: dict[tuple[str, int], tuple[int, GpuSampled]] = {}
    for e in store.read(EventFilter(type="gpu.sampled", limit=GPU_EVENTS)):
        if isinstance(e.payload, GpuSampled):
            latest[(e.payload.host, e.payload.index)] = (e.time_us, e.payload)
    used = _gauge("advisor_gpu_memory_used_bytes", ["host", "gpu"])
    total = _gauge("advisor_gpu_memory_total_bytes", ["host", "gpu"])
    when = _gauge("advisor_gpu_sample_timestamp_seconds", ["host", "gpu"])
    per_unit = _gauge("advisor_gpu_unit_memory_used_bytes", ["host", "gpu", "unit"])
    for (host, index), (time_us, p) in sorted(latest.items()):
        labels = [host, str(index)]
        used.add_metric(labels, p.memory_used_bytes)
        total.add_metric(labels, p.memory_total_bytes)
        when.add_metric(labels, time_us / 1e6)
        units: Counter[str] = Counter()
        for q in p.processes or ():
            if q.unit:
                units[q.unit] += q.used_bytes or 0
        for unit, n in sorted(units.items()):
            per_unit.add_metric([*labels, unit], n)
    yield from (used, total, when, per_unit)


def _host_metrics(store: EventStore) -> Iterator[Metric]:
    """The build, and each host's newest event and heartbeat (advisor.views.read.hosts): on
    a central store, one series per host that ships to it, with its ship lag."""
    build = _gauge("advisor_build_info", ["version"])
    build.add_metric([agent_version()], 1)
    yield build
    last = _gauge("advisor_host_last_event_timestamp_seconds", ["host"])
    beat = _gauge("advisor_host_last_heartbeat_timestamp_seconds", ["host"])
    interval = _gauge("advisor_host_heartbeat_interval_seconds", ["host"])
    lag = _gauge("advisor_host_ship_lag_seconds", ["host"])
    for h in host_health(store):
        if h.last_event_us is not None:
            last.add_metric([h.host], h.last_event_us / 1e6)
        if h.last_heartbeat_us is not None:
            beat.add_metric([h.host], h.last_heartbeat_us / 1e6)
            interval.add_metric([h.host], h.interval_s)
        if h.ship_lag_s is not None:
            lag.add_metric([h.host], h.ship_lag_s)
    yield from (last, beat, interval, lag)


def _fault_metrics(store: EventStore) -> Iterator[Metric]:
    """`advisor_gpu_faults_total`: every `gpu.fault` event counted (they are few: an Xid, or a
    counter that grew). The GPU is its index, else the PCI address a kernel line named."""
    counts: Counter[tuple[str, str, str, str, str]] = Counter()
    for view in host_faults(store, None):
        f = view.fault
        gpu = str(view.gpu) if view.gpu is not None else f"pci:{f.pci_bus or 'none'}"
        xid = str(f.xid) if f.xid is not None else "none"
        counts[(f.host, gpu, f.kind, xid, f.severity)] += 1
    family = CounterMetricFamily(
        "advisor_gpu_faults",
        METRICS["advisor_gpu_faults"],
        labels=["host", "gpu", "kind", "xid", "severity"],
    )
    for labels, n in sorted(counts.items()):
        family.add_metric(list(labels), n)
    yield family


def registry_for(open_store: Callable[[], EventStore], ship_to: str | None = None) -> Any:
    """A registry holding the advisor metrics only (no process or platform metrics)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(open_store, ship_to))
    return registry


def asgi_app(registry: CollectorRegistry) -> Any:
    """An ASGI app serving the registry's metrics (mount it at /metrics)."""
    return make_asgi_app(registry)


def parse_listen(listen: str) -> tuple[str, int]:
    """`--metrics HOST:PORT` as (host, port); InputError naming it otherwise."""
    return host_port(listen, "--metrics", "127.0.0.1:9750")


def serve_metrics(listen: str, registry: CollectorRegistry) -> Callable[[], None]:
    """Serve /metrics at `listen` in a thread; the function that stops it. InputError when
    the address cannot be bound."""
    host, port = parse_listen(listen)
    try:
        server, thread = start_http_server(port, addr=host, registry=registry)
    except OSError as e:
        raise InputError(f"--metrics {listen}: cannot listen there: {e.strerror or e}") from e

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)

    return stop
