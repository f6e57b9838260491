"""Run `advisor` with tracemalloc on, writing the traced heap every few seconds and a
snapshot every few minutes: what bench/soak.py --tracemalloc starts instead of advisor.

    python -X tracemalloc=4 bench/traced.py DIR HEAP_S SNAPSHOT_S -- watch ...

DIR/heap.csv gets `seconds,traced_bytes,tracemalloc_own_bytes` every HEAP_S seconds;
DIR/snapshot-NNNNN.pickle (NNNNN: seconds since the start) every SNAPSHOT_S seconds, and one
when advisor returns. Read them with `tracemalloc.Snapshot.load`.
"""

from __future__ import annotations

import sys
import threading
import time
import tracemalloc
from pathlib import Path


def _record(out: Path, heap_s: float, snapshot_s: float, stop: threading.Event) -> None:
    start = time.monotonic()
    next_snapshot = start
    with (out / "heap.csv").open("a", buffering=1) as heap:
        while not stop.wait(heap_s):
            now = time.monotonic()
            traced, _peak = tracemalloc.get_traced_memory()
            heap.write(f"{now - start:.1f},{traced},{tracemalloc.get_tracemalloc_memory()}\n")
            if now >= next_snapshot:
                snapshot(out, now - start)
                next_snapshot += snapshot_s


def snapshot(out: Path, t: float) -> None:
    tracemalloc.take_snapshot().dump(str(out / f"snapshot-{int(t):05d}.pickle"))


def main() -> int:
    out, heap_s, snapshot_s, sep, *argv = sys.argv[1:]
    if sep != "--" or not tracemalloc.is_tracing():
        print("usage: python -X tracemalloc=N bench/traced.py DIR HEAP_S SNAPSHOT_S -- ARGS")
        return 2
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    start = time.monotonic()
    recorder = threading.Thread(
        target=_record, args=(folder, float(heap_s), float(snapshot_s), stop), daemon=True
    )
    recorder.start()
    # Run as a script, this folder leads sys.path, and bench/ingest.py would hide the
    # project's `ingest` package: the project's root leads instead.
    sys.path[0] = str(Path(__file__).resolve().parents[1])
    from advisor.cli.main import main as advisor

    sys.argv = ["advisor", *argv]
    try:
        advisor()
        return 0
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 1
    finally:
        stop.set()
        snapshot(folder, time.monotonic() - start)


if __name__ == "__main__":
    sys.exit(main())
