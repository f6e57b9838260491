"""GPU memory claims: how the simulated server tells the simulated driver what it holds.

One JSON file per process, ``<pid>.json`` = ``{"pid": P, "gpus": {"0": bytes, ...}}``, rewritten
atomically as the process allocates. The process never removes its own file: like real GPU
memory, it is freed by the driver (``advisor.sim.gpus``) some time after the process died.
Servers read the other files to see memory held by others, as ``cudaMemGetInfo`` would.

Stdlib only (imported by the server process).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

Claims = dict[int, dict[int, int]]  # pid → GPU index → bytes


def claim_path(directory: Path, pid: int) -> Path:
    return directory / f"{pid}.json"


def write_claim(directory: Path, pid: int, gpus: Mapping[int, int]) -> None:
    """Replace the claim of ``pid`` (write then rename: readers never see half a file)."""
    data = json.dumps({"pid": pid, "gpus": {str(i): int(b) for i, b in sorted(gpus.items())}})
    tmp = directory / f".{pid}.json.tmp"
    tmp.write_text(data, encoding="utf-8")
    os.replace(tmp, claim_path(directory, pid))


def read_claims(directory: Path) -> Claims:
    """Every claim in ``directory``; files that vanish or do not parse are skipped."""
    claims: Claims = {}
    try:
        paths = sorted(directory.glob("*.json"))
    except OSError:
        return claims
    for path in paths:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            pid = int(data["pid"])
            claims[pid] = {int(i): int(b) for i, b in data["gpus"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return claims


def remove_claim(directory: Path, pid: int) -> None:
    claim_path(directory, pid).unlink(missing_ok=True)


def others_on(claims: Claims, me: int, gpu: int) -> list[tuple[int, int]]:
    """(pid, bytes) of the other processes holding memory on ``gpu``."""
    return [(pid, g[gpu]) for pid, g in sorted(claims.items()) if pid != me and g.get(gpu, 0) > 0]
