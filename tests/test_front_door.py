"""The command line goes through one front door: each module of advisor/cli imports, at run
time, only the front door (`advisor.front`), the command line's own helpers (`advisor.cli`)
and the core's value types, errors and settings (`advisor.core`) — nothing else of advisor
or of `ingest`. The one exception is `advisor serve`, which runs the web console (the other
front end, a stage above the front door). Imports under `if TYPE_CHECKING:` are not run:
annotations may name the library's types. And importing the front door loads nothing heavy
(`advisor --help` imports it)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

ALLOWED = ("advisor.front", "advisor.cli", "advisor.core", "advisor.reports.render")
EXCEPTIONS = {"serve.py": ("advisor.console.app",)}  # the web console `advisor serve` runs
FIRST_PARTY = ("advisor", "ingest")
CLI = sorted((ROOT / "advisor" / "cli").glob("*.py"))
CONSOLE = sorted((ROOT / "advisor" / "console").glob("*.py"))
# The console draws with the reports' rendering and charts; what it reads and decides goes
# through the front door. Two values it shares with the library are taken where they live:
# the list's filter (a frozen dataclass of the read side) and the rule choosing a plan's
# headline step (the notices choose it with the same function).
CONSOLE_ALLOWED = ("advisor.front", "advisor.console", "advisor.core", "advisor.reports")
CONSOLE_EXCEPTIONS = {"shape.py": ("advisor.views.read.console", "advisor.execution.subject")}
HEAVY = ("pydantic", "sqlalchemy", "duckdb", "sklearn", "plotly", "starlette", "apprise")


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def run_time_imports(tree: ast.AST) -> list[str]:
    """The modules imported by the code that runs (at import time or in a function), not
    under `if TYPE_CHECKING:`."""
    found: list[str] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            found += run_time_imports(ast.Module(body=node.orelse, type_ignores=[]))
            continue
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
        found += run_time_imports(node)
    return found


def _within(module: str, allowed: tuple[str, ...]) -> bool:
    return any(module == a or module.startswith(a + ".") for a in allowed)


def around_the_front_door(path: Path, allowed: tuple[str, ...]) -> list[str]:
    """The first-party modules `path` imports at run time outside `allowed`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return sorted(
        m
        for m in run_time_imports(tree)
        if m.split(".")[0] in FIRST_PARTY and not _within(m, allowed)
    )


@pytest.mark.parametrize("path", CLI, ids=lambda p: p.name)
def test_a_cli_module_imports_only_the_front_door(path: Path) -> None:
    others = around_the_front_door(path, ALLOWED + EXCEPTIONS.get(path.name, ()))
    assert others == [], f"advisor/cli/{path.name} goes around the front door: {others}"


def test_the_checker_sees_a_lazy_import_and_skips_type_checking() -> None:
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from advisor.store import EventStore\n"
        "def f():\n    from advisor.views.read.reading import read_rows\n"
    )
    assert run_time_imports(tree) == ["typing", "advisor.views.read.reading"]


def test_importing_the_front_door_loads_nothing_heavy() -> None:
    code = "import sys, advisor.front; print('\\n'.join(sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    heavy = sorted(m for m in done.stdout.split() if m.split(".")[0] in HEAVY)
    assert heavy == []


@pytest.mark.parametrize("path", CONSOLE, ids=lambda p: p.name)
def test_a_console_module_reads_and_decides_through_the_front_door(path: Path) -> None:
    others = around_the_front_door(path, CONSOLE_ALLOWED + CONSOLE_EXCEPTIONS.get(path.name, ()))
    assert others == [], f"advisor/console/{path.name} goes around the front door: {others}"
