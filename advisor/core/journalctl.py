"""Spawn `journalctl` (argv only, never a shell) and read its export stream."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from advisor.core.errors import InputError, PrerequisiteError
from advisor.core.journal_export import ExportFormatError, iter_export

# systemd unit names (systemd.unit(5)): [A-Za-z0-9:_.\\-@] plus a type suffix; globs for -u.
_UNIT_PATTERN = re.compile(r"^[A-Za-z0-9:_.\\@*?\[\]-]{1,255}$")
_CURSOR_PATTERN = re.compile(r"^[A-Za-z0-9=;_.:@-]{1,512}$")


def validate_unit(unit: str) -> str:
    if not _UNIT_PATTERN.match(unit) or unit.startswith("-"):
        raise InputError(f"--unit {unit!r} is not a systemd unit name or glob")
    return unit


def validate_cursor(cursor: str) -> str:
    if not _CURSOR_PATTERN.match(cursor):
        raise InputError(f"saved journal cursor {cursor[:80]!r} is not a journald cursor")
    return cursor


def journalctl_path() -> str:
    found = shutil.which("journalctl")
    if found is None:
        raise PrerequisiteError("journalctl not found on PATH (install systemd's journalctl)")
    return found


def build_argv(
    *,
    files: Sequence[Path] = (),
    units: Sequence[str] = (),
    follow: bool = False,
    cursor: str | None = None,
    since: str | None = None,
    executable: str = "journalctl",
) -> list[str]:
    """The journalctl command line. Resuming starts *at* the saved cursor rather than after it:
    `--after-cursor` with `-u` skipped an entry on older systemd; the entry at the cursor is
    re-read and dropped as a duplicate instead.

    `units` become `-u` matches, for reading what is there; live follow of units passes none
    (`-u GLOB` fails with "No data available" until a matching unit has logged, and never
    adds a unit that appears later) and chooses the entries itself."""
    argv = [executable, "--output=export", "--all", "--no-pager", "--quiet"]
    for path in files:
        # a folder of .journal files (as journald and systemd-journal-remote write them) is
        # read whole, and followed across its rotations: --file stays on the file it opened
        argv.append(f"--directory={path}" if path.is_dir() else f"--file={path}")
    for unit in units:
        argv.append(f"--unit={validate_unit(unit)}")
    if cursor is not None:
        argv.append(f"--cursor={validate_cursor(cursor)}")
    elif since is not None:
        if (since.startswith("-") and not re.fullmatch(r"-\d+[smhdw]?", since)) or "\n" in since:
            raise InputError(f"--since {since!r} is not a time journalctl understands")
        argv.append(f"--since={since}")
    elif follow:
        argv.append("--boot")
    if follow:
        # --follow alone prints only the last 10 entries of the match (-n 10): --no-tail
        # starts at the boot / time / cursor chosen above instead.
        argv += ["--follow", "--no-tail"]
    return argv


@contextmanager
def spawn(argv: list[str]) -> Iterator[IO[bytes]]:
    """Run journalctl; yield its stdout; on exit stop it and report its failure, if any."""
    try:
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            bufsize=1 << 20,
        )
    except OSError as e:
        raise PrerequisiteError(f"cannot run {argv[0]}: {e.strerror}") from e
    assert proc.stdout is not None and proc.stderr is not None
    try:
        yield proc.stdout
    finally:
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        err = proc.stderr.read().decode("utf-8", "replace").strip()
        proc.stdout.close()
        proc.stderr.close()
    if proc.returncode not in (0, -15) and err:
        raise InputError(f"journalctl failed (exit {proc.returncode}): {err.splitlines()[-1]}")


def export_entries(stream: IO[bytes]) -> Iterator[dict[str, bytes | list[bytes]]]:
    try:
        yield from iter_export(stream)
    except ExportFormatError as e:
        raise InputError(f"journalctl export stream: {e}") from e
