"""Is a restarted service ready? Its own words in the journal, for this invocation only.

A restart counts when the engine says it serves, as the engine registry has its readiness
lines (`advisor.core.engines`: vLLM's "Application startup complete.", SGLang's "The server
is fired up and ready to roll!", TGI's router "Connected" after its tracing header,
llama.cpp's "server is listening on …") — the line's log prefix peeled off as diagnosis peels
it — in an entry whose `_SYSTEMD_INVOCATION_ID` is the new invocation's, so a line of an
earlier run never counts. The engine's echo of its arguments, seen on the way, is kept: it is
evidence of what the engine received. `journalctl` follows that one invocation (argv, never a
shell; `--directory` for a journal that is not the system's); the caller watches the unit
meanwhile and gives up when it dies or the bound passes.
"""

from __future__ import annotations

import re
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from advisor.core.engines import ECHO_CUES, is_ready
from advisor.core.journal_export import ExportFormatError, iter_export
from advisor.core.records import decode_text
from advisor.execution.primitives import BackendError
from advisor.parsing.lines import clean_text, split_line

_INVOCATION = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class Ready:
    line: str
    echoes: tuple[str, ...] = ()  # the engine's echo of its arguments, as logged


@dataclass
class _Seen:
    """What the reader found so far (shared with the thread that reads)."""

    engine: str | None
    ready: list[str] = field(default_factory=list)
    echoes: list[str] = field(default_factory=list)


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
        *,
        engine: str | None = None,
    ) -> Ready:
        """Wait for the readiness line of `invocation_id` (`engine`'s, or any engine's);
        `check` returns why to give up (the unit died, started again, the engine got the
        wrong value…) or None. `NotReady` (a BackendError, with the echo lines seen) when it
        gives up."""
        seen = _Seen(engine)
        done = threading.Event()
        proc = _spawn(self.argv(invocation_id))
        assert proc.stdout is not None
        stdout = proc.stdout
        reader = threading.Thread(
            target=_read_ready, args=(stdout, seen, done), name="readiness", daemon=True
        )
        reader.start()
        try:
            try:
                _watch(done, check, bound_s, poll_s)
            except _GaveUp as e:  # what `check` raises itself (a wrong value seen) goes on
                raise NotReady(str(e), tuple(seen.echoes)) from None
            if not seen.ready:
                why = check()
                raise NotReady(
                    "the service did not come up: "
                    f"{why or 'journalctl stopped before a readiness line'}",
                    tuple(seen.echoes),
                )
            return Ready(seen.ready[0], tuple(seen.echoes))
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


class NotReady(BackendError):
    """The new invocation did not say it was ready; `echoes` are its argument echoes seen."""

    def __init__(self, message: str, echoes: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.echoes = echoes


_MAX_ECHOES = 8


def _read_ready(stdout: IO[bytes], seen: _Seen, done: threading.Event) -> None:
    """Read the export until a readiness line (kept in `seen`, with the echo lines before
    it); set `done` when it stops."""
    try:
        for entry in iter_export(stdout):
            raw = entry.get("MESSAGE")
            if not isinstance(raw, bytes):
                continue
            text = clean_text(decode_text(raw)[0])
            body = split_line(text).body
            if is_ready(body, seen.engine):
                seen.ready.append(text)
                break
            if len(seen.echoes) < _MAX_ECHOES and any(cue in body for cue in ECHO_CUES):
                seen.echoes.append(body)
    except (ExportFormatError, OSError, ValueError):
        pass
    finally:
        done.set()


class _GaveUp(BackendError):
    """The wait ended without a readiness line."""


def _watch(
    done: threading.Event, check: Callable[[], str | None], bound_s: float, poll_s: float
) -> None:
    """Poll `check` until the reader is done; _GaveUp when it gives up or time is up."""
    waited = 0.0
    while not done.wait(poll_s):
        waited += poll_s
        why = check()
        if why is not None:
            raise _GaveUp(f"the service did not come up: {why}")
        if waited >= bound_s:
            raise _GaveUp(f"the service did not say it was ready within {bound_s:.0f} s")
