"""Names and keys the projections are made of: a line's place in its stream's order, a run's
id and content, a configuration's key."""

from __future__ import annotations

import functools
import hashlib
import re
from datetime import UTC, datetime
from typing import Any, Final

import orjson

from advisor.core.events import canonical_payload
from advisor.core.payloads import LogRecorded
from advisor.core.statuses import IncidentStatus
from advisor.core.timefmt import format_iso_us, parse_iso_us

CURRENT: Final = (IncidentStatus.OPEN, IncidentStatus.RESOLVED)  # not superseded
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_SEQNUM = re.compile(r"(?:^|;)i=([0-9a-fA-F]{1,16})(?=;|$)")
_NUMBER_MAX: Final = 10**20 - 1


def config_key(config: dict[str, Any]) -> str:
    """A short stable name for a configuration: a failure after a config change is new."""
    return hashlib.blake2b(
        orjson.dumps(config, option=orjson.OPT_SORT_KEYS), digest_size=8
    ).hexdigest()


def _digest(value: str | bytes) -> str:
    data = value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=8).hexdigest()


@functools.lru_cache(maxsize=1024)  # a journal's seqnum id, a log's path: the same on each line
def _name_digest(value: str) -> str:
    return _digest(value)


def _seqnum(cursor: str) -> tuple[int, str] | None:
    """journald's sequence number and seqnum id from a cursor (`s=…;i=<hex>;…`)."""
    m = _SEQNUM.search(cursor)
    if m is None:
        return None
    if cursor.startswith("s="):
        start = 2
    else:
        start = cursor.find(";s=") + 3
        if start == 2:  # no seqnum id
            return int(m.group(1), 16), ""
    end = cursor.find(";", start)
    return int(m.group(1), 16), cursor[start : end if end >= 0 else None]


def _number(value: int | None) -> int:
    return 0 if value is None else max(0, min(value, _NUMBER_MAX))


def order_key(time_us: int, p: LogRecorded) -> str:
    """Where a log line stands in its stream whatever order it arrived in, as text that sorts
    as the order does: its time, then for lines of the same microsecond the journal's own
    order — journald's sequence number (`i=` of the cursor, the seqnum id `s=` apart), a text
    log's line number (of its file), else the monotonic clock and the line's content. The
    same line gives the same key in every store (it is made of the payload, not of seqs)."""
    when = f"{max(0, time_us):019d}"
    journald = _seqnum(p.cursor) if p.cursor else None
    if journald is not None:
        return f"{when} 0{journald[0]:020d} {_name_digest(journald[1])}"
    if p.line_no is not None:
        return f"{when} 1{_number(p.line_no):020d} {_name_digest(p.path or '')}"
    return f"{when} 2{_number(p.monotonic_us):020d} {_digest(canonical_payload(p))}"


def cut_into_runs(stream: str) -> bool:
    """Are `stream`'s log lines cut into runs: a unit's (`HOST/UNIT`), not the kernel's and
    not a host's own? (The others' lines are read only as evidence, when a run is judged.)"""
    _host, _, unit = stream.partition("/")
    return bool(unit) and unit != "kernel"


def run_content(
    first_key: str,
    last_key: str,
    lines: int,
    peak_used: int | None = None,
    peak_total: int | None = None,
) -> str:
    """What a diagnosis of a run judges: its lines — with its first and last lines' places
    and their count, the same set of lines (a stream only gains lines) in every store that
    holds them — and its peak GPU memory."""
    return _digest(f"{first_key}\n{last_key}\n{lines}\n{peak_used}\n{peak_total}")


def run_id_of(stream: str, time_us: int) -> str:
    """`HOST/UNIT@<time of the run's first line>`: the same in every store the events reach
    (a sequence number would differ once events are shipped to a central store)."""
    return f"{stream}@{format_iso_us(time_us)}"


def id_time(run_id: str, default: int) -> int:
    """The time a run id (`…@<time>`) names, or `default` when it names none."""
    _, at, when = run_id.rpartition("@")
    if at:
        try:
            return parse_iso_us(when)
        except ValueError:
            return default
    return default
