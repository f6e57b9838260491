"""Times as people type them and as we print them."""

from __future__ import annotations

import math
import re
import time
from datetime import UTC, datetime, timedelta

from advisor.core.errors import InputError

_RELATIVE = re.compile(r"^-?(\d+)\s*(s|sec|m|min|h|hour|hours|d|day|days|w|week|weeks)(?:\s+ago)?$")
_UNIT_S = {
    "s": 1,
    "sec": 1,
    "m": 60,
    "min": 60,
    "h": 3600,
    "hour": 3600,
    "hours": 3600,
    "d": 86400,
    "day": 86400,
    "days": 86400,
    "w": 604800,
    "week": 604800,
    "weeks": 604800,
}
MAX_TIME_US = 253_402_300_799_999_999  # 9999-12-31T23:59:59.999999Z
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_US = timedelta(microseconds=1)


def parse_time_us(text: str, *, now_us: int | None = None) -> int:
    """ISO 8601 (UTC unless it says), @EPOCH seconds, or relative ('-2h', '30m ago');
    between 1970 and the year 9999."""
    value = text.strip()
    now = time.time_ns() // 1000 if now_us is None else now_us
    m = _RELATIVE.match(value)
    if m:
        return _in_range(text, now - int(m.group(1)) * _UNIT_S[m.group(2)] * 1_000_000)
    if value.startswith("@"):
        try:
            seconds = float(value[1:])
        except ValueError:
            pass
        else:
            if math.isfinite(seconds):
                return _in_range(text, int(seconds * 1_000_000))
    else:
        try:
            return _in_range(text, parse_iso_us(value))
        except ValueError:
            pass
    raise InputError(f"{text!r} is not a time (use 2026-02-21T00:32:55Z, @1771633975 or -2h)")


def _in_range(text: str, us: int) -> int:
    if not 0 <= us <= MAX_TIME_US:
        raise InputError(f"{text!r} is outside the times advisor keeps (1970 to the year 9999)")
    return us


def parse_iso_us(text: str) -> int:
    """An ISO 8601 time (`2026-02-21T00:32:55.123Z`; UTC unless it says) as µs since the
    epoch; ValueError when it is not one."""
    dt = datetime.fromisoformat(text)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return (dt - _EPOCH) // _ONE_US


def format_us(us: int) -> str:
    """µs since the epoch as ISO 8601 UTC to the millisecond: 2026-02-21T00:32:55.123Z."""
    seconds, micro = divmod(us, 1_000_000)
    stamp = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{micro // 1000:03d}Z"


def format_iso_us(us: int) -> str:
    """µs since the epoch as ISO 8601 UTC to the microsecond: 2026-02-21T00:32:55.123456Z
    (`parse_iso_us` reads it back exactly)."""
    return (_EPOCH + us * _ONE_US).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
