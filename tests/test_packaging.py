"""The wheel holds what the code needs: every package of the source tree is listed in
pyproject.toml, and every file that is not Python under a package is its package data (a
wheel built without them installs a command that fails on its first start)."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

from tests.import_graph import ROOT

SETUP = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
DIRS: dict[str, str] = {"advisor": "advisor", "ingest": "ingest", **SETUP["package-dir"]}


def _folder(package: str) -> Path:
    """Where `package`'s files are in the source tree (its mapped folder, or its path)."""
    parts = package.split(".")
    for n in range(len(parts), 0, -1):
        head = ".".join(parts[:n])
        if head in DIRS:
            return ROOT / DIRS[head] / Path(*parts[n:])
    return ROOT / Path(*parts)


def test_every_package_of_the_tree_is_listed() -> None:
    listed = set(SETUP["packages"])
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("advisor", "ingest")
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert found - listed == set()
    assert all(_folder(p).joinpath("__init__.py").is_file() for p in listed)


def test_every_data_file_is_package_data() -> None:
    missing = []
    for package in SETUP["packages"]:
        folder = _folder(package)
        globs = SETUP["package-data"].get(package, [])
        for path in folder.rglob("*"):
            rel = path.relative_to(folder)
            if path.is_dir() or path.suffix in (".py", ".pyc") or "__pycache__" in rel.parts:
                continue
            if (folder / rel.parts[0] / "__init__.py").is_file():
                continue  # a subpackage's own file: checked with that package
            if not any(fnmatch.fnmatch(str(rel), g) for g in globs):
                missing.append(f"{package}: {rel}")
    assert missing == []
