"""The click group every `advisor` group is made of: it turns the library's errors into one
`Error: ...` line and the error's exit code, for each command under it."""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import click

from advisor.core.errors import AdvisorError, StoreError
from advisor.core.render import safe_text

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
            _fail(f"Error: {safe_text(str(e))}", e.exit_code)
        except click.exceptions.Abort:
            # click turns Ctrl-C (and end of input) at a prompt into Abort ("Aborted!", exit 1)
            _fail("Interrupted.", INTERRUPTED_EXIT)
        except Exception as e:
            # The store failed mid-command (connection lost, disk full). SQLAlchemy is loaded
            # only by commands that use the store, so it is looked up, not imported, here.
            exc = sys.modules.get("sqlalchemy.exc")
            if exc is None or not isinstance(e, exc.SQLAlchemyError):
                raise
            from advisor.store.engine import first_line

            _fail(f"Error: event store: {safe_text(first_line(e))}", StoreError.exit_code)
        except KeyboardInterrupt:
            _fail("Interrupted.", INTERRUPTED_EXIT)
