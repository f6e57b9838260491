"""Build journal inputs the way journald and journalctl produce them."""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

from advisor.core.journal_export import write_export_entry
from advisor.sim import journald_format as journald

JOURNAL_REMOTE = next(
    (
        p
        for p in ("/lib/systemd/systemd-journal-remote", "/usr/lib/systemd/systemd-journal-remote")
        if Path(p).exists()
    ),
    None,
)
BOOT = "0123456789abcdef0123456789abcdef"

Entry = list[tuple[str, bytes | str]]


def entry(
    i: int,
    message: bytes | str,
    *,
    unit: str = "vllm.service",
    host: str = "gpu01",
    extra: Entry | None = None,
    t0: int = 1_742_105_558_000_000,
    priority: int = 6,
) -> Entry:
    """A service stdout entry; `i` orders it (µs realtime and monotonic)."""
    return [
        ("__REALTIME_TIMESTAMP", str(t0 + i * 1000)),
        ("__MONOTONIC_TIMESTAMP", str(1_000_000 + i * 1000)),
        ("_BOOT_ID", BOOT),
        ("_HOSTNAME", host),
        ("_TRANSPORT", "stdout"),
        ("_SYSTEMD_UNIT", unit),
        ("SYSLOG_IDENTIFIER", "vllm"),
        ("_PID", "4242"),
        ("PRIORITY", str(priority)),
        ("MESSAGE", message),
        *(extra or []),
    ]


def json_line(fields: Entry, cursor: str | None = None) -> bytes:
    """The entry as `journalctl -o json --all` prints it, with `cursor` as a last __CURSOR."""
    return journald.json_line(
        fields if cursor is None else [*fields, ("__CURSOR", cursor)], show_all=True
    )


def export_bytes(entries: list[Entry]) -> bytes:
    out = io.BytesIO()
    for fields in entries:
        write_export_entry(out, fields)
    return out.getvalue()


def make_journal(path: Path, entries: list[Entry]) -> Path:
    """A real binary .journal file, written by systemd-journal-remote (appends if it exists)."""
    assert JOURNAL_REMOTE is not None
    export = path.with_suffix(".export")
    export.write_bytes(export_bytes(entries))
    subprocess.run(
        [JOURNAL_REMOTE, f"--output={path}", str(export)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return path


def have_journal_tools() -> bool:
    return JOURNAL_REMOTE is not None and shutil.which("journalctl") is not None
