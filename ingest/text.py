"""Plain text logs (docker/kubectl logs, files a server writes, text pasted from a terminal).

Each line becomes a `log.recorded` event. Its key chains the file's content up to and
including that line (key_n = H(key_n-1 + line_n)), so the same lines read again — the file
renamed by rotation, the copy logrotate's copytruncate leaves, a second `ingest text` — are
recognised, while a file truncated and rewritten, or a new file on a reused inode, is new
content with new keys. (A consequence: a file that begins with exactly the lines an earlier
file of the same service began with is taken for that file as far as the lines agree.)
The event time comes from a timestamp at the start of the line where there is one; lines
without one (traceback lines) take the time of the line before; before any timestamp, the
file's mtime.
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.core.errors import InputError
from advisor.core.records import Progress, Record, clean_name, decode_text
from ingest.batches import IngestReport
from ingest.filejob import ingest_file
from ingest.files import FileCursor
from ingest.kinds import SNIFF_BYTES, binary_message, looks_binary

if TYPE_CHECKING:
    from advisor.store import EventStore

KIND = "text"

_ISO = re.compile(
    rb"^(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?"
    rb"\s*(Z|[+-]\d\d:?\d\d)?"
)
_EPOCH = re.compile(rb"^(\d{10})\.(\d{6})\s")
_SYSLOG = re.compile(
    rb"^(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +(\d{1,2}) "
    rb"(\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?\s"
)
# vLLM's logger, after colour codes are removed; worker processes prefix their lines with
# "(APIServer pid=1) ", "(EngineCore_DP0 pid=2) ", "(VllmWorker rank=0 pid=3) ".
_VLLM = re.compile(
    rb"^(?:\([^()]{1,80}\) )?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) "
    rb"(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)\s"
)
_ANSI = re.compile(rb"\x1b\[[0-9;]*m")
_MONTHS = {
    m.encode(): i
    for i, m in enumerate(
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"],
        start=1,
    )
}


def _us(dt: datetime) -> int:
    return int(dt.timestamp()) * 1_000_000 + dt.microsecond


def line_time_us(line: bytes, year: int) -> int | None:
    """The time at the start of a log line, in µs since the epoch (UTC unless it says)."""
    m = _ISO.match(line)
    try:
        if m:
            frac = (m.group(7) or b"0").decode()
            micro = int((frac + "000000")[:6])
            tz = m.group(8)
            year_, month, day, hour, minute, second = (int(g) for g in m.group(1, 2, 3, 4, 5, 6))
            dt = datetime(year_, month, day, hour, minute, second, micro, tzinfo=UTC)
            if tz and tz != b"Z":
                sign = 1 if tz[:1] == b"+" else -1
                digits = tz[1:].replace(b":", b"")
                dt -= sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
            return _us(dt)
        m = _EPOCH.match(line)
        if m:
            return int(m.group(1)) * 1_000_000 + int(m.group(2))
        m = _SYSLOG.match(line)
        if m:
            micro = int(((m.group(6) or b"0").decode() + "000000")[:6])
            return _us(
                datetime(
                    year,
                    _MONTHS[m.group(1)],
                    int(m.group(2)),
                    int(m.group(3)),
                    int(m.group(4)),
                    int(m.group(5)),
                    micro,
                    tzinfo=UTC,
                )
            )
        m = _VLLM.match(_ANSI.sub(b"", line[:200]).lstrip())
        if m:
            month, day, hour, minute, second = (int(g) for g in m.groups())
            return _us(datetime(year, month, day, hour, minute, second, tzinfo=UTC))
    except ValueError:  # 02-30, 25:00 and the like
        return None
    return None


class TextLineParser:
    def __init__(self, path: Path, cursor: FileCursor, service: str, host: str) -> None:
        mtime = path.stat().st_mtime
        self.year = datetime.fromtimestamp(mtime, UTC).year
        self.last_time = int((cursor.extra or {}).get("last_time_us", int(mtime * 1_000_000)))
        self.stream = f"{clean_name(host)}/{clean_name(service)}"
        self.source = f"{KIND}:{clean_name(host)}:{clean_name(service)}"
        self.chain = bytes.fromhex((cursor.extra or {}).get("chain", "")) or bytes(8)
        self.path = str(path)
        self.service = service
        self.host = host

    def __call__(
        self, line_no: int, line: bytes, position: dict[str, Any], consumed: int
    ) -> Record | None:
        self.chain = hashlib.blake2b(self.chain + line + b"\n", digest_size=8).digest()
        if not line.strip():
            return None
        t = line_time_us(line, self.year)
        if t is not None:
            self.last_time = t
        message, raw = decode_text(line)
        payload = {
            "type": "log.recorded",
            "origin": "text",
            "message": message,
            "message_b64": raw,
            "unit": self.service,
            "host": self.host,
            "path": self.path,
            "line_no": line_no,
        }
        event = {
            "stream": self.stream,
            "time_us": self.last_time,
            "source": self.source,
            "key": int.from_bytes(self.chain, "big") >> 1,
            "payload": payload,
        }
        return Record(line_no, event, None, position, consumed)

    def extra(self) -> dict[str, Any] | None:
        return {"last_time_us": self.last_time, "chain": self.chain.hex()}


def refuse_binary(path: Path) -> None:
    """InputError when the file `path` is binary data, not a log (`kinds.looks_binary`, as
    `classify` refuses it)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(SNIFF_BYTES)
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e}") from e
    if looks_binary(head):
        raise InputError(binary_message(str(path)))


def ingest_text_file(
    store: EventStore,
    path: Path,
    service: str,
    host: str,
    *,
    strict: bool = False,
    progress: Progress | None = None,
    complete_only: bool = False,
) -> IngestReport:
    """Ingest the text log `path` under `service` on `host`. InputError, nothing written,
    when it is binary data (`refuse_binary`)."""
    refuse_binary(path)

    def parser(p: Path, cursor: FileCursor) -> TextLineParser:
        return TextLineParser(p, cursor, service, host)

    return ingest_file(
        store,
        path,
        KIND,
        parser,
        qualifier=service,
        strict=strict,
        progress=progress,
        complete_only=complete_only,
    )
