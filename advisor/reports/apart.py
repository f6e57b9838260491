"""DuckDB over a SQLite store runs in a process of its own: many processes, one store.

SQLite's locks are POSIX advisory locks, which belong to a process, not to a file descriptor,
and closing any descriptor of a file drops every lock the process holds on it. SQLite keeps
this from hurting its own connections (it defers such closes while another connection of
the same library holds a lock), but DuckDB's sqlite scanner carries its own copy of SQLite,
which knows nothing of the connections Python's sqlite3 (SQLAlchemy) has open. When DuckDB
closed the store in the console's process, the console's connection silently lost its locks;
the next advisor process to close the store believed itself the last one, checkpointed and
deleted the write-ahead log the console was still appending to: the console's next approval
went into a deleted file (lost), and later checkpoints could leave the store malformed.

So DuckDB never opens a SQLite store in a process that holds it, or may later hold it,
through sqlite3: `apart` runs the DuckDB work for a SQLite store in a short-lived child
process (a fresh interpreter, `python -m advisor.reports.apart`: no descriptor or lock
inherited, and unlike multiprocessing's `spawn` it never re-imports the caller's main
module), which opens the store, answers (the work and its answer pickled through pipes; its
stdout and stderr are the caller's) and exits. `connect_store` refuses a SQLite store outside
such a child, and, in it, refuses to attach a store this process still has open. The cost is
a process start (about half a second) per `query`, `stats`, `export parquet` or fleet page;
a snapshot copy would cost the whole store's size each time. PostgreSQL has no such locks:
its work runs where it is asked for, with the same answers.

A store on read-only media (a read-only mount, an evidence copy) cannot be opened by DuckDB's
SQLite, which needs to create the WAL index beside it and takes no `immutable=1` URI: there
the child copies the store (SQLite's backup, from the immutable file) into a private
temporary folder, and DuckDB reads the copy.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar, cast

from advisor.core.errors import StoreError
from advisor.store.engine import parse_url, redact, sqlite_read_uri

P = ParamSpec("P")
T = TypeVar("T")

_apart = False  # True in a child started by `apart` (or a program that declared itself one)


def enter_apart() -> None:
    """Declare this process one that never opens a SQLite store through sqlite3 while DuckDB
    may have it open, nor afterwards (the child `apart` starts; a benchmark)."""
    global _apart
    _apart = True


def is_sqlite(url: str) -> bool:
    return parse_url(url).get_backend_name() == "sqlite"


def apart(url: str, work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`work(*args, **kwargs)`: for a SQLite store at `url` in a child process of its own
    (module docstring), here otherwise. `work` and its arguments and answer are pickled."""
    if _apart or not is_sqlite(url):
        return work(*args, **kwargs)
    done, answer = _run_child(pickle.dumps((work, args, kwargs)))
    if not answer:
        raise StoreError(
            f"DuckDB's process for {redact(url)} ended (exit {done}) without an answer"
        )
    ok, value = pickle.loads(answer)
    if not ok:
        raise cast(BaseException, value)
    return cast(T, value)


def _run_child(request: bytes) -> tuple[int, bytes]:
    """Run `_child` on `request` in a fresh interpreter: its exit status and its answer."""
    root = str(Path(__file__).resolve().parents[2])  # where `advisor` is imported from
    paths = [root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    read_fd, write_fd = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "advisor.reports.apart", str(write_fd)],
            stdin=subprocess.PIPE,
            pass_fds=(write_fd,),
            env=env,
        )
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    try:
        with open(read_fd, "rb") as answers:
            assert proc.stdin is not None
            with proc.stdin:
                proc.stdin.write(request)
            answer = answers.read()
        return proc.wait(), answer
    finally:
        if proc.poll() is None:  # interrupted: the child goes too
            proc.kill()
            proc.wait()


def _child(answer_fd: int) -> None:
    """The child's side: the work from stdin, run here, and its answer (or the exception it
    raised) written to `answer_fd`."""
    enter_apart()
    work, args, kwargs = pickle.loads(sys.stdin.buffer.read())
    answer: tuple[bool, Any]
    try:
        answer = (True, work(*args, **kwargs))
    except Exception as e:
        answer = (False, e)
    try:
        data = pickle.dumps(answer)
    except Exception as e:  # an exception that does not pickle: its text does
        data = pickle.dumps((False, StoreError(f"{type(e).__name__}: {answer[1]}")))
    with open(answer_fd, "wb") as out:
        out.write(data)


def duckdb_source(url: str, resources: contextlib.ExitStack) -> tuple[str, str]:
    """The file DuckDB attaches for the SQLite store at `url`, and how it is read: the store
    itself, or on read-only media a private copy (removed when `resources` close)."""
    if not _apart:
        raise StoreError(
            f"{redact(url)}: DuckDB reads a SQLite store only in a process of its own "
            "(advisor.reports.apart)"
        )
    parsed = parse_url(url)
    uri = sqlite_read_uri(parsed)
    path = Path(parsed.database or "").expanduser().resolve()
    if _holds(path):
        raise StoreError(
            f"{redact(url)}: this process still has the store open through sqlite3; "
            "DuckDB's own SQLite would drop its locks"
        )
    if not uri.endswith("immutable=1"):
        return str(path), "sqlite scanner"
    folder = resources.enter_context(tempfile.TemporaryDirectory(prefix="advisor-snapshot-"))
    copy = Path(folder) / path.name
    try:
        source = sqlite3.connect(uri, uri=True)
        try:
            target = sqlite3.connect(copy)
            try:
                source.backup(target)
            finally:
                target.close()
        finally:
            source.close()
    except sqlite3.Error as e:
        raise StoreError(f"{redact(url)}: cannot copy the store from read-only media: {e}") from e
    return str(copy), "sqlite scanner, over a private copy (the store is on read-only media)"


def _holds(path: Path) -> bool:
    """Whether this process has `path` (or its -wal or -shm file) open (Linux: /proc)."""
    names = {str(path), f"{path}-wal", f"{path}-shm"}
    fds = Path("/proc/self/fd")
    if not fds.is_dir():
        return False
    for fd in os.listdir(fds):
        with contextlib.suppress(OSError):
            if os.readlink(fds / fd) in names:
                return True
    return False


if __name__ == "__main__":  # `python -m`: run as the module the work imports, not a copy
    import signal

    from advisor.reports import apart as _module

    # Ctrl-C reaches the whole process group: the caller answers it (and ends this child),
    # so the child keeps quiet instead of printing a traceback of its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _module._child(int(sys.argv[1]))
