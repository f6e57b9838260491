"""Every command's `--help` shows how to call it: an "Examples:" block whose lines run that
command (the whole group walked, so a new command without one fails here)."""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from advisor.cli.main import cli
from tests.commands import subcommands


def _commands(command: click.Command, path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    yield path
    if isinstance(command, click.Group):
        for name, sub in subcommands(command).items():
            yield from _commands(sub, (*path, name))


COMMANDS = list(_commands(cli, ()))


def test_the_walk_finds_every_command() -> None:
    assert len(COMMANDS) > 35 and ("ingest", "journal") in COMMANDS and () in COMMANDS


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "advisor")
def test_help_shows_an_example_of_the_command(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(cli, [*path, "--help"], prog_name="advisor")
    assert result.exit_code == 0, result.output
    _, marker, after = result.output.partition("\n  Examples:\n")
    assert marker, f"advisor {' '.join(path)} --help has no Examples: block"
    examples = [line.strip() for line in after.split("\n\n")[0].splitlines()]
    assert examples and all("advisor" in line for line in examples), examples
    name = " ".join(("advisor", *path))
    assert any(name in line for line in examples), (name, examples)
