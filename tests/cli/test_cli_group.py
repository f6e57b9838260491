"""The CLI's one group class: every command under it, in nested groups too, turns the library's
errors into one `Error: ...` line and the error's exit code — no command does it itself."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
import sqlalchemy
from click.testing import CliRunner

from advisor.cli.group import AdvisorGroup, LazyGroup
from advisor.cli.main import cli
from advisor.core.errors import InputError, IntegrityError, PrerequisiteError
from tests.commands import subcommands


def _broken_store() -> None:
    """A real SQLAlchemy failure: a query on a table that is not there."""
    engine = sqlalchemy.create_engine("sqlite://")
    try:
        with engine.connect() as conn:
            conn.execute(sqlalchemy.text("SELECT * FROM no_such_table"))
    finally:
        engine.dispose()


def _tree() -> click.Group:
    @click.group(cls=AdvisorGroup)
    def top() -> None:
        """The root."""

    @top.group()
    def inner() -> None:
        """A nested group: made an AdvisorGroup too."""

    failures = {
        "input": InputError("bad\x07 input"),
        "integrity": IntegrityError("chain"),
        "missing": PrerequisiteError("no journalctl"),
        "interrupt": KeyboardInterrupt(),
    }

    @inner.command()
    @click.argument("what")
    def fail(what: str) -> None:
        if what == "store":
            _broken_store()
        elif what == "bug":
            raise ValueError("a bug stays a traceback")
        else:
            raise failures[what]

    @top.command()
    def usage() -> None:
        raise click.UsageError("wrong")

    return top


@pytest.mark.parametrize(
    ("what", "code", "line"),
    [
        ("input", 4, "Error: bad\\x07 input\n"),
        ("integrity", 3, "Error: chain\n"),
        ("missing", 2, "Error: no journalctl\n"),
        ("interrupt", 130, "Interrupted.\n"),
    ],
)
def test_nested_commands_get_the_error_mapping(what: str, code: int, line: str) -> None:
    top = _tree()
    assert isinstance(top.commands["inner"], AdvisorGroup)
    result = CliRunner().invoke(top, ["inner", "fail", what])
    assert (result.exit_code, result.stdout, result.stderr) == (code, "", line)


def test_a_store_failure_is_a_store_error() -> None:
    result = CliRunner().invoke(_tree(), ["inner", "fail", "store"])
    assert result.exit_code == 1
    assert result.stderr == "Error: event store: no such table: no_such_table\n"


def test_other_exceptions_and_usage_errors_pass_through() -> None:
    result = CliRunner().invoke(_tree(), ["inner", "fail", "bug"])
    assert isinstance(result.exception, ValueError)
    result = CliRunner().invoke(_tree(), ["usage"])
    assert result.exit_code == 2 and "Error: wrong" in result.stderr and "Usage:" in result.stderr


def test_every_group_of_the_advisor_cli_is_one() -> None:
    def groups(group: click.Group) -> list[click.Group]:
        found = [group]
        for command in subcommands(group).values():
            if isinstance(command, click.Group):
                found += groups(command)
        return found

    names = {g.name: type(g) for g in groups(cli)}
    assert {"cli", "db", "ingest", "rules", "model", "export"} <= set(names)
    assert names.pop("cli") is LazyGroup  # an AdvisorGroup that loads its commands on use
    assert set(names.values()) == {AdvisorGroup}


def test_a_nested_advisor_command_maps_its_error(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("hello\n")
    result = CliRunner().invoke(cli, ["rules", "test", "no.such.rule", str(log)])
    assert result.exit_code == 4
    assert result.stderr == ("Error: no rule with id 'no.such.rule' (see `advisor rules list`)\n")


def test_no_cli_module_handles_errors_itself() -> None:
    root = Path(__file__).resolve().parents[2] / "advisor" / "cli"
    for path in root.glob("*.py"):
        text = path.read_text()
        assert "handle_errors" not in text, path
        assert "sys.exit(" not in text or path.name == "group.py", path
