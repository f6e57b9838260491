"""Is a restarted service ready? Its own words in the journal, for this invocation only.

A restart counts when the server says it serves — vLLM's "Application startup complete.",
SGLang's "The server is fired up and ready to roll!", TGI's router "Connected" (the cues
diagnosis uses for a run's readiness) — in an entry whose `_SYSTEMD_INVOCATION_ID` is the new
invocation's, so a line of an earlier run never counts. `journalctl` follows that one
invocation (argv, never a shell; `--directory` for a journal that is not the system's); the
caller watches the unit meanwhile and gives up when it dies or the bound passes.
"""

from __future__ import annotations

import re
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from advisor.core.journal_export import ExportFormatError, iter_export
from advisor.core.records import decode_text
from advisor.execution.primitives import BackendError
from advisor.parsing.facts import READY_CUES
from advisor.parsing.lines import clean_text

_INVOCATION = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class Ready:
    line: str


@dataclass
class JournalReadiness:
    """Follows the journal (the system's, or the files under `directory`)."""

    directory: Path | None = None
    journalctl: str = "journalctl"

    def argv(self, invocation_id: str) -> list[str]:
        if not _INVOCATION.match(invocation_id):
            raise BackendError(f"{invocation_id[:40]!r} is not an invocation id")
        argv = [
            self.journalctl,
            "--output=export",
            "--all",
            "--no-pager",
            "--quiet",
            "--follow",
            "--no-tail",
        ]
        if self.directory is not None:
            argv.append(f"--directory={self.directory}")
        return [*argv, f"_SYSTEMD_INVOCATION_ID={invocation_id}"]

    def pid1_messages(self, unit: str, since_us: int) -> list[str]:
        """What PID 1 logged about `unit` since a time (its own words for a refused start)."""
        from advisor.core.units import is_unit_name

        if not is_unit_name(unit):
            raise BackendError(f"{unit[:80]!r} is not a unit name")
        argv = [
            self.journalctl,
            "--output=cat",
            "--no-pager",
            "--quiet",
            "_PID=1",
            f"UNIT={unit}",
            f"--since=@{since_us / 1e6:.6f}",
        ]
        if self.directory is not None:
            argv.insert(1, f"--directory={self.directory}")
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return []
        return [line for line in done.stdout.splitlines() if line.strip()]

    def wait(
        self,
        invocation_id: str,
        bound_s: float,
        check: Callable[[], str | None],
        poll_s: float = 0.25,
    ) -> Ready:
        """Wait for the readiness line of `invocation_id`; `check` returns why to give up
        (the unit died, started again…) or None. BackendError when it gives up."""
        found: list[str] = []
        done = threading.Event()
        proc = _spawn(self.argv(invocation_id))
        assert proc.stdout is not None
        stdout = proc.stdout
        reader = threading.Thread(
            target=_read_ready, args=(stdout, found, done), name="readiness", daemon=True
        )
        reader.start()
        try:
            _watch(done, check, bound_s, poll_s)
            if not found:
                why = check()
                raise BackendError(
                    "the service did not come up: "
                    f"{why or 'journalctl stopped before a readiness line'}"
                )
            return Ready(found[0])
        finally:
            proc.kill()
            proc.wait()
            stdout.close()


def _spawn(argv: list[str]) -> subprocess.Popen[bytes]:
    """Start journalctl following the invocation, its export on a pipe."""
    try:
        return subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
        )
    except OSError as e:
        raise BackendError(f"cannot run journalctl to see the service come up: {e.strerror}") from e


def _read_ready(stdout: IO[bytes], found: list[str], done: threading.Event) -> None:
    """Read the export until a readiness line (kept in `found`); set `done` when it stops."""
    try:
        for entry in iter_export(stdout):
            raw = entry.get("MESSAGE")
            if isinstance(raw, bytes):
                text = clean_text(decode_text(raw)[0])
                if any(cue in text for cue in READY_CUES):
                    found.append(text)
                    break
    except (ExportFormatError, OSError, ValueError):
        pass
    finally:
        done.set()


def _watch(
    done: threading.Event, check: Callable[[], str | None], bound_s: float, poll_s: float
) -> None:
    """Poll `check` until the reader is done; BackendError when it gives up or time is up."""
    waited = 0.0
    while not done.wait(poll_s):
        waited += poll_s
        why = check()
        if why is not None:
            raise BackendError(f"the service did not come up: {why}")
        if waited >= bound_s:
            raise BackendError(f"the service did not say it was ready within {bound_s:.0f} s")
