"""Processes run inside a systemd box (nsenter forks them: signals go to the child), as they
run on a real host: `advisor watch`, `advisor remediate`, anything with a command line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from advisor.sim.box import SystemdBox
from tests.conftest import ROOT
from tests.waiting import TIMEOUT_S, wait


class Watch:
    """`advisor watch` (or another command) run inside the box (nsenter forks it: signals go
    to the child)."""

    def __init__(
        self,
        box: SystemdBox,
        db_url: str,
        *args: str,
        command: tuple[str, ...] = ("watch", "--no-gpu"),
    ) -> None:
        env = {**os.environ, "ADVISOR_DB": db_url, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            box.nsenter_argv([sys.executable, "-m", "advisor", *command, *args]),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.decode("utf-8", "replace").rstrip("\n"))

    def said(self, start: str) -> bool:
        return any(line.startswith(start) for line in self.lines)

    def wait_until_watching(self) -> None:
        wait("watch to say what it watches", lambda: self.said("watching "), self.proc)

    def _child(self) -> int:
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        wait("the watcher's process", lambda: bool(children.read_text().split()))
        return int(children.read_text().split()[0])

    def stop(self) -> int:
        """SIGTERM, as systemd stops it; the exit status."""
        if self.proc.poll() is None:
            os.kill(self._child(), signal.SIGTERM)
        rc = self.proc.wait(timeout=TIMEOUT_S)
        self._reader.join(timeout=5)
        return rc

    def close(self) -> None:
        """Kill it if it still runs; close its pipe."""
        if self.proc.poll() is None:
            try:
                os.kill(self._child(), signal.SIGKILL)
            finally:
                self.proc.wait(timeout=TIMEOUT_S)
        self._reader.join(timeout=5)
        assert self.proc.stderr is not None
        self.proc.stderr.close()


@contextmanager
def watching(
    box: SystemdBox, db_url: str, *args: str, command: tuple[str, ...] = ("watch", "--no-gpu")
) -> Iterator[Watch]:
    watch = Watch(box, db_url, *args, command=command)
    try:
        yield watch
    finally:
        watch.close()


def advisor_in(
    box: SystemdBox,
    db_url: str,
    *args: str,
    timeout: float = 180,
    env: dict[str, str] | None = None,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """`advisor ARGS` run to completion inside the box (as on the box's own host)."""
    full = {**os.environ, "ADVISOR_DB": db_url, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        box.nsenter_argv([sys.executable, "-m", "advisor", *args]),
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
        input=input,
        check=False,
    )
