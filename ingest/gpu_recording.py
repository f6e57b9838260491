"""Recordings of GPU samples: JSON lines, one line per sampling tick,
``{"time_us": <int>, "host": "<host>", "gpus": [<GpuSampled, no nulls>]}``.

They let tests and machines without GPUs replay what NVML saw; hostile lines are refused
cheaply (bounded size, depth and string lengths) before validation.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from advisor.core.payloads import MAX_KEY, GpuSampled

# Recordings: bounds applied before validation, so hostile lines cannot cost much.
MAX_LINE_BYTES = 16 * 1024 * 1024
MAX_STRING_CHARS = 4096


class _RecordingLine(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    time_us: int = Field(ge=0, le=MAX_KEY)
    host: str = Field(min_length=1)
    gpus: list[GpuSampled]


def recording_line(time_us: int, host: str, samples: list[GpuSampled]) -> bytes:
    """One recording line (JSON, ending with a newline) for one sampling tick.

    Raises ``ValueError`` for anything ``parse_recording_line`` would refuse to read back (a time
    out of range, an empty host, a sample from another host, NUL characters, strings over
    ``MAX_STRING_CHARS``, text that is not valid Unicode).
    """
    if isinstance(time_us, bool) or not isinstance(time_us, int) or not 0 <= time_us <= MAX_KEY:
        raise ValueError("time_us must be an int in [0, 2**63 - 1]")
    if not isinstance(host, str) or not host:
        raise ValueError("host must be a non-empty string")
    gpus = []
    for i, s in enumerate(samples):
        if s.host != host:
            raise ValueError(f"gpus.{i}.host: differs from the line's host")
        d = s.model_dump(mode="json", exclude_none=True)
        d.pop("type", None)
        gpus.append(d)
    data = {"time_us": time_us, "host": host, "gpus": gpus}
    _check_shape(data)
    try:
        return orjson.dumps(data) + b"\n"
    except orjson.JSONEncodeError as e:
        reason = _one_line(str(e) or type(e).__name__)
        raise ValueError(f"cannot encode recording line: {reason}") from e


# A recording line nests 5 levels deep (line, gpus, gpu, processes, process).
_MAX_DEPTH = 16


def _one_line(text: str, limit: int = 120) -> str:
    """Input-derived text made safe for a one-line message: no control characters, bounded."""
    cleaned = "".join(c if c.isprintable() else "?" for c in text[:limit])
    return cleaned + ("..." if len(text) > limit else "")


def _check_shape(data: Any) -> None:
    """Reject deep nesting, over-long strings and NUL characters (iteratively: no recursion)."""
    stack: list[tuple[Any, str, int]] = [(data, "line", 0)]
    while stack:
        value, where, depth = stack.pop()
        if depth > _MAX_DEPTH:
            raise ValueError(f"nesting deeper than {_MAX_DEPTH} levels at {_one_line(where)}")
        if isinstance(value, str):
            if len(value) > MAX_STRING_CHARS:
                raise ValueError(
                    f"string longer than {MAX_STRING_CHARS} characters at {_one_line(where)}"
                )
            if "\x00" in value:
                raise ValueError(f"NUL character in string at {_one_line(where)}")
        elif isinstance(value, dict):
            for k, v in value.items():
                stack.append((k, f"{where} (a key)", depth + 1))
                stack.append((v, f"{where}.{k[:64]}", depth + 1))
        elif isinstance(value, list):
            stack.extend((v, f"{where}.{i}", depth + 1) for i, v in enumerate(value))


def parse_recording_line(line: bytes | str) -> tuple[int, list[GpuSampled]]:
    """Parse one recording line; ``ValueError`` with a one-line reason for anything malformed."""
    if not isinstance(line, str | bytes | bytearray | memoryview):
        raise ValueError(f"recording line must be bytes or str, not {type(line).__name__}")
    if len(line) > MAX_LINE_BYTES:
        raise ValueError(f"recording line longer than {MAX_LINE_BYTES} bytes")
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError as e:
        raise ValueError(f"invalid JSON: {_one_line(str(e) or type(e).__name__)}") from e
    if not isinstance(data, dict):
        raise ValueError(f"recording line must be a JSON object, not {type(data).__name__}")
    _check_shape(data)
    host = data.get("host")
    gpus = data.get("gpus")
    if isinstance(gpus, list):
        fixed = []
        for i, gpu in enumerate(gpus):
            if not isinstance(gpu, dict):
                raise ValueError(f"gpus.{i}: must be an object")
            gpu = dict(gpu)
            kind = gpu.setdefault("type", "gpu.sampled")
            if kind != "gpu.sampled":
                raise ValueError(f"gpus.{i}.type: must be 'gpu.sampled'")
            gpu.setdefault("origin", "nvml")
            if isinstance(host, str):
                gpu_host = gpu.setdefault("host", host)
                if gpu_host != host:
                    raise ValueError(f"gpus.{i}.host: differs from the line's host")
            fixed.append(gpu)
        data["gpus"] = fixed
    try:
        # Strict JSON-mode validation: "5" is not an int, 5.0 is not an int.
        parsed = _RecordingLine.model_validate_json(orjson.dumps(data), strict=True)
    except orjson.JSONEncodeError as e:
        raise ValueError(f"unencodable value: {_one_line(str(e) or type(e).__name__)}") from e
    except ValidationError as e:
        first = e.errors()[0]
        where = _one_line(".".join(str(p) for p in first["loc"]) or "line")
        raise ValueError(f"invalid recording line at {where}: {_one_line(first['msg'])}") from e
    return parsed.time_us, parsed.gpus
