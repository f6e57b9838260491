"""journald entries → `log.recorded` events.

Entries arrive from `journalctl -o json` lines (values are strings, arrays of byte values,
null, or arrays of those for repeated fields) or from the `-o export` stream (values are
bytes; a repeated field is a list). Both become the same event.

Which unit an entry is *about* (its stream, and so the runs, incidents and remediation it
feeds) is decided only by what journald vouches for, as `journalctl -u` does. Fields that
begin with `_` are journald's own (a client cannot send them); any other field is whatever
the sender wrote, and any local user can send `UNIT=vllm.service`. So:

* `UNIT=` and `INVOCATION_ID=` are believed only from `_PID=1` (the service manager's own
  messages about a unit);
* `COREDUMP_UNIT=` and `OBJECT_SYSTEMD_UNIT=` (with `OBJECT_SYSTEMD_INVOCATION_ID=`) only
  from `_UID=0` (systemd-coredump, privileged daemons); a coredump's entry gets no invocation
  id: the sender's `_SYSTEMD_INVOCATION_ID` is that of its own unit, not of the one it is about;
* `USER_UNIT=` and `USER_INVOCATION_ID=` never: they are what a user manager (a process of
  that user, never PID 1) says about its user units, and this store's units are system
  units; such an entry stays on the stream of the unit that sent it (`user@UID.service`);
* otherwise the unit is `_SYSTEMD_UNIT` and the invocation `_SYSTEMD_INVOCATION_ID`. An
  entry without `_SYSTEMD_UNIT` is filed under its `SYSLOG_IDENTIFIER` (also the sender's
  choice), unless that looks like a unit name: then under `unknown`.

A claim that was not believed is kept in `fields`, under its own name, as evidence; it
decides nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson

from advisor.core.events import Prepared
from advisor.core.payloads import LogRecorded
from advisor.core.records import Record, clean_name, decode_text, stable_key
from advisor.core.units import has_type_suffix

_NAMELESS = "unknown"  # the stream of a sender that names no unit (not a label)
JOURNALD_SOURCE = "journald"
NO_CURSOR_SOURCE = "journald:no-cursor"

# Fields kept besides the ones that have a payload attribute of their own: what diagnosis
# (exit status, restarts, results, drops) and audit need, not every trusted field.
KEPT_FIELDS = (
    "EXIT_CODE",
    "EXIT_STATUS",
    "UNIT_RESULT",
    "N_RESTARTS",
    "JOB_TYPE",
    "JOB_RESULT",
    "JOB_ID",
    "COMMAND",
    "N_DROPPED",
    "COREDUMP_UNIT",
    "COREDUMP_SIGNAL_NAME",
    "COREDUMP_PID",
    "_LINE_BREAK",
    "OBJECT_SYSTEMD_UNIT",
    "CPU_USAGE_NSEC",
    "MEMORY_PEAK",
    "ERRNO",
    "SYSLOG_PID",
)


class EntryError(ValueError):
    pass


def _bytes_of(v: list[Any]) -> bytes | None:
    """A JSON array of byte values as journald prints binary data; None if not one."""
    try:
        return bytes(v)
    except TypeError:
        return None  # not all ints: a field with several values
    except ValueError as e:
        raise EntryError("byte array has values outside 0-255") from e


def _value(name: str, v: Any) -> tuple[str | None, str | None, bool]:
    """One field value → (text, base64 of raw bytes when lossy, is_null)."""
    if v.__class__ is str:
        return v, None, False
    if v is None:
        return None, None, True
    if isinstance(v, bytes):
        text, raw = decode_text(v)
        return text, raw, False
    if isinstance(v, list):
        try:
            data = _bytes_of(v)
        except EntryError as e:
            raise EntryError(f"field {name}: {e}") from e
        if data is not None:
            text, raw = decode_text(data)
            return text, raw, False
        parts = [_value(name, item) for item in v]
        texts = [p[0] for p in parts if p[0] is not None]
        raws = [p[1] for p in parts if p[1] is not None]
        return (
            "\n".join(texts) if texts else None,
            raws[0] if raws else None,
            all(p[2] for p in parts),
        )
    raise EntryError(
        f"field {name}: expected a string, a byte array or null, got {type(v).__name__}"
    )


def _first(name: str, v: Any) -> str | None:
    """The text of a field; the first value of a field with several."""
    if v is None or v.__class__ is str:
        return v
    if isinstance(v, list) and v:
        try:
            data = _bytes_of(v)
        except EntryError as e:
            raise EntryError(f"field {name}: {e}") from e
        if data is None:
            return _first(name, v[0])
    return _value(name, v)[0]


def _int(text: str | None) -> int | None:
    if text is None or len(text) > 18:
        return None
    if text.isascii() and text.isdigit():  # the common case: plain digits, no sign
        return int(text)
    try:
        value = int(text)
    except ValueError:
        return None
    return value if value >= 0 else None


# (journald field, payload attribute) for the plain text fields, in canonical order.
_TEXT_FIELDS = (
    ("_COMM", "comm"),
    ("SYSLOG_IDENTIFIER", "identifier"),
    ("_BOOT_ID", "boot_id"),
    ("__CURSOR", "cursor"),
    ("MESSAGE_ID", "message_id"),
    ("_TRANSPORT", "transport"),
)
_INT_FIELDS = (("PRIORITY", "priority"), ("_PID", "pid"), ("__MONOTONIC_TIMESTAMP", "monotonic_us"))
# What a sender may say about a unit, kept in `fields` when not believed (COREDUMP_UNIT and
# OBJECT_SYSTEMD_UNIT are in KEPT_FIELDS anyway).
_CLAIMS = (
    "UNIT",
    "INVOCATION_ID",
    "OBJECT_SYSTEMD_INVOCATION_ID",
    "USER_UNIT",
    "USER_INVOCATION_ID",
)


_KEPT = frozenset(KEPT_FIELDS)
# The fields that make `_about` look further than _SYSTEMD_UNIT (see the module's docstring).
_UNUSUAL = frozenset(("UNIT", "COREDUMP_UNIT", "OBJECT_SYSTEMD_UNIT", *_CLAIMS))


def _trusted(fields: Mapping[str, Any], name: str, value: str) -> bool:
    """Does journald's field `name` hold exactly `value` (one value, not several)?"""
    v = fields.get(name)
    if v.__class__ is str:
        return bool(v == value)
    if isinstance(v, bytes):
        return v == value.encode()
    if isinstance(v, list) and v and all(type(b) is int and 0 <= b <= 255 for b in v):
        return bytes(v) == value.encode()
    return False  # missing, null, not bytes, or several values: journald writes its fields once


def _about(
    fields: Mapping[str, Any], text: Callable[[str], str | None], systemd_unit: str | None
) -> tuple[str | None, str | None, dict[str, str]]:
    """(unit, invocation id) the entry is about, from what journald vouches for, and the
    claims that were not believed (see the module's docstring)."""
    used: tuple[str, ...] = ()
    if "UNIT" in fields and _trusted(fields, "_PID", "1") and (unit := text("UNIT")) is not None:
        invocation, used = text("INVOCATION_ID"), ("UNIT", "INVOCATION_ID")
    elif (
        "COREDUMP_UNIT" in fields
        and _trusted(fields, "_UID", "0")
        and (unit := text("COREDUMP_UNIT")) is not None
    ):
        invocation = None
    elif (
        "OBJECT_SYSTEMD_UNIT" in fields
        and _trusted(fields, "_UID", "0")
        and (unit := text("OBJECT_SYSTEMD_UNIT")) is not None
    ):
        invocation, used = text("OBJECT_SYSTEMD_INVOCATION_ID"), ("OBJECT_SYSTEMD_INVOCATION_ID",)
    else:
        unit, invocation = systemd_unit, text("_SYSTEMD_INVOCATION_ID")
    if fields.keys().isdisjoint(_CLAIMS):  # the common case: nothing claimed
        return unit, invocation, {}
    claims = {
        name: v
        for name in _CLAIMS
        if name in fields and name not in used and (v := text(name)) is not None
    }
    return unit, invocation, claims


class JournalEvent(dict[str, Any]):
    """A raw event as `entry_event` built it: valid by construction (a cleaned, bounded
    stream; a time of at most 18 digits; a 63-bit key; a `log.recorded` payload of str, int
    and True values under its own field names, none None), so `journal_prepared` serialises
    it without validating it again (tests/ingest/test_journal_prepared.py holds it to that)."""

    __slots__ = ()


def journal_prepared(event: JournalEvent) -> Prepared:
    """`prepare` for one JournalEvent, without the validation (see JournalEvent)."""
    payload = event["payload"]
    body = orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)
    time_us, source, key = event["time_us"], event["source"], event["key"]
    return (event["stream"], payload["type"], LogRecorded.version, time_us, source, key, body)


def entry_event(
    fields: Mapping[str, Any], *, default_host: str | None = None, identity: bytes | None = None
) -> JournalEvent:
    """Build the raw `NewEvent` dict for one journal entry; raise EntryError if unusable."""
    realtime, payload, stream_unit = entry_payload(fields, default_host=default_host)
    source, key = _source_key(payload.get("cursor"), fields, identity)
    return JournalEvent(
        stream=f"{clean_name(payload['host'])}/{clean_name(stream_unit)}",
        time_us=realtime,
        source=source,
        key=key,
        payload=payload,
    )


def entry_payload(
    fields: Mapping[str, Any], *, default_host: str | None = None
) -> tuple[int, dict[str, Any], str]:
    """(time, `log.recorded` payload, unit of its stream) of one journal entry: what
    `entry_event` builds, less the stream's name and the idempotency key; EntryError if
    unusable. Almost every value is a plain string; anything else goes through `_first`.

    Every value is the sender's (or a file's) to choose: one that the decoding cannot take
    (a type, a byte value, a nesting it was not written for) makes this entry an EntryError,
    never an exception that would stop the rest of the file."""
    try:
        return _entry_payload(fields, default_host)
    except EntryError:
        raise
    except (ValueError, TypeError, OverflowError, RecursionError) as e:
        raise EntryError(f"unusable entry: {type(e).__name__}: {str(e)[:120]}") from e


def _entry_payload(
    fields: Mapping[str, Any], default_host: str | None
) -> tuple[int, dict[str, Any], str]:
    get = fields.get

    def text(name: str) -> str | None:
        v = get(name)
        return v if v is None or v.__class__ is str else _first(name, v)

    realtime = _int(text("__REALTIME_TIMESTAMP"))
    if realtime is None:
        raise EntryError("no usable __REALTIME_TIMESTAMP")
    payload: dict[str, Any] = {"type": "log.recorded", "origin": "journald"}
    message = get("MESSAGE")
    if message.__class__ is str:  # the common case, as _put_message would put it
        payload["message"] = message
    elif "MESSAGE" in fields:
        _put_message(payload, message)
    host = text("_HOSTNAME") or default_host or "localhost"
    systemd_unit = text("_SYSTEMD_UNIT")
    claims: dict[str, str] = {}
    if fields.keys().isdisjoint(_UNUSUAL):  # the common case: no unit named, no claims
        unit, invocation = systemd_unit, text("_SYSTEMD_INVOCATION_ID")
    else:
        unit, invocation, claims = _about(fields, text, systemd_unit)
    if text("_TRANSPORT") == "kernel":
        unit, stream_unit = None, "kernel"
    elif unit is not None:
        payload["unit"] = stream_unit = unit
    else:
        # The identifier is the sender's choice too: never one that reads as a unit's name.
        identifier = clean_name(text("SYSLOG_IDENTIFIER") or _NAMELESS)
        stream_unit = _NAMELESS if has_type_suffix(identifier) else identifier
    payload["host"] = host
    for name, attr in _TEXT_FIELDS:
        v = get(name)
        if v is not None and (v.__class__ is str or (v := _first(name, v)) is not None):
            payload[attr] = v
    for name, attr in _INT_FIELDS:
        v = get(name)
        # the common case, as _int would take it: plain ASCII digits, at most 18 of them
        if v.__class__ is str and len(v) <= 18 and v.isdigit() and v.isascii():
            payload[attr] = int(v)
        elif v is not None and (number := _int(text(name))) is not None:
            payload[attr] = number
    if invocation is not None:
        payload["invocation_id"] = invocation
    kept = _kept(fields, text, claims)
    if systemd_unit is not None and systemd_unit != unit:
        kept["_SYSTEMD_UNIT"] = systemd_unit
    if kept:
        payload["fields"] = kept
    return realtime, payload, stream_unit


def _kept(
    fields: Mapping[str, Any], text: Callable[[str], str | None], claims: dict[str, str]
) -> dict[str, str]:
    """The payload's `fields`: the KEPT_FIELDS the entry has, then the claims not believed."""
    if not claims and fields.keys().isdisjoint(_KEPT):  # the common case: none of them
        return {}
    kept = {name: v for name in KEPT_FIELDS if name in fields and (v := text(name)) is not None}
    kept.update(claims)
    return kept


def _put_message(payload: dict[str, Any], value: Any) -> None:
    """The entry's MESSAGE into the payload: its text, and its bytes when decoding lost some."""
    message, message_b64, truncated = _value("MESSAGE", value)
    if message is not None:
        payload["message"] = message
    if truncated:
        payload["message_truncated"] = True
    if message_b64 is not None:
        payload["message_b64"] = message_b64


def _source_key(
    cursor: str | None, fields: Mapping[str, Any], identity: bytes | None
) -> tuple[str, int]:
    """(source, idempotency key): from the cursor, or from the entry itself without one."""
    if cursor:
        return JOURNALD_SOURCE, stable_key(cursor.encode("utf-8", "surrogatepass"))
    return NO_CURSOR_SOURCE, stable_key(
        identity
        if identity is not None
        else orjson.dumps(fields, option=orjson.OPT_SORT_KEYS, default=repr)
    )


def _json_object(line: bytes) -> tuple[bytes, dict[str, Any] | str]:
    """(the line stripped, its JSON object or why it is not one)."""
    # A copy only when there is something to strip: lines are a kilobyte or more.
    stripped = line.strip() if line[:1].isspace() or line[-1:].isspace() else line
    if stripped.startswith(b"\x1e"):  # -o json-seq record separator
        stripped = stripped[1:]
    try:
        obj = orjson.loads(stripped)
    except orjson.JSONDecodeError as e:
        return stripped, f"invalid JSON: {str(e).splitlines()[0][:120]}"
    if not isinstance(obj, dict):
        return stripped, f"expected a JSON object, got {type(obj).__name__}"
    return stripped, obj


def json_line_record(
    line: bytes,
    line_no: int,
    *,
    default_host: str | None = None,
    position: dict[str, Any] | None = None,
) -> Record:
    """Decode one `journalctl -o json` line; malformed lines come back with `error` set."""
    stripped, obj = _json_object(line)
    if isinstance(obj, str):
        return Record(line_no, None, obj, position, len(line))
    try:
        event = entry_event(obj, default_host=default_host, identity=stripped)
    except EntryError as e:
        return Record(line_no, None, str(e), position, len(line))
    return Record(line_no, event, None, position, len(line))


def json_line_payload(line: bytes) -> tuple[int, dict[str, Any]] | str:
    """(time, payload) of one `journalctl -o json` line, as `json_line_record`'s event holds
    them (without its stream and key, which cost a hash), or its `error` when malformed."""
    try:  # the common case: a JSON object, nothing around it to strip
        obj: Any = orjson.loads(line)
    except orjson.JSONDecodeError:
        obj = None
    if obj.__class__ is not dict:  # the line as json_line_record reads it, and its error
        _, obj = _json_object(line)
        if isinstance(obj, str):
            return obj
    try:
        realtime, payload, _ = entry_payload(obj)
    except EntryError as e:
        return str(e)
    return realtime, payload
