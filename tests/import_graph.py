"""The import graph between the stages of advisor, read from the code's own imports.

    python tests/import_graph.py            # stage -> stage (number of import statements)
    python tests/import_graph.py --depth 3  # module level

Every `import` and `from … import` in advisor/ and ingest/ is counted, the ones inside
functions too (a lazy import is still a dependency). A name imported from a package that is a
module of it (`from advisor.store import migrate`) counts as an import of that module.
"""

from __future__ import annotations

import argparse
import ast
import collections
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("advisor", "ingest")


def modules(root: Path = ROOT) -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            name = ".".join(path.relative_to(root).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def imports_of(path: Path, known: dict[str, Path]) -> list[str]:
    """The modules of `known` that `path` imports."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        out += [t for t in targets if t in known]
    return out


def node_of(module: str, depth: int) -> str:
    """The graph node a module belongs to: `ingest` is one stage; advisor's are its
    sub-packages (or, in a flat layout, its modules)."""
    parts = module.split(".")
    return ".".join(parts[: depth - 1 if parts[0] == "ingest" else depth])


def stage_edges(depth: int = 2, root: Path = ROOT) -> collections.Counter[tuple[str, str]]:
    known = modules(root)
    edges: collections.Counter[tuple[str, str]] = collections.Counter()
    for name, path in known.items():
        for target in imports_of(path, known):
            a, b = node_of(name, depth), node_of(target, depth)
            if a != b:
                edges[(a, b)] += 1
    return edges


def cycles(edges: collections.Counter[tuple[str, str]]) -> list[tuple[str, str]]:
    """Pairs of stages that import each other, directly or through other stages."""
    reach: dict[str, set[str]] = collections.defaultdict(set)
    for a, b in edges:
        reach[a].add(b)
    changed = True
    while changed:
        changed = False
        for a in list(reach):
            more = set().union(*(reach.get(b, set()) for b in reach[a])) - reach[a]
            if more:
                reach[a] |= more
                changed = True
    return sorted((a, b) for a in reach for b in reach[a] if a < b and a in reach.get(b, ()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, default=2, help="module name parts per node")
    parser.add_argument("--root", type=Path, default=ROOT, help="a checkout to read")
    args = parser.parse_args()
    edges = stage_edges(args.depth, args.root)
    for (a, b), n in sorted(edges.items()):
        print(f"{a} -> {b} ({n})")
    found = cycles(edges)
    print(f"{len(edges)} edges; cycles: " + (", ".join(f"{a} <-> {b}" for a, b in found) or "none"))


if __name__ == "__main__":
    main()
