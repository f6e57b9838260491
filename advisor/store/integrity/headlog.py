"""Where a host's signed chain heads are kept, and read back from.

After the batches a writing command (`advisor ingest`, `advisor watch`) commits, a
`HeadWriter` signs the store's head — (host, last seq, its hash, time, store) — with the
host key and writes it twice:

* to the journal, through journald's native protocol (a datagram to
  /run/systemd/journal/socket: `SYSLOG_IDENTIFIER=advisor-heads`, `ADVISOR_HEAD=<json>`,
  `ADVISOR_STORE=<store>`), where Forward Secure Sealing seals it when enabled; silently
  skipped where no journald listens;
* to the heads file beside the key (one JSON object a line, appended), so that heads exist
  without journald as well.

The key lives outside the store, one per store (`advisor.store.integrity.keyplace`: the key
given, else the store's own under /etc/advisor/keys or `$XDG_CONFIG_HOME/advisor/keys`, else,
for a store signed before keys were per store, the machine's shared `host-key`); a writing
command creates it (mode 0600) on first use, a reading command never does. Heads are coalesced:
one at most every `HEAD_INTERVAL_S`, the latest batch's always written within that time and
when the command ends, so a head covers every committed batch without one journal entry per
batch of a daemon that commits every second.
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

import orjson
from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError

from advisor.core.errors import AdvisorError, InputError, PrerequisiteError
from advisor.store.engine import first_line, parse_url, redact
from advisor.store.integrity.heads import HostKey, SignedHead
from advisor.store.schema import events

if TYPE_CHECKING:
    from advisor.store.store import EventStore
    from advisor.store.types import AppendResult

KEY_ENV: Final = "ADVISOR_KEY"
JOURNAL_SOCKET: Final = Path("/run/systemd/journal/socket")
IDENTIFIER: Final = "advisor-heads"
HEAD_FIELD: Final = "ADVISOR_HEAD"
STORE_FIELD: Final = "ADVISOR_STORE"
HEAD_INTERVAL_S: Final = 10.0
MAX_HEAD_LINE: Final = 4096  # a heads-file line longer than this is not a head


def default_key_path(environ: Mapping[str, str] | None = None) -> Path:
    """$ADVISOR_KEY, else the machine's shared key (the one every store was signed with
    before keys were per store: `keyplace`)."""
    env = os.environ if environ is None else environ
    if env.get(KEY_ENV):
        return Path(env[KEY_ENV]).expanduser()
    if os.geteuid() == 0:
        return Path("/etc/advisor/host-key")
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME", "~")) / ".config")
    return Path(base).expanduser() / "advisor" / "host-key"


def heads_file_for(key_path: Path) -> Path:
    """The heads file beside a key: KEY.heads."""
    return key_path.with_name(key_path.name + ".heads")


def store_label(url: str) -> str | None:
    """What a head names its store by: a SQLite store's absolute path, a PostgreSQL store's
    URL without its password; None for an in-memory store (nothing to keep heads for)."""
    parsed = parse_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if database in ("", ":memory:"):
            return None
        return f"sqlite:///{Path(database).expanduser().resolve()}"
    return redact(parsed)


# ---------------------------------------------------------------------------------- the key


def load_key(path: Path) -> HostKey | None:
    """The host key at `path`; None when there is none."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise PrerequisiteError(
            f"host key {path}: cannot read it ({e.strerror or e.__class__.__name__})"
        ) from e
    try:
        return HostKey.from_pem(data)
    except ValueError as e:
        raise InputError(f"host key {path}: not an Ed25519 private key in PEM form") from e


def load_or_create_key(path: Path) -> HostKey:
    """The host key at `path`, created (mode 0600, its folder 0700) when there is none."""
    key = load_key(path)
    if key is not None:
        return key
    new = HostKey.generate()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, new.to_pem())
            os.fsync(fd)
        finally:
            os.close(fd)
        with contextlib.suppress(FileExistsError):  # another process's key came first
            os.link(tmp, path)  # whole or not at all, and never over another key
    except OSError as e:
        raise PrerequisiteError(
            f"host key {path}: cannot create it "
            f"({e.strerror or e.__class__.__name__}); set {KEY_ENV} to a "
            "path this user can write"
        ) from e
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    key = load_key(path)
    if key is None:
        raise PrerequisiteError(f"host key {path}: vanished right after it was created")
    return key


# ---------------------------------------------------------------------------------- writing


def journal_message(head: SignedHead) -> dict[str, str]:
    return {
        "MESSAGE": f"advisor chain head seq {head.seq} of {head.store}",
        "PRIORITY": "6",
        "SYSLOG_IDENTIFIER": IDENTIFIER,
        HEAD_FIELD: orjson.dumps(head.as_json()).decode(),
        STORE_FIELD: head.store,
        "ADVISOR_SEQ": str(head.seq),
    }


def encode_native(fields: Mapping[str, str]) -> bytes:
    """journald's native protocol: `NAME=value\\n`, or for a value with a newline
    `NAME\\n` + its length (64-bit little-endian) + the value + `\\n`."""
    out = bytearray()
    for name, value in fields.items():
        raw = value.encode()
        if b"\n" in raw:
            out += name.encode() + b"\n" + len(raw).to_bytes(8, "little") + raw + b"\n"
        else:
            out += name.encode() + b"=" + raw + b"\n"
    return bytes(out)


class JournalSink:
    """Datagrams to journald; False (and nothing else) where none listens."""

    def __init__(self, path: Path = JOURNAL_SOCKET) -> None:
        self.path = path
        self._sock: socket.socket | None = None

    def send(self, fields: Mapping[str, str]) -> bool:
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self._sock.sendto(encode_native(fields), str(self.path))
        except OSError:
            return False
        return True

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def append_head(path: Path, head: SignedHead) -> None:
    """One line appended to the heads file (one write, O_APPEND: concurrent writers' lines
    do not interleave)."""
    line = orjson.dumps(head.as_json()) + b"\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


class HeadWriter:
    """Signs and writes the store's head after the batches it commits (`EventStore.on_append`),
    at most one head every `interval_s`: a batch within that time of the last head is
    covered by a head when the time is up (a timer), or by `close()`."""

    def __init__(
        self,
        store: EventStore,
        key: HostKey,
        *,
        host: str,
        label: str,
        heads_file: Path,
        journal: JournalSink | None = None,
        interval_s: float = HEAD_INTERVAL_S,
        on_error: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store, self.key, self.host, self.label = store, key, host, label
        self.heads_file = heads_file
        self.journal = journal if journal is not None else JournalSink()
        self.interval_s = interval_s
        self.on_error = on_error
        self.clock = clock
        self.written: list[SignedHead] = []
        self.journal_sent = 0
        self._lock = threading.Lock()
        self._signed = 0  # the seq of the latest head written
        self._pending = 0  # the highest seq committed
        self._last_write = -math.inf
        self._timer: threading.Timer | None = None
        self._closed = False
        store.on_append(self.observe)

    def observe(self, result: AppendResult) -> None:
        if result.last_seq is None:
            return
        with self._lock:
            if self._closed:
                return
            self._pending = max(self._pending, result.last_seq)
            if self._pending <= self._signed:
                return
            wait = self._last_write + self.interval_s - self.clock()
            if wait <= 0:
                self._write()
            elif self._timer is None:
                self._timer = threading.Timer(wait, self._when_due)
                self._timer.daemon = True
                self._timer.start()

    def _when_due(self) -> None:
        with self._lock:
            self._timer = None
            if not self._closed and self._pending > self._signed:
                self._write()

    def close(self) -> None:
        """Write the head of what is not covered yet; then write no more."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if not self._closed and self._pending > self._signed:
                self._write()
            self._closed = True
        self.journal.close()

    def _write(self) -> None:
        seq = self._pending
        try:
            with self.store.connect() as conn:
                stored = conn.execute(select(events.c.hash).where(events.c.seq == seq)).scalar()
        except SQLAlchemyError as e:
            self._error(f"no head signed at seq {seq}: cannot read its hash: {first_line(e)}")
            return
        if not isinstance(stored, bytes | bytearray | memoryview):
            self._error(f"no head signed at seq {seq}: the store has no event there")
            return
        head = self.key.sign(self.host, seq, bytes(stored), time.time_ns() // 1000, self.label)
        self._signed, self._last_write = seq, self.clock()
        self.written.append(head)
        try:
            append_head(self.heads_file, head)
        except OSError as e:
            self._error(
                f"heads file {self.heads_file}: cannot append to it "
                f"({e.strerror or e.__class__.__name__})"
            )
        if self.journal.send(journal_message(head)):
            self.journal_sent += 1

    def _error(self, message: str) -> None:
        if self.on_error is not None:
            self.on_error(message)


# ---------------------------------------------------------------------------------- reading


@dataclass
class HeadsRead:
    """Heads read for one store: those signed for it, deduplicated, and where they came from."""

    label: str
    heads: list[SignedHead] = field(default_factory=list)
    sources: dict[str, int] = field(default_factory=dict)  # where → heads for this store
    unreadable: int = 0  # lines or entries that are not heads
    notes: list[str] = field(default_factory=list)

    def add(self, where: str, heads: Iterable[SignedHead]) -> None:
        seen = {(h.seq, h.hash, h.signature) for h in self.heads}
        count = 0
        for head in heads:
            if head.store != self.label:
                continue
            count += 1
            if (head.seq, head.hash, head.signature) not in seen:
                seen.add((head.seq, head.hash, head.signature))
                self.heads.append(head)
        self.sources[where] = self.sources.get(where, 0) + count


def _parse(raw: bytes) -> SignedHead | None:
    if len(raw) > MAX_HEAD_LINE:
        return None
    try:
        obj = orjson.loads(raw)
        return SignedHead.from_json(obj) if isinstance(obj, dict) else None
    except (ValueError, KeyError, TypeError):
        return None


def read_heads_file(path: Path, into: HeadsRead) -> None:
    try:
        with open(path, "rb") as f:
            lines = [line for line in f if line.strip()]
    except FileNotFoundError:
        into.notes.append(f"no heads file at {path}")
        return
    except OSError as e:
        raise InputError(
            f"--heads-file {path}: cannot read it ({e.strerror or e.__class__.__name__})"
        ) from e
    parsed = [_parse(line) for line in lines]
    into.unreadable += sum(1 for h in parsed if h is None)
    into.add(f"file {path}", (h for h in parsed if h is not None))


def journal_argv(journalctl: str, files: Sequence[Path], label: str) -> list[str]:
    argv = [journalctl, "--output=export", "--all", "--no-pager", "--quiet"]
    argv += [f"--file={path}" for path in files]
    argv.append(f"SYSLOG_IDENTIFIER={IDENTIFIER}")
    if label.isprintable():
        argv.append(f"{STORE_FIELD}={label}")
    return argv


def read_journal(files: Sequence[Path], into: HeadsRead) -> None:
    """Heads from the journal: these .journal files, or (none given) the system journal —
    which, where it cannot be read, is noted rather than refused."""
    from advisor.core.journalctl import export_entries, journalctl_path, spawn

    for path in files:
        if not path.is_file():
            raise InputError(f"--heads-journal-file {path}: no such file")
    where = "journal " + (", ".join(str(f) for f in files) if files else "(system)")
    try:
        argv = journal_argv(journalctl_path(), files, into.label)
        heads: list[SignedHead] = []
        with spawn(argv) as stream:
            for entry in export_entries(stream):
                values = entry.get(HEAD_FIELD)
                for raw in values if isinstance(values, list) else [values or b""]:
                    head = _parse(raw)
                    if head is None:
                        into.unreadable += 1
                    else:
                        heads.append(head)
    except AdvisorError as e:
        if files:
            raise
        into.notes.append(f"system journal not read: {e}")
        return
    into.add(where, heads)
