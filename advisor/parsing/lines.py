"""One log line as diagnosis sees it, whatever shape it arrived in.

A line comes from a stored `log.recorded` event, from a `journalctl -o json` line, or from
plain text as people paste it (journalctl short output, `systemctl status`, docker/kubectl
logs, raw server output). `split_line` peels the wrappers off the text — docker compose's and
`kubectl logs --prefix`'s prefixes, container and journal timestamps, the `host ident[pid]:`
of journalctl, vLLM's `(Name pid=N)` process prefix (and Ray's, which vLLM's workers print
under) and logger header, uvicorn's level, SGLang's `[time TP0]`, TGI's tracing header — and
keeps what they said as attributes: who wrote the line (`pid` is the writer's own pid from
vLLM's prefix, not journald's `_PID`, which every child shares with the main process), at
which level, and for which engine.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from advisor.core.engines import sglang, tgi, vllm
from advisor.core.slots import quick_init

_EMPTY: Mapping[str, str] = MappingProxyType({})

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# docker logs -t / kubectl logs --timestamps / journalctl -o short-iso(-precise)
_ISO_PREFIX = re.compile(
    r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?\s"
)
_EPOCH_PREFIX = re.compile(r"^\d{10}\.\d{6}\s")
_SYSLOG_TIME = re.compile(
    r"^(?:[A-Z][a-z]{2} )?(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +\d{1,2} "
    r"\d\d:\d\d:\d\d(?:\.\d{1,6})?\s"
)
_DMESG_TIME = re.compile(  # dmesg, and dmesg -T
    r"^\[(?:\s*\d+\.\d+|[A-Z][a-z]{2} [A-Z][a-z]{2} +\d+ \d\d:\d\d:\d\d \d{4})\]\s"
)
_ANSI_LEAD = r"(?:\x1b\[[0-9;]*m)*"
# docker compose v2 "name-1  | ", v1 "project_name_1  | " (coloured on a terminal).
_COMPOSE = re.compile(f"^{_ANSI_LEAD}[A-Za-z0-9][\\w.-]{{0,62}}[-_]\\d{{1,4}}\\s+\\| ?{_ANSI_LEAD}")
# kubectl logs --prefix: "[pod/NAME/CONTAINER] "
_KUBECTL = re.compile(r"^\[(?:pod|deployment|statefulset|job)/[\w.-]{1,253}/[\w.-]{1,63}\] ")
# After a journal timestamp: "host ident[pid]: " (pid optional; "kernel:" has none).
_HOST_IDENT = re.compile(r"^(\S+) ([^\s\[\]:]{1,64})(?:\[(\d{1,10})\])?: ")
# The engines whose log prefixes the splitter knows (their registry names).
VLLM, SGLANG, TGI = vllm.ENGINE.name, sglang.ENGINE.name, tgi.ENGINE.name
# vLLM's own "(EngineCore_DP0 pid=N) ", and Ray's actor and task prefixes, which vLLM's and
# SGLang's Ray workers print through: "(RayWorkerWrapper pid=N, ip=10.0.0.2) ", "(pid=N) ".
_VLLM_PROCESS = re.compile(
    r"^\((?:(?P<name>[A-Za-z][\w .=-]{0,60}?) )?pid=(?P<pid>\d{1,10})"
    r"(?:, ip=[0-9A-Fa-f.:]{2,45})?\) "
)
_VLLM_HEADER = re.compile(
    r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
    r"(?:\[(?P<file>[^\]\s]{1,200}):(?P<line>\d+)\]|(?P<file0>[\w.]{1,100}):(?P<line0>\d+)\])"
    r"(?: |$)"
)
# torch.distributed prefixes what each rank prints (tracebacks included).
_RANK = re.compile(r"^\[rank(\d+)\]: ?")
_UVICORN = re.compile(r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+")
_SGLANG = re.compile(
    r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?P<proc>(?: (?:DP|PP|TP|EP|CP)\d+)*)\] "
)
_TGI = re.compile(
    r"^\s*(?P<level>TRACE|DEBUG|INFO|WARN|ERROR) (?P<target>(?:[\w-]+(?:\{[^}]*\})?:{1,2})+) "
    r"(?:[\w/.-]+\.rs:\d+: )?"
)
_TGI_LEVELS = ("TRACE", "DEBUG", "INFO", "WARN", "ERROR")
_BULLETS = "●○×↻◌*"
_STATUS_BULLET = re.compile(f"^[{_BULLETS}]\\s")
_BULLET_CHARS = frozenset(_BULLETS)
_LOGGER_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
PID_MAX = 1 << 22  # Linux's PID_MAX_LIMIT: a larger "pid" is no process


def pid_of(value: object) -> int | None:
    """A process id as a line or a journal field states it (ASCII digits, 1..PID_MAX);
    None for anything else."""
    if isinstance(value, str):
        if not (value.isascii() and value.isdigit() and len(value) <= 10):
            return None
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 1 <= value <= PID_MAX else None


@quick_init
@dataclass(frozen=True, slots=True)
class LogLine:
    """A line with what its source knew about it. `number` is its 1-based position in the
    input (for stored events: the event's sequence number)."""

    number: int
    text: str
    time_us: int | None = None
    unit: str | None = None
    host: str | None = None
    invocation_id: str | None = None
    pid: int | None = None
    identifier: str | None = None
    message_id: str | None = None
    transport: str | None = None
    fields: Mapping[str, str] = field(default_factory=lambda: _EMPTY)


@quick_init
@dataclass(frozen=True, slots=True)
class Split:
    """`body` is the message without wrappers; the rest is what the wrappers said."""

    body: str
    engine: str | None = None  # vllm | sglang | tgi | systemd | kernel | None
    process: str | None = None  # vLLM process name (EngineCore_DP0, Worker_TP1) or TP0
    pid: int | None = None  # the writer's pid where the line says it
    level: str | None = None
    logger: str | None = None  # "file.py:123" of vLLM's logger header
    identifier: str | None = None  # the journalctl short identifier (vllm, systemd, kernel)


def clean_text(text: str) -> str:
    """Colour codes removed; of tqdm's `\\r` refreshes only the last one kept."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\r" in text:
        parts = [p for p in text.split("\r") if p.strip()]
        text = parts[-1] if parts else ""
    return text.rstrip()


def without_collector(text: str) -> str:
    """`text` without the prefix `docker compose logs` or `kubectl logs --prefix` put
    before each line (the same string when there is none)."""
    m = _COMPOSE.match(text) if "|" in text[:80] else None
    if m is None and text[:1] == "[":
        m = _KUBECTL.match(text)
    return text[m.end() :] if m else text


def _strip_journal_wrapper(text: str) -> tuple[str, str | None, int | None]:
    """Remove a leading collector's prefix (docker compose, kubectl), a container or journal
    timestamp, and journalctl's `host ident[pid]: `."""
    text = without_collector(text)
    identifier = None
    pid = None
    stripped = False
    # Each pattern is tried only where its first character could begin it (a digit, an
    # uppercase ASCII letter, `[`): most lines begin with none of them matching.
    first = text[:1]
    patterns = (
        (_ISO_PREFIX, _EPOCH_PREFIX)
        if first.isdigit()
        else (_SYSLOG_TIME,)
        if "A" <= first <= "Z"
        else ()
    )
    for pattern in patterns:
        m = pattern.match(text)
        if m:
            text = text[m.end() :]
            stripped = True
            break
    if stripped:
        m = _HOST_IDENT.match(text)
        # Not a journal line when what follows looks like a logger header (docker logs of vLLM).
        if m and not m.group(1).startswith((*_LOGGER_LEVELS, "(")):
            identifier = m.group(2)
            pid = pid_of(m.group(3))
            text = text[m.end() :]
    m = _DMESG_TIME.match(text) if text[:1] == "[" else None
    if m:
        text = text[m.end() :]
        identifier = identifier or "kernel"
    return text, identifier, pid


# What begins a line of its own in any shape (a wrapper, a server's header, a traceback's
# lines, an exception, a llama.cpp function prefix): a terminal's cut-off row does not.
_RECORD_START = re.compile(
    r"\s\s|\t|\[pod/|Traceback \(|During handling|The above exception|NVRM: |"
    r"[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)\b|"
    r"(?:llama|llm|ggml|srv|slot|main|common|print_info|load)\w*: "
)


def starts_a_record(text: str) -> bool:
    """Whether `text` begins the way a log line of some known shape begins; a row that a
    terminal cut from the line before it almost never does."""
    if not text or _RECORD_START.match(text) or _STATUS_BULLET.match(text):
        return True
    head, _, _ = _strip_journal_wrapper(text)
    if head is not text:
        return True
    return bool(
        _VLLM_PROCESS.match(text)
        or _RANK.match(text)
        or _SGLANG.match(text)
        or _VLLM_HEADER.match(text)
        or _UVICORN.match(text)
        or _split_tgi(text)[1]
    )


def split_line(
    text: str, *, journal_identifier: str | None = None, transport: str | None = None
) -> Split:
    """Peel the wrappers off one cleaned line of text."""
    stripped = text.lstrip()
    status_line = _STATUS_BULLET.match(stripped) if stripped[:1] in _BULLET_CHARS else None
    if status_line:  # `systemctl status` header bullet: "● vllm.service - desc"
        return Split(body=stripped[status_line.end() :], engine="systemd", identifier="systemctl")
    body, identifier, outer_pid = _strip_journal_wrapper(stripped)
    if body is stripped and text[:1].isspace():
        body = text  # no wrapper: keep a raw traceback line's indentation
    identifier = identifier or journal_identifier
    if identifier == "kernel" or transport == "kernel":
        return Split(body=body, engine="kernel", identifier="kernel")
    if identifier == "systemd" and (outer_pid in (None, 1)):
        return Split(body=body, engine="systemd", pid=outer_pid, identifier=identifier)
    return _split_server(body, identifier, outer_pid)


def _split_server(body: str, identifier: str | None, outer_pid: int | None) -> Split:
    """Peel a server's own prefixes: torch's rank, vLLM's process and logger header,
    uvicorn's level, SGLang's `[time TP0]` or TGI's tracing header."""
    engine: str | None = None
    process = None
    pid = None
    level = None
    logger = None
    m = _RANK.match(body) if body.startswith("[rank") else None
    if m:
        process = f"rank{m.group(1)}"
        body = body[m.end() :]
    m = _VLLM_PROCESS.match(body) if body[:1] == "(" else None
    if m:
        process, pid = m.group("name"), pid_of(m.group("pid"))
        body = body[m.end() :]
        engine = VLLM if process else None  # Ray's bare "(pid=N)" names no engine
    leveled = body.startswith(_LOGGER_LEVELS)  # what both a logger header and uvicorn begin with
    m = _VLLM_HEADER.match(body) if leveled else None
    if m:
        level, file, line, file0, line0 = m.group("level", "file", "line", "file0", "line0")
        logger = f"{file or file0}:{line or line0}"
        body = body[m.end() :]
        engine = VLLM
    else:
        m = _UVICORN.match(body) if leveled else None
        if m:
            level = m.group("level")
            body = body[m.end() :]
        else:
            m = _SGLANG.match(body) if body[:1] == "[" else None
            if m:
                engine = SGLANG
                process = m.group("proc").strip() or process
                body = body[m.end() :]
            else:
                body, tgi_level = _split_tgi(body)
                if tgi_level is not None:
                    engine, level = TGI, tgi_level
    if pid is None and outer_pid is not None:
        pid = outer_pid
    return Split(
        body=body,
        engine=engine,
        process=process,
        pid=pid,
        level=level,
        logger=logger,
        identifier=identifier,
    )


def _split_tgi(body: str) -> tuple[str, str | None]:
    candidate = body
    m = _ISO_PREFIX.match(candidate) if candidate[:1].isdigit() else None
    if m:
        candidate = candidate[m.end() :]
    m = _TGI.match(candidate) if candidate.lstrip().startswith(_TGI_LEVELS) else None
    if m and (
        "text_generation" in m.group("target")
        or "shard-manager" in m.group("target")
        or "warmup" in m.group("target")
    ):
        return candidate[m.end() :], m.group("level")
    return body, None


def line_from_payload(number: int, payload: Mapping[str, Any], time_us: int | None) -> LogLine:
    """A `log.recorded` payload (stored, or built from a journald entry) as a LogLine."""
    fields = payload.get("fields") or {}
    return LogLine(
        number=number,
        text=payload.get("message") or "",
        time_us=time_us,
        unit=payload.get("unit"),
        host=payload.get("host"),
        invocation_id=payload.get("invocation_id"),
        pid=pid_of(payload.get("pid")),
        identifier=payload.get("identifier"),
        message_id=payload.get("message_id"),
        transport=payload.get("transport"),
        fields=fields,
    )


def lines_from_texts(texts: Iterable[str]) -> list[LogLine]:
    """Plain text lines (the training corpus, tests) as LogLines numbered from 1."""
    return [LogLine(number=n, text=t) for n, t in enumerate(texts, start=1) if t.strip()]
