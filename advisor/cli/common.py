"""Pieces every command shares: store options, JSON output, errors turned into exit codes."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
import orjson

from advisor.core.errors import AdvisorError, StoreError
from advisor.core.render import safe_text
from advisor.core.settings import default_db_url

if TYPE_CHECKING:
    from advisor.store import EventStore

F = TypeVar("F", bound=Callable[..., Any])
COUNT = click.IntRange(min=1, max=2**63 - 1)  # a count that fits the store's BIGINT
DURATION_MAX_S = 10 * 366 * 86_400


def seconds(low: float, high: float = 86_400) -> click.FloatRange:
    """A number of seconds in [low, high]: inf and nan are refused."""
    return click.FloatRange(min=low, max=high)


def db_option(f: F) -> F:
    return click.option("--db", "db_url", envvar="ADVISOR_DB", default=None, metavar="URL",
                        help="Store URL (sqlite:///PATH or postgresql+psycopg://...). "
                             "Default: $ADVISOR_DB, else a SQLite file under "
                             "$XDG_DATA_HOME/advisor/.")(f)


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(f)


def handle_errors(f: F) -> F:
    """Turn the library's errors into one `Error: ...` line and the error's exit code."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return f(*args, **kwargs)
        except AdvisorError as e:
            click.echo(f"Error: {safe_text(str(e))}", err=True)
            sys.exit(e.exit_code)
        except Exception as e:
            # The store failed mid-command (connection lost, disk full). SQLAlchemy is loaded
            # only by commands that use the store, so it is looked up, not imported, here.
            exc = sys.modules.get("sqlalchemy.exc")
            if exc is None or not isinstance(e, exc.SQLAlchemyError):
                raise
            from advisor.store.engine import first_line

            click.echo(f"Error: event store: {safe_text(first_line(e))}", err=True)
            sys.exit(StoreError.exit_code)
        except KeyboardInterrupt:  # what was committed stays; a re-run resumes from there
            click.echo("Interrupted.", err=True)
            sys.exit(130)

    return wrapper  # type: ignore[return-value]


def store_for(db_url: str | None, *, read_only: bool = False,
              shared_schema: bool = False) -> EventStore:
    """Open the store for this command; it is closed when the command ends. `read_only`
    for commands that only read: a store that does not exist is refused, not created, and
    nothing is migrated or written (a store on read-only media can be read).
    `shared_schema`: see `open_store`."""
    from advisor.store import open_store

    store = open_store(db_url or default_db_url(), read_only=read_only,
                       shared_schema=shared_schema)
    return click.get_current_context().with_resource(store)


def emit(text: str, out: Path | None) -> None:
    """Print `text`, or write it to the file `out` and say so."""
    if out is None:
        click.echo(text, nl=False)
        return
    write_file(out, text.encode())
    click.echo(f"wrote {out}")


def write_file(path: Path, data: bytes) -> None:
    """Write `data` to `path` whole or not at all (a temporary file beside it, renamed over
    it); AdvisorError naming the path when it cannot be written."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise AdvisorError(f"--out {path}: cannot write there: "
                           f"{e.strerror or e.__class__.__name__}") from e


def echo_json(obj: Any) -> None:
    click.echo(orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode())


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Daemons stop on SIGTERM the way they stop on Ctrl-C: through KeyboardInterrupt, so
    every `finally` runs and buffered events are committed."""

    def _raise(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def signals_set(stop: threading.Event) -> Iterator[None]:
    """For a loop that checks `stop`: SIGTERM or Ctrl-C sets it, so the work in hand (a file
    half ingested, its report) ends whole before the loop returns. A second signal
    interrupts at once."""

    def _set(_signum: int, _frame: object) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = {sig: signal.signal(sig, _set) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
