"""Reading events only as far as deciding about them needs: what a host ships to its fleet
is decided on each event's envelope and, for a log line, the start of its message
(`advisor.fleet.selection`), so a routine line is never read whole."""

from __future__ import annotations

from typing import Final, NamedTuple

from sqlalchemy import Connection

__all__ = ["MESSAGE_KEY", "Glance", "glance"]

MESSAGE_KEY: Final = '"message":"'  # where a log line's message starts in its stored payload
_LOG_TYPE: Final = "log.recorded"


class Glance(NamedTuple):
    """An event seen without its whole payload (`EventStore.glance`): its envelope, its hash,
    and `text` — a log line's message, its first characters only (None when it has none);
    any other event's payload. `relayed`: it carries an origin (it was shipped here from
    another host). A tuple: a host makes one for each line it ships or keeps."""

    seq: int
    stream: str
    type: str
    time_us: int
    recorded_us: int
    hash: bytes
    text: str | None
    relayed: bool


def glance(
    conn: Connection, dialect: str, after_seq: int, limit: int, message_chars: int
) -> list[Glance]:
    """The next `limit` events after `after_seq`, in sequence order: a log line's message to
    its first `message_chars` characters (the database cuts it), any other event's payload.
    Through the driver's own cursor: a host glances at every line it ships or keeps, and a
    row object a line would double the cost."""
    postgres = dialect == "postgresql"
    mark, find = ("%s", "strpos") if postgres else ("?", "instr")
    sql = (
        "SELECT seq, stream, type, event_time_us, recorded_time_us, hash, "
        f"CASE WHEN type <> '{_LOG_TYPE}' THEN payload "
        f"ELSE substr(payload, nullif({find}(payload, {mark}), 0) + {len(MESSAGE_KEY)}, "
        f"{mark}) END, origin IS NOT NULL "
        f"FROM events WHERE seq > {mark} ORDER BY seq LIMIT {mark}"
    )
    cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(sql, (MESSAGE_KEY, message_chars, after_seq, limit))
        return list(map(Glance._make, cursor.fetchall()))
    finally:
        cursor.close()
