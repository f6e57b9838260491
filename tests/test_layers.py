"""The layout holds: stages import only the stages below them (import-linter's contracts in
.importlinter), no cycle between stages, small functions, modules split by idea (a long one is
asked whether it is two), and a small public API: each package's face (`__all__`: the modules
other packages import, and the names it lends) sorted, short and true, every other module
private to its package, and every name imported from the one module that made it."""

from __future__ import annotations

import ast
import importlib
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from tests.import_graph import ROOT, cycles, modules, stage_edges
from tests.public_api import Library

MAX_MODULE_LINES = 400  # past this, a warning: is this two ideas?
HARD_MODULE_LINES = 600
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


def test_a_long_module_is_asked_whether_it_is_two_ideas() -> None:
    """Modules are split by idea, not by line count: past MAX_MODULE_LINES a module gets a
    warning asking whether it holds two ideas; past HARD_MODULE_LINES it fails."""
    sizes = {
        str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines())
        for p in _library_files()
    }
    for path, n in sizes.items():
        if n > MAX_MODULE_LINES:
            warnings.warn(f"{path} has {n} lines: is this two ideas?", stacklevel=1)
    assert {p: n for p, n in sizes.items() if n > HARD_MODULE_LINES} == {}


def test_no_function_is_over_the_limit() -> None:
    long = []
    for path in _library_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length})")
    assert long == []


LIBRARY = Library()


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_has_a_short_sorted_true_face(package: str) -> None:
    """A package's `__all__` names the modules other packages import and the names it lends,
    sorted; its other modules are private to it (tests may still import them)."""
    module = importlib.import_module(package)
    names = getattr(module, "__all__", None)
    assert isinstance(names, list) and names, f"{package} has no __all__"
    assert names == sorted(names), f"{package}.__all__ is not sorted"
    for name in names:
        assert hasattr(module, name) or importlib.util.find_spec(f"{package}.{name}"), (
            f"{package}.__all__ names {name!r}, which is neither an attribute nor a module"
        )
    sub = LIBRARY.submodules(package)
    public = LIBRARY.imported_from_outside(package)
    assert public - set(names) == set(), f"{package}: imported from outside, not on its face"
    assert (set(names) & sub) - public == set(), f"{package}: on its face, imported by none"


@pytest.mark.parametrize("module", [m for m in sorted(LIBRARY.paths) if not LIBRARY.is_package(m)])
def test_a_module_lends_no_name_it_did_not_make(module: str) -> None:
    assert LIBRARY.lent(module) == []


def test_every_name_is_imported_from_the_module_that_made_it() -> None:
    files = [
        p for d in ("advisor", "ingest", "tests", "bench", "data") for p in (ROOT / d).rglob("*.py")
    ]
    borrowed = {
        str(p.relative_to(ROOT)): found for p in sorted(files) if (found := LIBRARY.borrowed(p))
    }
    assert borrowed == {}


def test_the_face_checks_can_fail(tmp_path: Path) -> None:
    (tmp_path / "advisor" / "core").mkdir(parents=True)
    (tmp_path / "ingest").mkdir()
    for init in ("advisor", "advisor/core", "ingest"):
        (tmp_path / init / "__init__.py").write_text('__all__ = ["core"]\n')
    (tmp_path / "advisor" / "core" / "a.py").write_text('X = 1\n__all__ = ["X"]\n')
    (tmp_path / "advisor" / "core" / "b.py").write_text(
        'from advisor.core.a import X\n__all__ = ["X"]\n'
    )
    (tmp_path / "ingest" / "c.py").write_text("from advisor.core.b import X\n")
    lib = Library(tmp_path)
    assert lib.lent("advisor.core.b") == ["X"]
    assert lib.borrowed(tmp_path / "ingest" / "c.py") == ["1 X advisor.core.b → advisor.core.a"]
    assert lib.imported_from_outside("advisor.core") == {"b"}
