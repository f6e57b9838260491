"""Fetching the lines a host kept, for a central post-mortem: what one incident's fetch takes,
and what sending kept ranges costs the host and the central store, against shipping every
line as it is.

    .venv/bin/python bench/fetch.py [--lines 100000] [--url URL] [--report]

One host's store: the seed scenario (a vLLM service's start-up, its crash in the sampler
warm-up, the diagnosis) with `--lines` request and throughput lines served inside the failed
run — a busy server's routine lines before it died. On fresh databases of the local
PostgreSQL (`--url`; dropped after):

1. **The floor**: the store shipped with `--lines all` (every event as it is): the shipper's
   CPU and the server's CPU per event.
2. **The fleet selection** (the default) ships it; the owner folds.
3. **One incident** (the newest): `advisor fetch`'s work — ask for the ranges of its runs,
   the host's answer (what its agent does in its next round), the fold — and `explain`
   after it. A person waits this plus at most one round of the agent's shipping (5 s).
   The host's answer's CPU (the shipper's and the server's) per fetched event, against the
   floor's per shipped event (target: a fetched line costs about what a line shipped as it
   is costs, ≤ 1.1×; so fetching on demand, not shipping compact batches of every routine
   line, is the cheaper path while fewer than nine lines in ten are ever asked for).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

try:
    from bench import figures
    from bench.fleet import (
        ACCESS,
        THROUGHPUT,
        _drop_database,
        _line,
        _postgres_cpu,
        add_url,
        fresh_database,
    )
except ImportError:  # run as a script: python bench/fetch.py
    import figures  # type: ignore[no-redef]
    from fleet import (  # type: ignore[no-redef]
        ACCESS,
        THROUGHPUT,
        _drop_database,
        _line,
        _postgres_cpu,
        add_url,
        fresh_database,
    )

from advisor.fleet.fetch import answer_requests, ask_for  # noqa: E402
from advisor.fleet.selection import Selection  # noqa: E402
from advisor.fleet.ship import ship  # noqa: E402
from advisor.pipeline.processing import Processor  # noqa: E402
from advisor.reports.keptlines import window  # noqa: E402
from advisor.reports.postmortem import build, incident_runs  # noqa: E402
from advisor.store import EventStore, open_store  # noqa: E402
from advisor.store.integrity.central import writer_for  # noqa: E402
from advisor.views.fold.projector import Projector  # noqa: E402
from advisor.views.read.incidents import incident_rows  # noqa: E402
from ingest.journal_sources import ingest_json_file  # noqa: E402

# ten minutes of a server logging ~170 lines a second, asked, sent, checked and folded
INCIDENT_TARGET_S = 30.0
IDLE_ROUNDS = 200
SEED = ROOT / "tests" / "fixtures" / "seed-minimax-m25.journal.jsonl"


class Cpu:
    """This process's CPU (the host's side) and the server's, from `start` on."""

    def __init__(self) -> None:
        self.host, self.server, self.wall = time.process_time(), _postgres_cpu(), time.monotonic()

    def spent(self) -> tuple[float, float, float]:
        return (
            time.process_time() - self.host,
            _postgres_cpu() - self.server,
            time.monotonic() - self.wall,
        )


def _answer_all(host: EventStore, central: EventStore, name: str) -> tuple[int, int]:
    """The host's answers to every open request, 20 ranges a round: (ranges, events)."""
    writer, ranges, events = writer_for(central), 0, 0
    while True:
        report = answer_requests(host, writer, name, lambda attempt: attempt())
        if not report.ranges:
            return ranges, events
        ranges, events = ranges + report.ranges, events + report.events


def host_store(url: str, lines: int) -> tuple[str, str]:
    """The seed scenario (a vLLM service's start-up, its crash in the sampler warm-up, the
    diagnosis) with `lines` request and throughput lines served inside the failed run: a
    busy server's routine lines before it died. (host, service)"""
    with open_store(url) as host:
        ingest_json_file(host, SEED)
        Processor(host).run(final=True)
        incident = max(incident_rows(host), key=lambda i: i.opened_us)
        service = f"{incident.host}/{incident.unit}"
        _, runs = incident_runs(host, service, incident.incident_id)
        start, end = window(runs)
        step = max(1, (end - start) // (lines + 2))
        batch = []
        for i in range(lines):
            message = (
                THROUGHPUT.format(s=i % 60, x=812.4, y=95.1, n=12)
                if i % 100 == 0
                else ACCESS.format(a=i % 250, b=i % 199, p=40_000 + i % 20_000)
            )
            batch.append(_line(service, start + (i + 1) * step, incident.host, message, i + 1))
            if len(batch) == 5000:
                host.append_prepared(batch)
                batch = []
        host.append_prepared(batch)
    return incident.host, service


def run(base: str, work: Path, lines: int) -> dict[str, Any]:
    host_url = f"sqlite:///{work / 'host.db'}"
    name, service = host_store(host_url, lines)
    with open_store(host_url) as host:
        events = sum(1 for _ in host.read_raw())
    out: dict[str, Any] = {"events": events}
    url = fresh_database(base, "advisor_fetch_bench_all")
    try:
        with open_store(url) as central, open_store(host_url) as host:
            cpu = Cpu()
            ship(host, central, name, fold=False)
            out["all"] = cpu.spent()
    finally:
        _drop_database(base, "advisor_fetch_bench_all")
    url = fresh_database(base, "advisor_fetch_bench_fleet")
    try:
        with open_store(url) as central, open_store(host_url) as host:
            out["shipped"] = ship(host, central, name, fold=False, selection=Selection()).held
            Projector(central).catch_up()
            newest = max(incident_rows(central, host=name), key=lambda i: i.opened_us)
            cpu = Cpu()
            _, runs = incident_runs(central, service, newest.incident_id)
            asked = ask_for(central, name, newest.unit, window(runs), "bench")
            asked_s = cpu.spent()[2]
            answering = Cpu()
            one = _answer_all(host, central, name)
            out["answer_cpu"] = answering.spent()
            answered_s = cpu.spent()[2]
            Projector(central).catch_up()
            out["incident"] = (service, len(asked.ranges), asked.lines(fetched=False), *one)
            out["incident_s"] = cpu.spent()[2]
            out["incident_parts"] = (asked_s, answered_s - asked_s, out["incident_s"] - answered_s)
            idle = Cpu()  # a round with nothing asked: what every round of every host pays
            for _ in range(IDLE_ROUNDS):
                answer_requests(host, writer_for(central), name, lambda attempt: attempt())
            out["idle_round"] = [x / IDLE_ROUNDS for x in idle.spent()]
            started = time.monotonic()
            report = build(central, service, newest.incident_id)
            out["explain_s"] = time.monotonic() - started
            out["explain_kept"] = report["kept"]
            started = time.monotonic()
            build(host, service, newest.incident_id)
            out["explain_host_s"] = time.monotonic() - started
    finally:
        _drop_database(base, "advisor_fetch_bench_fleet")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_url(parser)
    parser.add_argument(
        "--lines", type=int, default=100_000, help="routine lines the server logged before it died"
    )
    parser.add_argument("--report", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="advisor-fetch-") as tmp:
        r = run(args.url, Path(tmp), args.lines)
    n = r["events"]
    host_all, server_all, wall_all = r["all"]
    service, inc_ranges, inc_lines, _, fetched = r["incident"]
    host_f, server_f, wall_f = r["answer_cpu"]
    per_all = (host_all + server_all) / n * 1e6
    per_fetched = (host_f + server_f) / max(1, fetched) * 1e6
    print(f"one host's store: {n:,} events, {r['shipped']:,} kept on the host by the selection")
    print(
        f"  --lines all (the floor): {host_all / n * 1e6:.1f} µs of shipper CPU and "
        f"{server_all / n * 1e6:.1f} µs of PostgreSQL CPU an event, {wall_all:.1f} s"
    )
    print(
        f"  one incident ({service}): {inc_ranges} kept ranges, {inc_lines:,} of its lines "
        f"({fetched:,} events): asked, answered and folded in {r['incident_s']:.2f} s "
        "(ask {:.2f} s, the host's answer {:.2f} s, the fold {:.2f} s); explain then "
        "{:.2f} s (on the host: {:.2f} s)".format(
            *r["incident_parts"], r["explain_s"], r["explain_host_s"]
        )
    )
    print(
        f"  the host's answer: {fetched:,} events in {wall_f:.1f} s "
        f"({fetched / max(wall_f, 1e-9):,.0f} events/s), {host_f / max(1, fetched) * 1e6:.1f} "
        f"µs of host CPU and {server_f / max(1, fetched) * 1e6:.1f} µs of PostgreSQL CPU an "
        f"event — {per_fetched / per_all:.2f}× a line shipped as it is"
    )
    idle_host, idle_server, idle_wall = r["idle_round"]
    print(
        f"  a round with nothing asked (every host, every round): {idle_wall * 1e3:.2f} ms, "
        f"{idle_host * 1e3:.2f} ms of host CPU and {idle_server * 1e3:.2f} ms of PostgreSQL CPU"
    )
    if args.report:
        figures.emit(
            [
                figures.Figure(
                    "fetch",
                    "one incident's kept lines fetched",
                    round(r["incident_s"], 2),
                    "s",
                    f"≤ {INCIDENT_TARGET_S:g} s for 100,000 lines (+ a round of the agent)",
                    r["incident_s"] <= INCIDENT_TARGET_S * max(1.0, r["incident"][2] / 100_000),
                ),
                figures.Figure(
                    "fetch",
                    "CPU per fetched event (host + server)",
                    round(per_fetched, 1),
                    "µs",
                    "≤ 1.1× a line shipped as it is",
                    per_fetched <= 1.1 * per_all,
                    floor=round(per_all, 1),
                    floor_name="advisor ship --lines all",
                    ratio=round(per_all / per_fetched, 2),
                ),
            ]
        )


if __name__ == "__main__":
    main()
