"""What kind of input a file is, from its first non-empty line: the one sniffer that the
folder watcher and `classify` share, so a file means the same to both."""

from __future__ import annotations

from typing import Final

import orjson

GPU_RECORDING: Final = "gpu-recording"
JOURNAL_JSON: Final = "journal-json"
NVIDIA_SMI: Final = "nvidia-smi"
TEXT: Final = "text"
# Any of these keys makes a JSON object a journal entry (`journalctl -o json`).
JOURNAL_KEYS: Final = ("__CURSOR", "__REALTIME_TIMESTAMP", "MESSAGE", "_SYSTEMD_UNIT")


SNIFF_BYTES: Final = 4096  # bytes looked at to tell binary data from a log
JOURNAL_FILE_MAGIC: Final = b"LPKSHHRH"  # a systemd .journal file's first bytes
_TEXT_CONTROLS: Final = frozenset("\t\n\r\x1b\x08\x0c")


def looks_binary(head: bytes) -> bool:
    """Whether the first bytes of an input are binary data, not a log: a binary journal file
    (its magic), or more than 30% of the characters undecodable or control characters (NUL
    included; colour codes, tabs, backspaces and form feeds are text), so a text log with a
    stray NUL or bad byte is still a log. `classify` and `ingest text` share it."""
    if head.startswith(JOURNAL_FILE_MAGIC):
        return True
    if not head or head.lstrip().startswith(b"{"):
        return False
    text = head.decode("utf-8", "replace")
    odd = sum(1 for c in text if c == "\ufffd" or (c < " " and c not in _TEXT_CONTROLS))
    return odd * 10 > len(text) * 3


def binary_message(name: str) -> str:
    """The one line that refuses binary input named `name`."""
    return (
        f"{name}: binary data, not a log (a .journal file? use `journalctl --file F -o json` first)"
    )


def line_kind(first: bytes) -> str:
    """The kind of input whose first non-empty line is `first`: a GPU recording, journal
    JSON (a leading JSON-seq record separator allowed), an nvidia-smi CSV, or text."""
    first = first.strip().lstrip(b"\x1e")
    if first.startswith(b"{"):
        try:
            obj = orjson.loads(first)
        except orjson.JSONDecodeError:
            return TEXT
        if isinstance(obj, dict) and "gpus" in obj and "time_us" in obj:
            return GPU_RECORDING
        if isinstance(obj, dict) and any(k in obj for k in JOURNAL_KEYS):
            return JOURNAL_JSON
        return TEXT
    head = first[:200].lower()
    if (head.startswith(b"timestamp") or head.startswith(b"index")) and b"memory." in head:
        return NVIDIA_SMI
    return TEXT
