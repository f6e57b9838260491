"""Boot and stop time of the systemd box (`advisor.sim.box`): the real systemd as PID 1 of
fresh namespaces, as the test suite uses it.

    .venv/bin/python bench/box.py [--boots 10]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from advisor.sim.box import SystemdBox, unavailable  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boots", type=int, default=10)
    args = parser.parse_args()
    reason = unavailable()
    if reason is not None:
        raise SystemExit(f"bench/box.py needs a systemd box: {reason}")
    boots, stops = [], []
    with tempfile.TemporaryDirectory(prefix="advisor-box-bench-") as tmp:
        for i in range(args.boots):
            box = SystemdBox(Path(tmp) / f"box{i}")
            box.start()
            boots.append(box.boot_s or 0.0)
            began = time.monotonic()
            box.stop()
            stops.append(time.monotonic() - began)
    boots.sort()
    stops.sort()
    mid = len(boots) // 2
    print(
        f"{args.boots} boots: min {boots[0]:.3f} s, median {boots[mid]:.3f} s, max "
        f"{boots[-1]:.3f} s (boot to `running` with the bus answering); stop: median "
        f"{stops[mid]:.3f} s, max {stops[-1]:.3f} s"
    )


if __name__ == "__main__":
    main()
