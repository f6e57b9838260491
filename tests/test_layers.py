"""The layout holds: stages import only the stages below them (import-linter's contracts in
.importlinter), no cycle between stages, small modules and functions, and each package's face
(`__all__`: its public modules, and the names it lends from them) sorted and true."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.import_graph import ROOT, cycles, modules, stage_edges

MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
PACKAGES = sorted(name for name, path in modules().items() if path.name == "__init__.py")


def test_import_linter_contracts_are_kept() -> None:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert exe is not None, "import-linter is a test dependency: pip install -e '.[test]'"
    done = subprocess.run(
        [exe, "--config", str(ROOT / ".importlinter"), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def test_no_cycle_between_stages() -> None:
    assert cycles(stage_edges()) == []


def test_the_cycle_finder_finds_one() -> None:
    edges = stage_edges()
    a, b = next(iter(edges))
    edges[(b, a)] += 1
    assert (min(a, b), max(a, b)) in cycles(edges)


def _library_files() -> list[Path]:
    return sorted(modules().values())


def test_no_library_module_is_over_the_limit() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in _library_files()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_no_function_is_over_the_limit() -> None:
    long = []
    for path in _library_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length})")
    assert long == []


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_has_a_sorted_true_face(package: str) -> None:
    module = importlib.import_module(package)
    names = getattr(module, "__all__", None)
    assert isinstance(names, list) and names, f"{package} has no __all__"
    assert names == sorted(names), f"{package}.__all__ is not sorted"
    for name in names:
        assert hasattr(module, name) or importlib.util.find_spec(f"{package}.{name}"), (
            f"{package}.__all__ names {name!r}, which is neither an attribute nor a module"
        )
    sub = {m.name for m in pkgutil.iter_modules(module.__path__) if not m.name.startswith("_")}
    assert sub <= set(names), f"{package}: modules not on its face: {sorted(sub - set(names))}"
