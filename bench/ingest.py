"""Ingest benchmark: ``advisor ingest journal`` against DuckDB's ``read_json`` on the same file.

Generates (or reuses) a deterministic ``journalctl -o json`` journal with ``journal_gen``, runs
``advisor ingest journal --file F --db sqlite:///<workdir>/bench.db`` on a fresh database while
sampling the RSS of the process tree, then times DuckDB loading the same file into memory.

    python bench/ingest.py --lines 1000000
    python bench/ingest.py --lines 200000 --json
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pathlib
import resource
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field

import duckdb
import orjson
import psutil

try:
    from bench import journal_gen
    from bench.figures import Figure, emit
except ImportError:  # run as a script: python bench/ingest.py
    import journal_gen  # type: ignore[no-redef]
    from figures import Figure, emit  # type: ignore[no-redef]

TARGET_LINES_PER_S = 100_000
TARGET_RATIO = 1.0  # advisor's lines/s over DuckDB's, measured side by side
TARGET_PEAK_RSS_MB = 200.0
POLL_S = 0.05
MB = 1024 * 1024
# DuckDB option sets, tried in order. The default sample (20,480 rows) misses keys that appear
# later (TID, EXIT_STATUS, ...) and fails; union_by_name alone silently drops those keys.
DUCKDB_OPTIONS = (
    "sample_size=-1",
    "sample_size=-1, union_by_name=true",
    "sample_size=-1, union_by_name=true, ignore_errors=true",
)


@dataclass
class AdvisorRun:
    ok: bool
    seconds: float | None = None
    lines_per_s: float | None = None
    peak_rss_mb: float | None = None  # max over 50 ms samples of the process tree's summed RSS
    peak_pss_mb: float | None = None  # the same for PSS (shared pages split between processes)
    maxrss_mb: float | None = None  # kernel's ru_maxrss of the advisor process (wait4)
    children_maxrss_mb: float | None = None  # getrusage(RUSAGE_CHILDREN): any child so far
    cpu_s: float | None = None  # user+sys of advisor and the parser it reaped (wait4)
    returncode: int | None = None
    error: str | None = None
    command: list[str] = field(default_factory=list)


@dataclass
class DuckRun:
    ok: bool
    seconds: float | None = None
    lines_per_s: float | None = None
    rows: int | None = None
    options: str | None = None
    version: str = duckdb.__version__
    error: str | None = None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workdir", type=pathlib.Path, default=pathlib.Path("bench/out"))
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument("--report", action="store_true", help="end with bench/report.py's line")
    parser.add_argument("--timeout", type=float, default=3600, help="limit for the ingest run (s)")
    return parser.parse_args(argv)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- journal


def journal_path(workdir: pathlib.Path, lines: int, seed: int) -> pathlib.Path:
    """Cache name: size, seed and a hash of the generator source (so edits regenerate it)."""
    digest = hashlib.sha256(pathlib.Path(journal_gen.__file__).read_bytes()).hexdigest()[:8]
    return workdir / f"journal-{lines}-s{seed}-{digest}.jsonl"


def ensure_journal(workdir: pathlib.Path, lines: int, seed: int) -> pathlib.Path:
    path = journal_path(workdir, lines, seed)
    if path.exists():
        log(f"reusing {path}")
        return path
    log(f"generating {lines:,} lines into {path} ...")
    start = time.perf_counter()
    journal_gen.write_journal(path, lines, seed)
    log(f"  generated in {time.perf_counter() - start:.1f} s")
    return path


# --------------------------------------------------------------------------- advisor


def advisor_command() -> list[str]:
    exe = pathlib.Path(sys.prefix) / "bin" / "advisor"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "advisor"]


def check_advisor(cmd: list[str]) -> str | None:
    """None when ``advisor --help`` works, else a one-line reason."""
    try:
        proc = subprocess.run(
            [*cmd, "--help"], capture_output=True, text=True, timeout=120, check=False
        )
    except OSError as exc:
        return f"cannot run {' '.join(cmd)}: {exc}"
    except subprocess.TimeoutExpired:
        return f"{' '.join(cmd)} --help did not finish within 120 s"
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["(no output)"]
        return f"{' '.join(cmd)} --help exited {proc.returncode}: {tail[0]}"
    return None


def fresh_db(workdir: pathlib.Path) -> pathlib.Path:
    db = (workdir / "bench.db").resolve()
    for suffix in ("", "-wal", "-shm", "-journal"):
        db.with_name(db.name + suffix).unlink(missing_ok=True)
    return db


def tree_memory(proc: psutil.Process) -> tuple[int, int]:
    """(RSS, PSS) summed over a process and all its descendants, bytes; 0 once it is gone.

    The RSS sum counts pages a forked parser shares with its parent twice; PSS splits them."""
    rss = pss = 0
    try:
        members = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0, 0
    for member in members:
        try:
            info = member.memory_full_info()
        except psutil.Error:
            continue
        rss += info.rss
        pss += getattr(info, "pss", info.rss)
    return rss, pss


def run_advisor(
    cmd: list[str],
    journal: pathlib.Path,
    db: pathlib.Path,
    lines: int,
    timeout: float,
    log_path: pathlib.Path,
) -> AdvisorRun:
    # Storing only: the diagnosis that ingest does by default is timed apart (time_diagnose).
    argv = [
        *cmd,
        "ingest",
        "journal",
        "--file",
        str(journal),
        "--no-diagnose",
        "--db",
        f"sqlite:///{db}",
    ]
    log(f"running {' '.join(argv)}")
    with log_path.open("wb") as out:
        start = time.perf_counter()
        popen = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        reaped = watch(popen, start + timeout)
        seconds = time.perf_counter() - start
    if reaped is None:
        return AdvisorRun(False, error=f"timed out after {timeout:.0f} s", command=argv)
    peak, peak_pss, own_maxrss_kib, cpu_s = reaped
    children_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux
    if popen.returncode != 0:
        tail = "\n  ".join(log_path.read_text(errors="replace").strip().splitlines()[-5:])
        return AdvisorRun(
            False,
            seconds=seconds,
            returncode=popen.returncode,
            command=argv,
            error=f"advisor exited {popen.returncode}; last output "
            f"({log_path}):\n  {tail or '(none)'}",
        )
    return AdvisorRun(
        True,
        seconds=seconds,
        lines_per_s=lines / seconds,
        peak_rss_mb=peak / MB,
        peak_pss_mb=peak_pss / MB,
        maxrss_mb=own_maxrss_kib / 1024,
        children_maxrss_mb=children_kib / 1024,
        cpu_s=cpu_s,
        returncode=0,
        command=argv,
    )


def time_diagnose(cmd: list[str], db: pathlib.Path) -> float:
    """Seconds `advisor diagnose` takes on the store just ingested (what ingest does by
    default after storing)."""
    start = time.perf_counter()
    subprocess.run([*cmd, "diagnose", "--db", f"sqlite:///{db}"], check=True, capture_output=True)
    return time.perf_counter() - start


def watch(popen: subprocess.Popen[bytes], deadline: float) -> tuple[int, int, int, float] | None:
    """Sample the tree's memory until the child exits; (peak RSS bytes, peak PSS bytes, its
    ru_maxrss KiB, its CPU seconds with the children it reaped: user + sys).

    Reaps with wait4 so the kernel's max RSS of this one child is known exactly. None (and the
    child killed) when the deadline passes.
    """
    watched = psutil.Process(popen.pid)
    peak = peak_pss = 0
    while True:
        pid, status, usage = os.wait4(popen.pid, os.WNOHANG)
        if pid:
            popen.returncode = os.waitstatus_to_exitcode(status)
            return peak, peak_pss, usage.ru_maxrss, usage.ru_utime + usage.ru_stime
        rss, pss = tree_memory(watched)
        peak, peak_pss = max(peak, rss), max(peak_pss, pss)
        if time.perf_counter() > deadline:
            popen.kill()
            popen.wait()
            return None
        time.sleep(POLL_S)


# --------------------------------------------------------------------------- duckdb


def run_duckdb(journal: pathlib.Path) -> DuckRun:
    errors = []
    for options in DUCKDB_OPTIONS:
        con = duckdb.connect()
        try:
            start = time.perf_counter()
            con.execute(
                "CREATE TABLE j AS SELECT * FROM read_json(?, "
                f"format='newline_delimited', {options})",
                [str(journal)],
            )
            row = con.execute("SELECT count(*) FROM j").fetchone()
            seconds = time.perf_counter() - start
        except duckdb.Error as exc:
            errors.append(f"[{options}] {str(exc).splitlines()[0]}")
            continue
        finally:
            con.close()
        rows = int(row[0]) if row else 0
        return DuckRun(
            True, seconds=seconds, lines_per_s=rows / seconds, rows=rows, options=options
        )
    return DuckRun(False, error="; ".join(errors))


# --------------------------------------------------------------------------- report


@dataclass
class Verdict:
    ratio: float | None
    rate_pass: bool | None
    rss_pass: bool | None


def judge(adv: AdvisorRun, duck: DuckRun) -> Verdict:
    ratio = None
    if adv.lines_per_s and duck.lines_per_s:
        ratio = adv.lines_per_s / duck.lines_per_s
    rate = None if adv.lines_per_s is None else adv.lines_per_s >= TARGET_LINES_PER_S
    rss = None if adv.peak_rss_mb is None else adv.peak_rss_mb < TARGET_PEAK_RSS_MB
    return Verdict(ratio, rate, rss)


def figures(
    lines: int, journal: pathlib.Path, adv: AdvisorRun, duck: DuckRun, verdict: Verdict
) -> dict[str, object]:
    return {
        "lines": lines,
        "bytes": journal.stat().st_size,
        "journal": str(journal),
        "advisor": asdict(adv),
        "duckdb": asdict(duck),
        "ratio_advisor_to_duckdb": verdict.ratio,
        "targets": {
            "lines_per_s": {"target": TARGET_LINES_PER_S, "pass": verdict.rate_pass},
            "peak_rss_mb": {"target": TARGET_PEAK_RSS_MB, "pass": verdict.rss_pass},
        },
        "cpus": psutil.cpu_count(),
        "python": sys.version.split()[0],
    }


def _num(value: float | None, fmt: str) -> str:
    return "n/a" if value is None else format(value, fmt)


def _verdict(ok: bool | None) -> str:
    return {True: "PASS", False: "MISS", None: "n/a"}[ok]


def print_table(
    lines: int, journal: pathlib.Path, adv: AdvisorRun, duck: DuckRun, verdict: Verdict
) -> None:
    size = journal.stat().st_size
    print(
        f"journal: {journal}  ({lines:,} lines, {size / MB:,.1f} MiB, "
        f"{size / max(lines, 1):.0f} B/line; {psutil.cpu_count()} CPUs)"
    )
    print(f"{'':26}{'lines':>11}{'MiB':>9}{'seconds':>9}{'lines/s':>10}{'peak RSS MB':>13}")
    print(
        f"{'advisor ingest journal':26}{lines:>11,}{size / MB:>9,.0f}"
        f"{_num(adv.seconds, '.2f'):>9}{_num(adv.lines_per_s, ',.0f'):>10}"
        f"{_num(adv.peak_rss_mb, '.1f'):>13}"
    )
    print(
        f"{'  PSS (tree, peak)':26}{'':>11}{'':>9}{'':>9}{'':>10}{_num(adv.peak_pss_mb, '.1f'):>13}"
    )
    print(
        f"{'  ru_maxrss (wait4)':26}{'':>11}{'':>9}{'':>9}{'':>10}{_num(adv.maxrss_mb, '.1f'):>13}"
    )
    print(
        f"{'  getrusage(CHILDREN)':26}{'':>11}{'':>9}{'':>9}{'':>10}"
        f"{_num(adv.children_maxrss_mb, '.1f'):>13}"
    )
    per_line = None if adv.cpu_s is None else 1e6 * adv.cpu_s / max(lines, 1)
    print(
        f"{'  CPU s (user+sys, tree)':26}{'':>11}{'':>9}{_num(adv.cpu_s, '.2f'):>9}"
        f"{'':>10}   ({_num(per_line, '.1f')} µs a line, on the machine's load)"
    )
    print(
        f"{'DuckDB read_json':26}{_num(duck.rows, ','):>11}{size / MB:>9,.0f}"
        f"{_num(duck.seconds, '.2f'):>9}{_num(duck.lines_per_s, ',.0f'):>10}"
    )
    ratio = "n/a" if verdict.ratio is None else f"{verdict.ratio:.2f}x"
    print(
        f"advisor / DuckDB lines/s: {ratio}   (DuckDB {duck.version}, {duck.options or 'failed'})"
    )
    print(
        f"target >= {TARGET_LINES_PER_S:,} lines/s: {_verdict(verdict.rate_pass)}   "
        f"target peak RSS < {TARGET_PEAK_RSS_MB:.0f} MB: {_verdict(verdict.rss_pass)}"
    )
    if adv.error:
        print(f"advisor: {adv.error}")
    if duck.rows is not None and duck.rows != lines:
        print(f"warning: DuckDB counted {duck.rows:,} rows, expected {lines:,}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    journal = ensure_journal(args.workdir, args.lines, args.seed)
    cmd = advisor_command()
    problem = check_advisor(cmd)
    db = fresh_db(args.workdir)
    if problem:
        log(f"error: the advisor CLI is not usable, skipping its half of the benchmark: {problem}")
        adv = AdvisorRun(False, error=problem, command=cmd)
    else:
        adv = run_advisor(cmd, journal, db, args.lines, args.timeout, args.workdir / "ingest.log")
        if not adv.ok:
            log(f"error: {adv.error}")
        else:
            diagnose_s = time_diagnose(cmd, db)
            log(
                f"advisor diagnose (fold {args.lines:,} events into runs, classify the ended "
                f"ones): {diagnose_s:.1f} s = {args.lines / diagnose_s:,.0f} events/s"
            )
    if not args.keep:
        fresh_db(args.workdir)
    log("loading the same file with DuckDB ...")
    duck = run_duckdb(journal)
    if not duck.ok:
        log(f"error: DuckDB could not load the journal: {duck.error}")
    verdict = judge(adv, duck)
    if args.json:
        fig = figures(args.lines, journal, adv, duck, verdict)
        sys.stdout.write(orjson.dumps(fig).decode() + "\n")
    else:
        print_table(args.lines, journal, adv, duck, verdict)
    if args.report and adv.ok:
        emit(report_figures(adv, duck, verdict))
    return 0 if adv.ok and duck.ok else 2


def report_figures(adv: AdvisorRun, duck: DuckRun, verdict: Verdict) -> list[Figure]:
    """bench/report.py's rows: lines/s against DuckDB's on the same file, and peak RSS."""
    rate = adv.lines_per_s or 0.0
    return [
        Figure(
            "ingest",
            "advisor ingest journal --file",
            rate,
            "lines/s",
            f">= {TARGET_RATIO:.1f}x DuckDB read_json",
            verdict.ratio is not None and verdict.ratio >= TARGET_RATIO,
            duck.lines_per_s,
            "lines/s DuckDB",
            verdict.ratio,
        ),
        Figure(
            "ingest",
            "peak RSS (process tree)",
            adv.peak_rss_mb or 0.0,
            "MB",
            f"<= {TARGET_PEAK_RSS_MB:.0f} MB",
            bool(verdict.rss_pass),
        ),
    ]


if __name__ == "__main__":
    sys.exit(main())
