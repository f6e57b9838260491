"""Turn events and reports into lines for a terminal or for scripts (JSON)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from advisor.core.timefmt import format_us

if TYPE_CHECKING:
    from advisor.core.events import StoredEvent

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
MIB = 1024 * 1024


def safe_text(text: str) -> str:
    """Log text is hostile: drop colour codes and escape every other control character, so
    that nothing from a log can drive the terminal."""
    text = _ANSI.sub("", text).replace("\n", "\\n").replace("\t", " ")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def clip(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters at a word boundary, with an ellipsis when
    anything was cut (a single word longer than half the limit is cut inside)."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    space = head.rfind(" ")
    if space > limit // 2:
        head = head[:space]
    return head.rstrip() + "…"


def escape_controls(text: str) -> str:
    """For formats that carry newlines and tabs themselves (CSV, quoted): every other control
    character (ESC, CR, BEL, C1) as the visible \\xNN that `safe_text` writes, nothing dropped."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


_MD_INLINE = re.compile(r"[\\`*_\[\]#|~<>&]")
_MD_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def markdown_text(text: str) -> str:
    """Text as literal Markdown inline text, placed after other text on its line: control
    characters escaped (`safe_text`), `&`, `<` and `>` as HTML entities (no raw HTML) and the
    characters that open emphasis, links, code, tables or close a heading backslash-escaped.
    Log lines go in `markdown_code` or `markdown_code_block` instead."""
    return _MD_INLINE.sub(lambda m: _MD_ENTITIES.get(m.group(), "\\" + m.group()), safe_text(text))


def _fence_for(text: str, least: int) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(least, longest + 1)


def markdown_code(text: str) -> str:
    """Log text as a Markdown code span that the text cannot close (the delimiter is longer
    than any run of backticks in it): shown literally, no HTML, links or emphasis."""
    body = safe_text(text)
    if not body:
        return ""
    fence = _fence_for(body, 1)
    if body[0] == "`" or body[-1] == "`" or (body[0] == " " and body[-1] == " "):
        body = f" {body} "
    return f"{fence}{body}{fence}"


def markdown_code_block(lines: list[str], info: str = "text") -> str:
    """Log lines (control characters escaped) as a fenced code block that they cannot close:
    the fence is one backtick longer than the longest run of backticks in them. Inside, HTML
    and Markdown are shown, not interpreted."""
    body = [safe_text(line) for line in lines]
    fence = _fence_for("\n".join(body), 3)
    return "\n".join([fence + info, *body, fence])


def summary(event: StoredEvent) -> str:
    # Imported here, not above: the text helpers of this module are used by every command,
    # and the event models (pydantic) would cost `advisor --help` a fifth of a second.
    from advisor.core.payloads import (
        GpuSampled,
        IncidentClassified,
        IncidentOpened,
        IncidentRecurred,
        IncidentResolved,
        LogRecorded,
        RunClassified,
    )

    p = event.payload
    if isinstance(p, LogRecorded):
        if p.message is None:
            return (
                "[message not stored: over 4 KiB in journalctl -o json]"
                if p.message_truncated
                else "[no message]"
            )
        return safe_text(p.message)
    if isinstance(p, GpuSampled):
        parts = [f"gpu{p.index} {p.memory_used_bytes // MIB}/{p.memory_total_bytes // MIB} MiB"]
        if p.utilization_gpu_pct is not None:
            parts.append(f"util {p.utilization_gpu_pct}%")
        if p.temperature_c is not None:
            parts.append(f"{p.temperature_c}C")
        if p.power_w is not None:
            parts.append(f"{p.power_w:.0f}W")
        if p.processes:
            parts.append(
                "procs "
                + ",".join(
                    f"{q.pid}{'(' + safe_text(q.unit) + ')' if q.unit else ''}" for q in p.processes
                )
            )
        return " ".join(parts)
    if isinstance(p, IncidentClassified | RunClassified):
        what = p.incident_id if isinstance(p, IncidentClassified) else p.run_id
        return safe_text(f"{what} {p.label} {p.confidence:.2f} phase={p.phase}")
    if isinstance(p, IncidentOpened | IncidentRecurred | IncidentResolved):
        extra = f" runs={p.runs}" if isinstance(p, IncidentRecurred) else ""
        return safe_text(f"{p.incident_id} run={p.run_id}{extra}")
    return ""


def event_line(event: StoredEvent) -> str:
    return (
        f"{event.seq:>8}  {format_us(event.time_us)}  {safe_text(event.stream)}  "
        f"{event.type}  {summary(event)}"
    )


def event_json(event: StoredEvent) -> dict[str, Any]:
    return {
        "seq": event.seq,
        "stream": event.stream,
        "type": event.type,
        "schema_version": event.version,
        "time_us": event.time_us,
        "time": format_us(event.time_us),
        "recorded_time_us": event.recorded_us,
        "source": event.source,
        "idem_key": event.key,
        "payload": event.payload.model_dump(mode="json", exclude_none=True),
    }
