"""Soak of `advisor watch`: memory stays flat and the daemon stays cheap under a steady load.

    .venv/bin/python bench/soak.py [--duration 7200] [--rate 2000] [--crash-every 60] [--report]
        [--tracemalloc DIR [--snapshot-s 600]]

Runs `advisor watch --journal-file J --no-gpu` on a fresh SQLite store, as bench/latency.py
does, and appends to the binary journal J (with systemd-journal-remote, as journald would)
`--rate` lines a second of realistic vLLM logs (bench/journal_gen.py: request traffic,
startups, the generator's own crashes, kernel noise), restamped to now, plus one sampler-OOM
crash of another unit every `--crash-every` seconds (bench/latency.py's, a new plan each).
Every `--sample-s` it samples the RSS of the watch process tree (advisor and its journalctl)
and their CPU time. It prints RSS at the start, after the warm-up and at the end, the RSS
slope after the warm-up (least squares, MB per hour), the CPU share (% of one core) after
the warm-up, and whether the daemon kept up (lines stored vs written, plans vs crashes).

Targets (the issue's soak is 2 h at 2,000 lines/s): slope ≤ 5 MB/h and end RSS within
+20 MB of the warm-up's; CPU < 2 % of one core at 200 lines/s. Needs journalctl and
systemd-journal-remote.
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

try:
    from bench import figures, journal_gen, latency
except ImportError:  # run as a script: python bench/soak.py
    import figures  # type: ignore[no-redef]
    import journal_gen  # type: ignore[no-redef]
    import latency  # type: ignore[no-redef]

from advisor.store import open_store  # noqa: E402

MB = 1024 * 1024
WRITE_EVERY_S = 0.25  # one systemd-journal-remote append this often
TARGET_SLOPE_MB_H = 5.0
TARGET_GROWTH_MB = 20.0
TARGET_CPU_PCT = 2.0  # of one core, at TARGET_CPU_RATE lines/s
TARGET_CPU_RATE = 200
TRACE_FRAMES = 4  # frames kept per traced allocation (--tracemalloc)
DROPPED = {"__CURSOR", "__REALTIME_TIMESTAMP", "__MONOTONIC_TIMESTAMP", "_BOOT_ID"}

Fields = list[tuple[str, bytes | str]]


def export_fields(line: bytes, t_us: int, t0_us: int) -> Fields:
    """A journal_gen JSON line as export fields, stamped `t_us`, on latency.py's boot (the one
    boot `watch` follows)."""
    fields: Fields = [
        ("__REALTIME_TIMESTAMP", str(t_us)),
        ("__MONOTONIC_TIMESTAMP", str(t_us - t0_us + 1)),
        ("_BOOT_ID", latency.BOOT),
    ]
    for name, value in orjson.loads(line).items():
        if name in DROPPED or value is None:
            continue
        if isinstance(value, list) and value and isinstance(value[0], int):
            fields.append((name, bytes(value)))
        elif isinstance(value, list):  # a repeated field
            fields.extend((name, v if isinstance(v, str) else bytes(v)) for v in value)
        else:
            fields.append((name, value))
    return fields


def beside(journal: Path) -> Path:
    """Where the export file to append goes: beside the folder watch follows."""
    return journal.parent.with_suffix(".export")


@dataclass
class Sample:
    t: float  # seconds since the start
    rss_mb: float  # the tree's RSS
    cpu_s: float
    own_mb: float = 0.0  # advisor's own RSS (without journalctl)
    anon_mb: float = 0.0  # the tree's anonymous RSS: heap, not mapped journal files


@dataclass
class Soak:
    samples: list[Sample] = field(default_factory=list)
    lines: int = 0  # generated lines written (crashes apart)
    crashes: int = 0
    stored_lines: int = 0
    plans: int = 0


def tree_sample(proc: psutil.Process, t: float) -> Sample:
    """RSS and CPU time (user + system) of `proc` and its children (journalctl)."""
    rss, cpu, anon, own = 0, 0.0, 0, 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            rss += p.memory_info().rss
            times = p.cpu_times()
            cpu += times.user + times.system
            anon += _rss_anon(p.pid)
        except psutil.NoSuchProcess:
            continue
        if p.pid == proc.pid:
            own = rss
    return Sample(t, rss / MB, cpu, own / MB, anon / MB)


def _rss_anon(pid: int) -> int:
    """RssAnon of /proc/PID/status, in bytes (0 where there is none). journalctl maps the
    journal files it reads: that shows in its RSS, as page cache, not as heap."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def slope_mb_h(samples: list[Sample], what: str = "rss_mb") -> float:
    """Least-squares slope of `what` (an MB field of Sample) over time, in MB per hour."""
    if len(samples) < 2:
        return 0.0
    n = len(samples)
    ys = [float(getattr(s, what)) for s in samples]
    mt = sum(s.t for s in samples) / n
    my = sum(ys) / n
    var = sum((s.t - mt) ** 2 for s in samples)
    if var == 0:
        return 0.0
    return sum((s.t - mt) * (y - my) for s, y in zip(samples, ys, strict=True)) / var * 3600


def feed(
    journal: Path,
    watch: subprocess.Popen[bytes],
    proc: psutil.Process,
    args: argparse.Namespace,
    t0_us: int,
    soak: Soak,
) -> None:
    """Write `rate` lines a second (and a crash every `crash_every` s) for `duration` s,
    sampling the watch tree every `sample_s`."""
    source: Iterator[bytes] = journal_gen.iter_lines(10**12)
    start = time.monotonic()
    next_write = next_sample = next_crash = start
    next_crash += args.crash_every
    while (now := time.monotonic()) < start + args.duration:
        if watch.poll() is not None:
            raise SystemExit("advisor watch exited during the soak")
        if now >= next_sample:
            soak.samples.append(tree_sample(proc, now - start))
            next_sample += args.sample_s
        if now >= next_write:
            due = int((now - start + WRITE_EVERY_S) * args.rate) - soak.lines
            t_us = time.time_ns() // 1000
            entries = [
                export_fields(line, t_us + i, t0_us)
                for i, line in enumerate(itertools.islice(source, max(0, due)))
            ]
            if now >= next_crash:
                soak.crashes += 1
                entries += latency.crash(soak.crashes, t_us + len(entries) + 1)
                next_crash += args.crash_every
            latency.append(journal, entries, export=beside(journal))
            soak.lines += max(0, due)
            next_write += WRITE_EVERY_S
        time.sleep(max(0.0, min(next_write, next_sample) - time.monotonic()))
    soak.samples.append(tree_sample(proc, time.monotonic() - start))


def count_events(db: Path) -> int:
    import sqlite3

    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return int(conn.execute("SELECT count(*) FROM events").fetchone()[0])


def drain(db: Path, limit_s: float = 120.0) -> tuple[int, float]:
    """Wait until the store stops growing (the daemon has caught up): its event count, and
    how long that took."""
    start = time.monotonic()
    last, still = -1, 0
    while still < 4 and time.monotonic() - start < limit_s:
        n = count_events(db)
        still = still + 1 if n == last else 0
        last = n
        time.sleep(0.5)
    return last, max(0.0, time.monotonic() - start - 2.0)


def run(args: argparse.Namespace) -> tuple[Soak, float]:
    with tempfile.TemporaryDirectory() as tmp:
        # watch follows the folder: systemd-journal-remote rotates the file (at ~175,000
        # distinct messages, ~90 s at 2,000 lines/s) and --file would stay on the old one
        (Path(tmp) / "journal").mkdir()
        journal = Path(tmp) / "journal" / "live.journal"
        db = Path(tmp) / "soak.db"
        url = f"sqlite:///{db}"
        t0 = time.time_ns() // 1000
        latency.append(journal, latency.crash(0, t0), export=beside(journal))
        argv = [sys.executable, "-m", "advisor", "watch", "--journal-file", str(journal.parent)]
        if args.tracemalloc is not None:
            argv[1:4] = [
                f"-Xtracemalloc={TRACE_FRAMES}",
                str(ROOT / "bench" / "traced.py"),
                str(args.tracemalloc),
                str(args.sample_s),
                str(args.snapshot_s),
                "--",
                "watch",
            ]
        if args.tracemalloc is not None:
            args.tracemalloc.mkdir(parents=True, exist_ok=True)
        errors = (
            (args.tracemalloc / "watch.stderr").open("wb")
            if args.tracemalloc is not None
            else subprocess.DEVNULL
        )
        watch = subprocess.Popen(
            [*argv, "--no-gpu", "--db", url], stdout=subprocess.DEVNULL, stderr=errors
        )
        soak = Soak()
        try:
            store = _first_plan(url, watch)
            feed(journal, watch, psutil.Process(watch.pid), args, t0, soak)
            _, drain_s = drain(db)
            soak.plans = latency.proposed_plans(store) - 1
            soak.stored_lines = count_events(db)
            store.close()
        finally:
            watch.terminate()
            watch.wait(timeout=60)
    return soak, drain_s


def _first_plan(url: str, watch: subprocess.Popen[bytes]) -> object:
    """The store, once `watch` has proposed the plan for the crash written before it began."""
    deadline = time.monotonic() + 120
    while True:
        if watch.poll() is not None:
            raise SystemExit(f"advisor watch exited ({watch.returncode})")
        if time.monotonic() > deadline:
            raise SystemExit("advisor watch proposed no plan in 120 s")
        try:
            store = open_store(url)
        except Exception:  # not created yet
            time.sleep(0.2)
            continue
        while latency.proposed_plans(store) < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        return store


@dataclass(frozen=True)
class Figures:
    start_mb: float
    warm_mb: float
    end_mb: float
    slope: float
    growth: float
    cpu_pct: float
    cpu_all_pct: float


def summarize(soak: Soak, warmup_s: float) -> Figures:
    samples = soak.samples
    after = [s for s in samples if s.t >= warmup_s] or samples[-1:]
    first, warm, last = samples[0], after[0], samples[-1]
    span = last.t - warm.t
    cpu = (last.cpu_s - warm.cpu_s) / span * 100 if span > 0 else 0.0
    cpu_all = (last.cpu_s - first.cpu_s) / (last.t - first.t) * 100 if last.t > first.t else 0.0
    return Figures(
        first.rss_mb,
        warm.rss_mb,
        last.rss_mb,
        slope_mb_h(after),
        last.rss_mb - warm.rss_mb,
        cpu,
        cpu_all,
    )


def report(f: Figures, rate: int) -> list[figures.Figure]:
    """The CPU target is at 200 lines/s; at another rate it is scaled with the rate."""
    cpu_limit = TARGET_CPU_PCT * rate / TARGET_CPU_RATE
    cpu_target = f"< {TARGET_CPU_PCT:g} % of a core at {TARGET_CPU_RATE} lines/s"
    if rate != TARGET_CPU_RATE:
        cpu_target += f" (scaled: < {cpu_limit:g} % at {rate})"
    return [
        figures.Figure(
            "soak",
            "watch RSS slope after warm-up",
            round(f.slope, 2),
            "MB/h",
            f"≤ {TARGET_SLOPE_MB_H:g} MB/h",
            f.slope <= TARGET_SLOPE_MB_H,
        ),
        figures.Figure(
            "soak",
            "watch RSS end − warm-up",
            round(f.growth, 2),
            "MB",
            f"≤ +{TARGET_GROWTH_MB:g} MB",
            f.growth <= TARGET_GROWTH_MB,
        ),
        figures.Figure(
            "soak",
            f"watch CPU at {rate} lines/s",
            round(f.cpu_pct, 2),
            "% of a core",
            cpu_target,
            f.cpu_pct < cpu_limit,
        ),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=7200.0, help="seconds (7200)")
    parser.add_argument("--rate", type=int, default=2000, help="lines a second (2000)")
    parser.add_argument("--crash-every", type=float, default=60.0, help="seconds (60)")
    parser.add_argument("--sample-s", type=float, default=5.0, help="seconds (5)")
    parser.add_argument(
        "--warmup", type=float, help="seconds left out of the slope (10%% of the run, 30-600)"
    )
    parser.add_argument("--report", action="store_true", help="print the figures for report.py")
    parser.add_argument(
        "--tracemalloc",
        type=Path,
        metavar="DIR",
        help="run watch under tracemalloc (bench/traced.py): its traced heap and snapshots "
        "go to DIR, and the allocations that grew most after the warm-up are printed",
    )
    parser.add_argument(
        "--snapshot-s", type=float, default=600.0, help="seconds between snapshots (600)"
    )
    args = parser.parse_args()
    if latency.REMOTE is None or shutil.which("journalctl") is None:
        print("needs journalctl and systemd-journal-remote", file=sys.stderr)
        return 2
    warmup = args.warmup if args.warmup is not None else min(600.0, max(30.0, args.duration / 10))
    soak, drain_s = run(args)
    f = summarize(soak, warmup)
    print(
        f"soak {args.duration:.0f} s at {args.rate} lines/s, a crash every "
        f"{args.crash_every:g} s: {soak.lines} lines and {soak.crashes} crashes written, "
        f"{soak.stored_lines} events stored (caught up {drain_s:.1f} s after the feed "
        f"stopped), {soak.plans} more plans proposed (the crashes', and the generator's own)"
    )
    print(
        f"watch RSS (with journalctl): start {f.start_mb:.1f} MB, after the {warmup:.0f} s "
        f"warm-up {f.warm_mb:.1f} MB, end {f.end_mb:.1f} MB (end − warm-up {f.growth:+.1f} MB, "
        f"target ≤ +{TARGET_GROWTH_MB:g}); slope after warm-up {f.slope:+.2f} MB/h "
        f"(target ≤ {TARGET_SLOPE_MB_H:g})"
    )
    after = [s for s in soak.samples if s.t >= warmup] or soak.samples[-1:]
    for what, label in (("own_mb", "advisor alone"), ("anon_mb", "anonymous (heap)")):
        warm, end = getattr(after[0], what), getattr(soak.samples[-1], what)
        print(
            f"  RSS {label}: start {getattr(soak.samples[0], what):.1f} MB, after warm-up "
            f"{warm:.1f} MB, end {end:.1f} MB ({end - warm:+.1f} MB), slope "
            f"{slope_mb_h(after, what):+.2f} MB/h"
        )
    print(
        f"watch CPU: {f.cpu_pct:.2f} % of one core after warm-up ({f.cpu_all_pct:.2f} % over "
        f"the whole run; target < {TARGET_CPU_PCT:g} % at {TARGET_CPU_RATE} lines/s)"
    )
    if args.tracemalloc is not None:
        print_traced(args.tracemalloc, warmup)
    if args.report:
        figures.emit(report(f, args.rate))
    return 0


def print_traced(folder: Path, warmup_s: float, top: int = 15) -> None:
    """The traced Python heap's slope after the warm-up, and the allocation sites (file and
    line, innermost frame) that grew most between the first snapshot after the warm-up and
    the last."""
    import tracemalloc

    rows = []
    for line in (folder / "heap.csv").read_text().splitlines():
        t, traced, own = line.split(",")
        rows.append(Sample(float(t), int(traced) / MB, 0.0, int(own) / MB))
    after = [r for r in rows if r.t >= warmup_s] or rows[-1:]
    if after:
        print(
            f"traced Python heap: after warm-up {after[0].rss_mb:.1f} MB, end "
            f"{after[-1].rss_mb:.1f} MB ({after[-1].rss_mb - after[0].rss_mb:+.1f} MB), slope "
            f"{slope_mb_h(after):+.2f} MB/h; tracemalloc's own {after[-1].own_mb:.1f} MB"
        )
    snaps = sorted(folder.glob("snapshot-*.pickle"))
    later = [p for p in snaps if int(p.stem.split("-")[1]) >= warmup_s]
    if len(later) < 2:
        print("fewer than two snapshots after the warm-up: no comparison")
        return
    first = tracemalloc.Snapshot.load(str(later[0]))
    last = tracemalloc.Snapshot.load(str(later[-1]))
    print(f"grew most from {later[0].name} to {later[-1].name} (innermost frame):")
    for stat in last.compare_to(first, "lineno")[:top]:
        size, count = stat.size_diff / 1024, stat.count_diff
        print(f"  {size:+10.1f} KiB {count:+8d} blocks  {stat.traceback}")


if __name__ == "__main__":
    sys.exit(main())
