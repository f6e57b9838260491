"""What the domain knows lives in one registry each, and everything else reads it.

The engines (`advisor/core/engines/`), the failure taxonomy (`advisor/core/taxonomy.py`) and
the action kinds (`advisor/core/kinds.py`) are the only library modules that spell an engine,
a label or an action kind as a string literal; other modules name the registries' constants or
read the registries. The simulator (`advisor/sim/`) is exempt: it plays the engines' programs,
systemd and Docker, and their words are its data. A literal that is the same word with another
meaning (a systemd job type "stop", a unit called "unknown") says so in a comment on its line:
"not an action kind", "not a label", "not an engine".
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path
from typing import get_args

import pytest

from advisor.core import engines, kinds, taxonomy
from advisor.core.engines.model import Engine
from advisor.execution.handlers import ALL_HANDLERS
from advisor.planning.recommend import REMEDIES, UNIT_REMEDIES
from tests.import_graph import ROOT

REGISTRIES = {
    "engine": (frozenset(engines.ENGINES), "not an engine", ("advisor/core/engines/",)),
    "label": (frozenset(taxonomy.LABELS), "not a label", ("advisor/core/taxonomy.py",)),
    "action kind": (frozenset(kinds.KINDS), "not an action kind", ("advisor/core/kinds.py",)),
}
EXEMPT = ("advisor/sim/",)


def _docstrings(tree: ast.AST) -> set[int]:
    kinds_ = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, kinds_)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def _faces(tree: ast.AST) -> set[int]:
    """The string constants of `__all__` (module names, not the registries' words)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            out.update(id(c) for c in ast.walk(node.value))
    return out


def _comments(source: str) -> dict[int, str]:
    return {
        tok.start[0]: tok.string
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    }


def literals_of(source: str, path: str) -> list[str]:
    """Each registry word spelled as a literal in `source` outside its registry: `path:line
    word (what)`."""
    tree = ast.parse(source)
    skip = _docstrings(tree) | _faces(tree)
    comments = _comments(source)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
            continue
        if id(node) in skip:
            continue
        for what, (words, marker, homes) in REGISTRIES.items():
            if node.value not in words or path.startswith(homes):
                continue
            lines = range(node.lineno, (node.end_lineno or node.lineno) + 1)
            if any(marker in comments.get(n, "") for n in lines):
                continue
            found.append(f"{path}:{node.lineno} {node.value!r} ({what})")
    return found


def _library() -> list[Path]:
    files = sorted((ROOT / "advisor").rglob("*.py")) + sorted((ROOT / "ingest").rglob("*.py"))
    return [p for p in files if not str(p.relative_to(ROOT)).startswith(EXEMPT)]


def test_no_engine_label_or_kind_is_spelled_outside_its_registry() -> None:
    found = []
    for path in _library():
        found += literals_of(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert found == []


def test_the_literal_check_can_fail() -> None:
    source = 'x = "set_flag"\ny = "kv_cache_oom"\nz = "sglang"\n'
    assert len(literals_of(source, "advisor/planning/new.py")) == 3
    said = 'job = "stop"  # systemd\'s job type, not an action kind\n'
    assert literals_of(said, "advisor/planning/new.py") == []
    assert literals_of('"""healthy"""\n__all__ = ["stop"]\n', "advisor/x.py") == []
    assert literals_of('x = "healthy"\n', "advisor/core/taxonomy.py") == []


def test_the_types_are_made_from_the_registries() -> None:
    assert get_args(kinds.ActionKind) == tuple(kinds.KINDS)
    assert get_args(taxonomy.FailureLabel) == taxonomy.FAILURE_LABELS
    assert set(get_args(taxonomy.CatalogLabel)) == {*taxonomy.MODEL_LABELS, taxonomy.OOM}
    assert set(taxonomy.LABELS) == set(taxonomy.TAXONOMY)


def test_every_kind_has_one_handler_and_every_handler_a_kind() -> None:
    handled = [h.kind for h in ALL_HANDLERS]
    assert sorted(handled) == sorted(kinds.KINDS)


@pytest.mark.parametrize("label", taxonomy.LABELS)
def test_each_label_names_what_planning_has(label: str) -> None:
    spec = taxonomy.TAXONOMY[label]
    assert spec.unit_remedy is None or spec.unit_remedy in UNIT_REMEDIES
    assert spec.failure or not (spec.oom or spec.unit_remedy or spec.advice)
    for when in spec.oom:
        assert set(when.conditions) <= {"phases", "after_ready", "after_stop"}
        assert set(when.conditions.get("phases", ())) <= set(taxonomy.PHASES)


@pytest.mark.parametrize("engine", engines.ALL, ids=lambda e: e.name)
def test_each_engine_names_labels_and_remedies_that_exist(engine: Engine) -> None:
    assert set(engine.remedies) | set(engine.advice) <= set(taxonomy.FAILURE_LABELS)
    for names in engine.remedies.values():
        assert set(names) <= set(REMEDIES), engine.name
