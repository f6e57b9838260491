"""The click group every `advisor` group is made of: it turns the library's errors into one
`Error: ...` line (ids in it written short, as everywhere a person reads; any command that
takes an id takes the short one) and the error's exit code, for each command under it.
`LazyGroup`, the root, also imports a command's module only when that command is run (or
asked for its help)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, NamedTuple, NoReturn

import click

from advisor.core.errors import AdvisorError, StoreError
from advisor.core.ids import shorten_ids
from advisor.reports.render import safe_text

INTERRUPTED_EXIT = 130


def _fail(message: str, code: int) -> NoReturn:
    click.echo(message, err=True)
    sys.exit(code)


class AdvisorGroup(click.Group):
    """A group whose commands, and the commands of the groups made under it, exit with the
    library's exit codes: an AdvisorError its own, a store failure (SQLAlchemy) a
    StoreError's, Ctrl-C 130, at a prompt too (what was committed stays; a re-run resumes
    from there)."""

    group_class = type  # `@group.group()` makes an AdvisorGroup too

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except AdvisorError as e:
            _fail(f"Error: {safe_text(shorten_ids(str(e)))}", e.exit_code)
        except click.exceptions.Abort:
            # click turns Ctrl-C (and end of input) at a prompt into Abort ("Aborted!", exit 1)
            _fail("Interrupted.", INTERRUPTED_EXIT)
        except Exception as e:
            # The store failed mid-command (connection lost, disk full). SQLAlchemy is loaded
            # only by commands that use the store, so it is looked up, not imported, here.
            exc = sys.modules.get("sqlalchemy.exc")
            if exc is None or not isinstance(e, exc.SQLAlchemyError):
                raise
            from advisor.front import store_failure

            _fail(
                f"Error: event store: {safe_text(shorten_ids(store_failure(e)))}",
                StoreError.exit_code,
            )
        except KeyboardInterrupt:
            _fail("Interrupted.", INTERRUPTED_EXIT)


class Lazy(NamedTuple):
    """A command not imported yet: where it is ("advisor.cli.actions:approve") and the first
    paragraph of its help, which is all that the group's own --help shows of it."""

    target: str
    summary: str


class LazyGroup(AdvisorGroup):
    """An AdvisorGroup whose commands in `lazy` are imported on first use: `advisor --help`
    lists them from their summaries, and `advisor CMD` imports CMD's module alone
    (click's "Lazily Loading Subcommands"). A command once loaded is in `commands`."""

    def __init__(self, *args: Any, lazy: Mapping[str, Lazy] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            self.add_command(_load(self.lazy[cmd_name].target), cmd_name)
        return super().get_command(ctx, cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] not in self.commands and args[0] not in self.lazy:
            # No such command: click suggests the close names among `commands`, so all of them.
            for name in self.lazy:
                self.get_command(ctx, name)
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list, as click writes it, with each command not loaded yet stood in
        for by a bare command carrying its summary (click shortens it the same way)."""
        shown = {name: self._listed(name) for name in self.list_commands(ctx)}
        click.Group(commands=shown).format_commands(ctx, formatter)

    def _listed(self, name: str) -> click.Command:
        if name in self.commands:
            return self.commands[name]
        return click.Command(name, help=self.lazy[name].summary)


def _load(target: str) -> click.Command:
    module, _, attr = target.partition(":")
    # __import__, not importlib.import_module: `python -X importtime` logs only what comes
    # through the import statement's machinery, and the command's module belongs in its log.
    command = getattr(__import__(module, fromlist=[attr]), attr)
    if not isinstance(command, click.Command):
        raise TypeError(f"{target} is not a click command")
    return command
