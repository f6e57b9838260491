"""journald entries → `log.recorded` events.

Entries arrive from `journalctl -o json` lines (values are strings, arrays of byte values,
null, or arrays of those for repeated fields) or from the `-o export` stream (values are
bytes; a repeated field is a list). Both become the same event.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from ingest.records import Record, clean_name, decode_text, stable_key

JOURNALD_SOURCE = "journald"
NO_CURSOR_SOURCE = "journald:no-cursor"

# Fields kept besides the ones that have a payload attribute of their own: what diagnosis
# (exit status, restarts, results, drops) and audit need, not every trusted field.
KEPT_FIELDS = (
    "EXIT_CODE", "EXIT_STATUS", "UNIT_RESULT", "N_RESTARTS", "JOB_TYPE", "JOB_RESULT", "JOB_ID",
    "COMMAND", "N_DROPPED", "COREDUMP_UNIT", "COREDUMP_SIGNAL_NAME", "COREDUMP_PID", "_LINE_BREAK",
    "OBJECT_SYSTEMD_UNIT", "CPU_USAGE_NSEC", "MEMORY_PEAK", "ERRNO", "SYSLOG_PID",
)


class EntryError(ValueError):
    pass


def _value(name: str, v: Any) -> tuple[str | None, str | None, bool]:
    """One field value → (text, base64 of raw bytes when lossy, is_null)."""
    if isinstance(v, str):
        return v, None, False
    if v is None:
        return None, None, True
    if isinstance(v, bytes):
        text, raw = decode_text(v)
        return text, raw, False
    if isinstance(v, list):
        if all(type(b) is int for b in v):
            try:
                data = bytes(v)
            except ValueError as e:
                raise EntryError(f"field {name}: byte array has values outside 0-255") from e
            text, raw = decode_text(data)
            return text, raw, False
        # a field with several values
        parts = [_value(name, item) for item in v]
        texts = [p[0] for p in parts if p[0] is not None]
        raws = [p[1] for p in parts if p[1] is not None]
        return ("\n".join(texts) if texts else None, raws[0] if raws else None,
                all(p[2] for p in parts))
    raise EntryError(f"field {name}: expected a string, a byte array or null, "
                     f"got {type(v).__name__}")


def _first(name: str, v: Any) -> str | None:
    if isinstance(v, str):
        return v
    if isinstance(v, list) and v and not all(type(b) is int for b in v):
        return _first(name, v[0])
    return _value(name, v)[0]


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    text = text.strip()
    if text.isascii() and text.isdigit() and len(text) <= 18:
        return int(text)
    return None


def entry_event(fields: Mapping[str, Any], *, default_host: str | None = None,
                identity: bytes | None = None) -> dict[str, Any]:
    """Build the raw `NewEvent` dict for one journal entry; raise EntryError if unusable."""
    get = fields.get
    realtime = _int(_first("__REALTIME_TIMESTAMP", get("__REALTIME_TIMESTAMP")))
    if realtime is None:
        raise EntryError("no usable __REALTIME_TIMESTAMP")
    message, message_b64, truncated = _value("MESSAGE", get("MESSAGE")) if "MESSAGE" in fields \
        else (None, None, False)

    def text(name: str) -> str | None:
        v = get(name)
        return None if v is None else _first(name, v)

    host = text("_HOSTNAME") or default_host or "localhost"
    transport = text("_TRANSPORT")
    systemd_unit = text("_SYSTEMD_UNIT")
    pid = _int(text("_PID"))
    if transport == "kernel":
        unit = None
        stream_unit = "kernel"
    else:
        # PID 1 and the user manager say which unit a message is about in UNIT=/USER_UNIT=.
        unit = (text("UNIT") or text("USER_UNIT") or text("COREDUMP_UNIT")
                or text("OBJECT_SYSTEMD_UNIT") or systemd_unit)
        stream_unit = unit or text("SYSLOG_IDENTIFIER") or "unknown"
    kept = {}
    for name in KEPT_FIELDS:
        if name in fields:
            value = text(name)
            if value is not None:
                kept[name] = value
    if systemd_unit is not None and systemd_unit != unit:
        kept["_SYSTEMD_UNIT"] = systemd_unit
    cursor = text("__CURSOR")
    payload: dict[str, Any] = {
        "type": "log.recorded",
        "origin": "journald",
        "message": message,
        "message_truncated": True if truncated else None,
        "message_b64": message_b64,
        "priority": _int(text("PRIORITY")),
        "pid": pid,
        "comm": text("_COMM"),
        "identifier": text("SYSLOG_IDENTIFIER"),
        "unit": unit,
        "host": host,
        "boot_id": text("_BOOT_ID"),
        "invocation_id": text("INVOCATION_ID") or text("_SYSTEMD_INVOCATION_ID")
        or text("USER_INVOCATION_ID"),
        "cursor": cursor,
        "monotonic_us": _int(text("__MONOTONIC_TIMESTAMP")),
        "message_id": text("MESSAGE_ID"),
        "transport": transport,
        "fields": kept or None,
    }
    if cursor:
        source, key = JOURNALD_SOURCE, stable_key(cursor.encode("utf-8", "surrogatepass"))
    else:
        source = NO_CURSOR_SOURCE
        key = stable_key(identity if identity is not None else orjson.dumps(
            fields, option=orjson.OPT_SORT_KEYS, default=repr))
    return {"stream": f"{clean_name(host)}/{clean_name(stream_unit)}", "time_us": realtime,
            "source": source, "key": key, "payload": payload}


def json_line_record(line: bytes, line_no: int, *, default_host: str | None = None,
                     position: dict[str, Any] | None = None) -> Record:
    """Decode one `journalctl -o json` line; malformed lines come back with `error` set."""
    stripped = line.strip()
    if stripped.startswith(b"\x1e"):  # -o json-seq record separator
        stripped = stripped[1:]
    try:
        obj = orjson.loads(stripped)
    except orjson.JSONDecodeError as e:
        return Record(line_no, None, f"invalid JSON: {str(e).splitlines()[0][:120]}",
                      position, len(line))
    if not isinstance(obj, dict):
        return Record(line_no, None, f"expected a JSON object, got {type(obj).__name__}",
                      position, len(line))
    try:
        event = entry_event(obj, default_host=default_host, identity=stripped)
    except EntryError as e:
        return Record(line_no, None, str(e), position, len(line))
    return Record(line_no, event, None, position, len(line))
