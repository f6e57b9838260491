"""Waiting in tests: on a condition, never on a clock. The bound only decides how long a
failing test takes to say so."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

TIMEOUT_S = 30.0


def wait(
    what: str,
    check: Callable[[], object],
    proc: subprocess.Popen[bytes] | None = None,
    timeout: float = TIMEOUT_S,
    pause_s: float = 0.05,
) -> None:
    """Until `check()` is true; an AssertionError naming `what` after `timeout` seconds, or
    at once when `proc` (the process that should bring it about) has exited."""
    deadline = time.monotonic() + timeout
    while not check():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process exited ({proc.returncode}) while waiting for {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(pause_s)
