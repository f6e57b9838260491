"""The command tree as the tests walk it: through click's `list_commands` / `get_command`, as
click itself does, because the root group loads its commands only when asked
(`advisor.cli.group.LazyGroup`): its `commands` holds only those loaded so far."""

from __future__ import annotations

import click


def subcommands(group: click.Group) -> dict[str, click.Command]:
    """`group`'s commands by name, each loaded."""
    ctx = click.Context(group)
    found = {name: group.get_command(ctx, name) for name in group.list_commands(ctx)}
    return {name: command for name, command in found.items() if command is not None}
