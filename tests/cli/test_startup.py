"""Start-up stays light: `advisor --help`, and a command's `--help`, import none of the heavy
libraries (the event models' pydantic, the store's SQLAlchemy, DuckDB, rich, the console's
web stack...), read from `python -X importtime`, not timed. The root group's table of
commands (`advisor.cli.main.COMMANDS`) stays true to the commands it stands in for, shell
completion still lists them, and a mistyped name still gets the close ones suggested. The
figures are bench/startup.py's."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from advisor.cli.group import LazyGroup
from advisor.cli.main import COMMANDS, cli
from tests.commands import subcommands
from tests.conftest import advisor_argv, run_advisor

HEAVY = (
    "pydantic",
    "pydantic_core",
    "sqlalchemy",
    "duckdb",
    "sklearn",
    "numpy",
    "scipy",
    "plotly",
    "starlette",
    "uvicorn",
    "jinja2",
    "apprise",
    "prometheus_client",
    "rich",
    "alembic",
    "psycopg",
)
# One line of -X importtime's log: "import time: SELF | CUMULATIVE | <indent>NAME".
_IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \| +(\S+)$", re.MULTILINE)
# The root, every top-level command (a group's commands share its module), a nested one.
HELPS = [(), *((name,) for name in cli.list_commands(click.Context(cli))), ("ingest", "journal")]


def imported(*args: str) -> set[str]:
    """The modules `advisor ARGS` imports, from its `-X importtime` log."""
    python, *rest = advisor_argv(*args)
    done = subprocess.run(
        [python, "-X", "importtime", *rest], capture_output=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return set(_IMPORTED.findall(done.stderr.decode()))


@pytest.mark.parametrize("path", HELPS, ids=lambda p: " ".join(p) or "advisor")
def test_help_imports_no_heavy_library(path: tuple[str, ...]) -> None:
    modules = imported(*path, "--help")
    assert "click" in modules and "advisor.cli.main" in modules  # the log was read
    heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY)
    assert not heavy, f"advisor {' '.join(path)} --help imports {heavy}"


def test_classify_imports_no_heavy_library_but_pydantic(tmp_path: Path) -> None:
    """`classify` validates the rule and catalogue files (pydantic) and nothing more: no
    store, no learning library (the model is JSON weights), no console."""
    log = tmp_path / "vllm.log"
    log.write_text("INFO 12-04 10:00:00 api_server.py:1] vLLM API server version 0.8.0\n")
    modules = imported("classify", str(log))
    assert "advisor.diagnosis.rules" in modules  # the log was read
    heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY)
    assert all(m.split(".")[0] in ("pydantic", "pydantic_core") for m in heavy), heavy


def test_root_help_imports_no_command_module() -> None:
    modules = imported("--help")
    command_modules = {target.partition(":")[0] for target, _ in COMMANDS.values()}
    assert not modules & command_modules, sorted(modules & command_modules)
    assert "advisor.core.events" not in modules


def test_a_command_imports_its_own_module_alone() -> None:
    modules = imported("explain", "--help")
    others = {t.partition(":")[0] for t, _ in COMMANDS.values()} - {"advisor.cli.projections"}
    assert "advisor.cli.projections" in modules
    assert not modules & others, sorted(modules & others)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_table_matches_the_command(name: str) -> None:
    command = subcommands(cli)[name]
    target, summary = COMMANDS[name]
    module, _, attr = target.partition(":")
    assert command.name == name
    assert command.callback is not None and command.callback.__module__ == module
    assert getattr(sys.modules[module], attr) is command
    assert command.help is not None
    first = " ".join(command.help.split("\n\n")[0].split())
    assert summary == first, f"COMMANDS[{name!r}]: copy the first paragraph of its help"


def test_root_help_lists_the_commands_as_loaded_ones_would() -> None:
    eager = {name: c for name, c in cli.commands.items() if name not in COMMANDS}
    every = subcommands(cli)
    for width in (50, 80, 120):
        fresh = LazyGroup(
            "advisor", lazy=COMMANDS, commands=dict(eager), params=cli.params, help=cli.help
        )
        loaded = click.Group("advisor", commands=every, params=cli.params, help=cli.help)
        lazy = CliRunner().invoke(fresh, ["--help"], prog_name="advisor", terminal_width=width)
        assert lazy.output == _help(loaded, width)
        assert fresh.commands.keys() == eager.keys()  # listing them loaded none of them


def _help(group: click.Group, width: int) -> str:
    return CliRunner().invoke(group, ["--help"], prog_name="advisor", terminal_width=width).output


def test_shell_completion_lists_every_command() -> None:
    complete = {"_ADVISOR_COMPLETE": "bash_complete", "COMP_WORDS": "advisor ", "COMP_CWORD": "1"}
    result = run_advisor(env={**os.environ, **complete})
    assert result.returncode == 0, result.stderr
    names = {line.split(",", 1)[1] for line in result.stdout.decode().splitlines()}
    assert names == set(subcommands(cli))


def test_an_unknown_command_gets_the_close_names_as_before() -> None:
    result = CliRunner().invoke(LazyGroup("advisor", lazy=COMMANDS), ["explian"])
    assert result.exit_code == 2
    assert "No such command 'explian'. (Did you mean one of: 'explain', 'replan'?)" in result.stderr
