"""Pieces every command shares: the settings, store options, JSON output, files written."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
import orjson

from advisor.core.errors import AdvisorError

if TYPE_CHECKING:
    from advisor.core.settings import Settings
    from advisor.front import Advisor
    from advisor.store import EventStore

F = TypeVar("F", bound=Callable[..., Any])
COUNT = click.IntRange(min=1, max=2**63 - 1)  # a count that fits the store's BIGINT
DURATION_MAX_S = 10 * 366 * 86_400


def seconds(low: float, high: float = 86_400) -> click.FloatRange:
    """A number of seconds in [low, high]: inf and nan are refused."""
    return click.FloatRange(min=low, max=high)


def db_option(f: F) -> F:
    return click.option(
        "--db",
        "db_url",
        default=None,
        metavar="URL",
        help="Store URL (sqlite:///PATH or postgresql+psycopg://...). "
        "Default: $ADVISOR_DB, else a SQLite file under "
        "$XDG_DATA_HOME/advisor/.",
    )(f)


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(f)


def settings(**flags: Any) -> Settings:
    """The settings for this command: the defaults, the settings file, the ADVISOR_*
    environment, then the flags given here (a None flag: not given on the command line)."""
    from advisor.core.settings import load_settings

    return load_settings(**flags)


def advisor_for(
    db_url: str | None,
    *,
    read_only: bool = False,
    shared_schema: bool = False,
    **flags: Any,
) -> Advisor:
    """The front door for this command: its settings (`settings(db=db_url, **flags)`) and
    the store they name, opened when an operation first needs it and closed when the
    command ends. `read_only` for commands that only read: a store that does not exist is
    refused, not created, and nothing is migrated or written (a store on read-only media can
    be read). `shared_schema`: see `advisor.store.open_store`."""
    from advisor.front import Advisor, open_store

    conf = settings(db=db_url, **flags)
    ctx = click.get_current_context()

    def opened() -> EventStore:
        store = open_store(conf.db_url, read_only=read_only, shared_schema=shared_schema)
        return ctx.with_resource(store)

    return Advisor(opened, conf)


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
        raise AdvisorError(
            f"--out {path}: cannot write there: {e.strerror or e.__class__.__name__}"
        ) from e


def echo_json(obj: Any) -> None:
    click.echo(orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode())


backend_option = click.option(
    "--backend",
    type=click.Choice(["systemd", "dry-run"]),
    default="systemd",
    show_default=True,
    help="Where actions take effect; dry-run: say what would be done, change and record "
    "nothing (the plan stays to be approved and run).",
)
root_option = click.option(
    "--systemd-root",
    type=click.Path(path_type=Path),
    default=Path("/etc/systemd/system"),
    show_default=True,
    help="Folder for the unit drop-ins advisor writes.",
)
incident_option = click.option(
    "--incident",
    "incident_id",
    help="This incident instead of the latest (its id, or a prefix of it or of its short id).",
)
gpus_option = click.option(
    "--gpus-from",
    "gpus_from",
    type=click.Path(path_type=Path),
    default=None,
    metavar="FILE",
    help="Read GPU memory from this NVML twin file (a simulated node's driver) instead of "
    "NVML. Env: ADVISOR_GPU_TWIN.",
)


def with_short(key: str, whole: str) -> dict[str, str]:
    """An id as `--json` gives it: `{key: the whole id, "short_id": its short id}`."""
    from advisor.core.ids import short_id

    return {key: whole, "short_id": short_id(whole)}


def answer(as_json: bool, result: dict[str, Any], words: str) -> None:
    """What a command that changed something answers: `result`, its one JSON object, with
    `--json`; else `words`, for a person."""
    if as_json:
        echo_json(result)
    else:
        click.echo(words)


def say_for(as_json: bool) -> Callable[[str], None]:
    """How a command says things to a person: stdout, or stderr under `--json` (where
    stdout holds the one JSON object and nothing else)."""

    def say(text: str) -> None:
        click.echo(text, err=as_json)

    return say
