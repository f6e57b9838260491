"""Each package's public face, read from the code: which of its modules the rest of the
library imports, which names a module defines, and where each imported name comes from.

A package's `__all__` names its public modules (those another package imports) and the names
it lends; every other module is private to its package. A leaf module's `__all__` names only
what it defines: a name is importable from the one module that made it.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.import_graph import ROOT, imports_of, modules


def _walk_top(body: list[ast.stmt]) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for node in body:
        out.append(node)
        if isinstance(node, ast.If):
            out += _walk_top(node.body) + _walk_top(node.orelse)
        elif isinstance(node, ast.Try):
            out += _walk_top(node.body)
            for handler in node.handlers:
                out += _walk_top(handler.body)
    return out


def defined_names(tree: ast.Module) -> set[str]:
    """The names a module makes at its top level (not the ones it imports)."""
    names: set[str] = set()
    for node in _walk_top(tree.body):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def imported_names(tree: ast.Module) -> dict[str, tuple[str, str]]:
    """Top-level `from m import n [as a]`: a → (m, n)."""
    return {
        alias.asname or alias.name: (node.module, alias.name)
        for node in _walk_top(tree.body)
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
        for alias in node.names
    }


def face(tree: ast.Module) -> list[str] | None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            return list(value)
    return None


class Library:
    """The library's modules, parsed once."""

    def __init__(self, root: Path = ROOT) -> None:
        self.paths = modules(root)
        self.trees = {m: ast.parse(p.read_text(encoding="utf-8")) for m, p in self.paths.items()}

    def is_package(self, module: str) -> bool:
        return self.paths[module].name == "__init__.py"

    def origin(self, module: str, name: str) -> str:
        """The module that makes `name`, following re-imports from `module`."""
        seen = 0
        while module in self.trees and seen < 20:
            if name in defined_names(self.trees[module]) or self.is_package(module):
                return module
            source = imported_names(self.trees[module]).get(name)
            if source is None or source[0] not in self.trees:
                return module
            module, name = source
            seen += 1
        return module

    def lent(self, module: str) -> list[str]:
        """The names a leaf module's `__all__` lends without having made them."""
        names = face(self.trees[module]) or []
        made = defined_names(self.trees[module])
        return [n for n in names if n not in made and f"{module}.{n}" not in self.paths]

    def borrowed(self, path: Path) -> list[str]:
        """Each `from M import n` in `path` where leaf module M did not make n, as
        `line n M → the module that made it`."""
        out = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and node.module in self.trees):
                continue
            if node.level or self.is_package(node.module):
                continue
            for alias in node.names:
                if f"{node.module}.{alias.name}" in self.paths:
                    continue
                made_in = self.origin(node.module, alias.name)
                if made_in != node.module:
                    out.append(f"{node.lineno} {alias.name} {node.module} → {made_in}")
        return out

    def submodules(self, package: str) -> set[str]:
        prefix = package + "."
        return {
            m[len(prefix) :]
            for m in self.paths
            if m.startswith(prefix)
            and "." not in m[len(prefix) :]
            and not m.rsplit(".", 1)[1].startswith("_")
        }

    def imported_from_outside(self, package: str) -> set[str]:
        """The modules of `package` that a library module outside it imports."""
        prefix = package + "."
        mods = self.submodules(package)
        used: set[str] = set()
        for importer, path in self.paths.items():
            if importer == package or importer.startswith(prefix):
                continue
            for target in imports_of(path, self.paths):
                head = target.removeprefix(prefix).split(".")[0]
                if target.startswith(prefix) and head in mods:
                    used.add(head)
        return used
