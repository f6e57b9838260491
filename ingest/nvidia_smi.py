"""`nvidia-smi --query-gpu=... --format=csv -l 1` logs → `gpu.sampled` events."""

from __future__ import annotations

import csv
import math
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import ValidationError

from advisor.core.errors import InputError
from advisor.core.payloads import GpuSampled
from advisor.core.records import Progress, Record
from ingest.batches import IngestReport
from ingest.filejob import ingest_file
from ingest.files import FileCursor
from ingest.gpu_samples import sample_event

if TYPE_CHECKING:
    from advisor.store import EventStore

KIND = "nvidia-smi"
MIB = 1024 * 1024
REQUIRED = ("timestamp", "index", "memory.total", "memory.used")
_MISSING = {
    "",
    "n/a",
    "[n/a]",
    "[not supported]",
    "not supported",
    "[unknown error]",
    "[insufficient permissions]",
    "[gpu is lost]",
    "[gpu requires reset]",
}
# Larger values (or inf/nan) are garbage; this bound keeps MiB × 2**20 within a 64-bit int.
_MAX_VALUE = 2.0**42


def timezone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as e:
        raise InputError(f"--timezone {name!r} is not a known time zone") from e


def _split(line: str) -> list[str]:
    return [c.strip() for c in next(csv.reader([line], skipinitialspace=True))]


def _column_name(header: str) -> str:
    return header.split("[", 1)[0].strip().lower()


def _number(value: str) -> float | None:
    text = value.strip()
    if text.lower() in _MISSING:
        return None
    for suffix in ("MiB", "W", "%", "C"):
        if text.endswith(suffix):
            text = text[: -len(suffix)].strip()
            break
    number = float(text)
    if not math.isfinite(number) or abs(number) >= _MAX_VALUE:
        raise ValueError(f"{value.strip()!r} is out of range")
    return number


class CsvParser:
    def __init__(self, path: Path, cursor: FileCursor, host: str, tz: ZoneInfo) -> None:
        saved = (cursor.extra or {}).get("header")
        self.columns: list[str] | None = list(saved) if saved else None
        self.path = path
        self.host = host
        self.tz = tz

    def extra(self) -> dict[str, Any] | None:
        return {"header": self.columns} if self.columns else None

    def __call__(
        self, line_no: int, line: bytes, position: dict[str, Any], consumed: int
    ) -> Record | None:
        text = line.decode("utf-8", "replace")
        if not text.strip():
            return None
        try:
            cells = _split(text)
        except csv.Error as e:
            return Record(line_no, None, f"unreadable CSV: {e}", position, consumed)
        if cells and cells[0].lower() in ("timestamp", "index"):
            columns = [_column_name(c) for c in cells]
            missing = [c for c in REQUIRED if c not in columns]
            if missing:
                raise InputError(
                    f"{self.path}: line {line_no}: nvidia-smi CSV header lacks "
                    f"{', '.join(missing)} (log with --query-gpu=timestamp,index,"
                    "memory.total,memory.used,...)"
                )
            self.columns = columns
            return None
        if self.columns is None:
            return Record(line_no, None, "data before the CSV header line", position, consumed)
        if len(cells) != len(self.columns):
            return Record(
                line_no,
                None,
                f"expected {len(self.columns)} columns, got {len(cells)}",
                position,
                consumed,
            )
        row = dict(zip(self.columns, cells, strict=True))
        try:
            event = self._event(row)
        except (ValueError, ValidationError) as e:
            reason = (
                str(e).splitlines()[0]
                if not isinstance(e, ValidationError)
                else f"{e.errors()[0]['loc'][0]}: {e.errors()[0]['msg']}"
            )
            return Record(line_no, None, f"bad value: {reason}"[:200], position, consumed)
        return Record(line_no, event, None, position, consumed)

    def _event(self, row: dict[str, str]) -> dict[str, Any]:
        when = datetime.strptime(row["timestamp"], "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=self.tz)
        time_us = int(when.timestamp()) * 1_000_000 + when.microsecond

        def mib(name: str) -> int | None:
            value = _number(row[name]) if name in row else None
            return None if value is None else int(value * MIB)

        total, used = mib("memory.total"), mib("memory.used")
        if total is None or used is None:
            raise ValueError("memory.total and memory.used are required")
        free = mib("memory.free")

        def opt(name: str) -> float | None:
            return _number(row[name]) if name in row else None

        util, mem_util, temp = (
            opt("utilization.gpu"),
            opt("utilization.memory"),
            opt("temperature.gpu"),
        )
        sample = GpuSampled(
            origin="nvidia-smi",
            host=self.host,
            index=int(row["index"]),
            uuid=row.get("uuid") or None,
            name=row.get("name") or None,
            memory_total_bytes=total,
            memory_used_bytes=used,
            memory_free_bytes=free if free is not None else max(0, total - used),
            utilization_gpu_pct=None if util is None else int(util),
            utilization_memory_pct=None if mem_util is None else int(mem_util),
            temperature_c=None if temp is None else int(temp),
            power_w=opt("power.draw"),
        )
        return sample_event(time_us, sample)


def ingest_nvidia_smi_file(
    store: EventStore,
    path: Path,
    host: str,
    *,
    tz: str = "UTC",
    strict: bool = False,
    progress: Progress | None = None,
    complete_only: bool = False,
) -> IngestReport:
    zone = timezone(tz)

    def parser(p: Path, cursor: FileCursor) -> CsvParser:
        return CsvParser(p, cursor, host, zone)

    return ingest_file(
        store,
        path,
        KIND,
        parser,
        qualifier=host,
        strict=strict,
        progress=progress,
        complete_only=complete_only,
    )
