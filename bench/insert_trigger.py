"""What migration 0008's BEFORE INSERT triggers (no INSERT OR REPLACE over a stored event)
cost SQLite appends: N events appended in batches to a fresh store, with the triggers and
with them dropped, alternately; the best of the rounds in µs per event.

    python bench/insert_trigger.py [--events 200000] [--batch 2500] [--rounds 3]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from advisor.core.events import NewEvent, validate_batch
from advisor.store import open_store


def batches(events: int, size: int) -> list[list[NewEvent]]:
    return [
        validate_batch(
            [
                {
                    "stream": "h/u.service",
                    "time_us": 1_700_000_000_000_000 + i,
                    "source": "bench",
                    "key": (i * 7919)
                    % 1_000_003,  # the idempotency index takes keys in random order
                    "payload": {
                        "type": "log.recorded",
                        "origin": "text",
                        "message": f"line {i} INFO serving a request",
                    },
                }
                for i in range(start, min(start + size, events))
            ]
        )
        for start in range(0, events, size)
    ]


def append_s(work: list[list[NewEvent]], with_triggers: bool) -> float:
    folder = Path(tempfile.mkdtemp(prefix="advisor-bench-"))
    try:
        store = open_store(f"sqlite:///{folder / 'events.db'}")
        if not with_triggers:
            with store.begin() as conn:
                conn.exec_driver_sql("DROP TRIGGER events_no_replace")
                conn.exec_driver_sql("DROP TRIGGER sources_no_replace")
        start = time.perf_counter()
        for batch in work:
            store.append(batch)
        elapsed = time.perf_counter() - start
        store.close()
        return elapsed
    finally:
        shutil.rmtree(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=2500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = batches(args.events, args.batch)
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.rounds):
        for with_triggers in (False, True):
            times[with_triggers].append(append_s(work, with_triggers))
    for with_triggers, label in ((False, "without"), (True, "with")):
        best = min(times[with_triggers])
        print(
            f"{label:>7} the INSERT triggers: {best:.2f} s, "
            f"{best / args.events * 1e6:.1f} µs per event (best of {args.rounds})"
        )


if __name__ == "__main__":
    main()
