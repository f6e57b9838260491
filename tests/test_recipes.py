"""docs/extending.md's recipes work: each adds a made-up engine, label or action kind to a copy
of the tree, touching only the files its recipe names, and then the copy diagnoses with it and
passes the tests of that part (the registries, the documentation, the handlers).

The copy is imported instead of this checkout (`PYTHONPATH`, with `advisor/rules`,
`advisor/migrations` and `advisor/deploy` linked where the installed package maps them), so
what it proves is the copy's own code.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.import_graph import ROOT

TREE = ("advisor", "ingest", "rules", "migrations", "deploy", "docs", "tests")
FILES = ("pyproject.toml", "README.md", ".importlinter")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the code, rules, docs and tests that imports as `advisor`."""
    dst = tmp_path / "tree"
    for name in TREE:
        shutil.copytree(ROOT / name, dst / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in FILES:
        shutil.copy(ROOT / name, dst / name)
    (dst / "advisor" / "rules").symlink_to(dst / "rules")
    (dst / "advisor" / "migrations").symlink_to(dst / "migrations")
    (dst / "advisor" / "deploy").symlink_to(dst / "deploy")
    return dst


def run(tree: Path, *argv: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [sys.executable, *argv],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def pytest_in(tree: Path, *tests: str) -> None:
    done = run(tree, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *tests)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def classify(tree: Path, log: str) -> dict[str, object]:
    (tree / "crash.log").write_text(log, encoding="utf-8")
    done = run(tree, "-m", "advisor", "classify", "crash.log", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, object] = json.loads(done.stdout)
    return result


def insert(path: Path, before: str, text: str) -> None:
    """`text` into `path` just before the first `before` (the recipe's one edit)."""
    source = path.read_text(encoding="utf-8")
    assert before in source, f"{path}: {before!r} not found"
    path.write_text(source.replace(before, text + before, 1), encoding="utf-8")


def test_the_copy_is_what_is_imported(tree: Path) -> None:
    done = run(
        tree,
        "-c",
        "import advisor, advisor.rules; print(advisor.__file__, advisor.rules.__path__[0])",
    )
    assert done.returncode == 0, done.stderr
    assert all(p.startswith(str(tree)) for p in done.stdout.split()), done.stdout


def test_a_new_label_is_one_taxonomy_entry_and_its_rule(tree: Path) -> None:
    insert(
        tree / "advisor" / "core" / "taxonomy.py",
        "    LabelSpec(UNKNOWN,",
        '    LabelSpec("disk_full", "the disk the server writes to is full",\n'
        '              advice="free disk space where the server writes"),\n',
    )
    (tree / "rules" / "disk.toml").write_text(
        '[[rule]]\nid = "disk.full"\nlabel = "disk_full"\nconfidence = 0.97\n'
        'description = "a write failed: no space left on the device"\n'
        'match = ["No space left on device"]\n',
        encoding="utf-8",
    )
    with (tree / "docs" / "taxonomy.md").open("a", encoding="utf-8") as page:
        page.write("\n## `disk_full`\n\nThe disk filled up. Rule: `disk.full`.\n")
    pytest_in(tree, "tests/test_registries.py", "tests/test_docs.py")
    got = classify(
        tree,
        "INFO 12-01 10:00:00 api_server.py:100] vLLM API server version 0.6.3\n"
        "ERROR 12-01 10:00:04 engine.py:100] OSError: [Errno 28] No space left on device\n"
        "ERROR 12-01 10:00:05 engine.py:101] Engine died\n",
    )
    assert got["label"] == "disk_full", got["label"]
    actions = got["actions"]
    assert isinstance(actions, list) and actions[-1]["kind"] == "notify"
    assert "free disk space" in actions[-1]["why"]


HANDLER = '''"""`drain`: tell the load balancer to send the unit nothing (a made-up kind)."""

from __future__ import annotations

from advisor.core.steps import ActionStep
from advisor.execution.handlers.base import RUN, Context, Handler, Verdict
from advisor.execution.primitives import FileChange, Outcome, Primitives
from advisor.execution.state import UnitSnapshot


class Drain(Handler):
    kind = "drain"

    def guard(self, step: ActionStep, now: UnitSnapshot, ctx: Context) -> Verdict:
        return RUN

    def perform(
        self, m: Primitives, step: ActionStep, unit: str, change: FileChange | None
    ) -> Outcome:
        return m.notify(f"drain {unit}")
'''


def test_a_new_action_kind_is_one_registry_entry_and_its_handler(tree: Path) -> None:
    insert(
        tree / "advisor" / "core" / "kinds.py",
        "    KindSpec(NOTIFY,",
        '    KindSpec("drain", "send the unit no more requests", False),\n',
    )
    (tree / "advisor" / "execution" / "handlers" / "drain.py").write_text(HANDLER)
    with (tree / "docs" / "actions.md").open("a", encoding="utf-8") as page:
        page.write("\n## `drain`\n\nAsks the load balancer to send the unit nothing.\n")
    pytest_in(
        tree,
        "tests/test_docs.py",
        "tests/test_extending.py::test_every_action_kind_follows_the_kind_recipe",
        "tests/execution/test_action_kinds.py::test_every_kind_has_exactly_one_handler_and_every_handler_a_kind",
        "tests/execution/test_action_kinds.py::test_every_kind_is_described_and_dry_run",
    )
    done = run(
        tree,
        "-c",
        "from advisor.core.steps import ActionStep\n"
        "from advisor.execution.handlers import describe\n"
        "print(describe(ActionStep(kind='drain', unit='x.service', why='w')))",
    )
    assert done.returncode == 0 and done.stdout.strip() == "drain x.service", done.stderr


ENGINE = '''"""FakeServe, a made-up engine."""

from __future__ import annotations

from advisor.core.engines.model import Cue, Engine, Flag, Range, Recognition

ENGINE = Engine(
    name="fakeserve",
    title="FakeServe",
    recognition=Recognition(programs=("fakeserve",), mentions=("fakeserve",)),
    ready=(Cue("FakeServe is serving"),),
    flags=(Flag("--max-batch", "batch", bound=Range(1, 4096)),),
    source="made up for tests/test_recipes.py",
)
'''
CATALOGUE = """[producer]
name = "fakeserve"
repository = "example/fakeserve"
writes = "fakeserve"

[[message]]
id = "fakeserve.pool"
source = "src/pool.c"
format = 'fakeserve: the KV pool needs %d MiB, %d MiB free'
template = 'fakeserve: the KV pool needs {_:int} MiB, {_:int} MiB free'
label = "kv_cache_oom"
confidence = 0.95
phase = "kv_cache_allocation"
meaning = "the engine's KV pool does not fit in the memory left"
examples = ["fakeserve: the KV pool needs 9000 MiB, 1200 MiB free"]
"""


def test_a_new_engine_is_one_registry_entry_and_its_catalogue(tree: Path) -> None:
    (tree / "advisor" / "core" / "engines" / "fakeserve.py").write_text(ENGINE)
    (tree / "rules" / "catalog" / "fakeserve.toml").write_text(CATALOGUE)
    done = run(
        tree,
        "-c",
        "from advisor.core.engines import ENGINES\n"
        "from tests.test_docs import engine_section\n"
        "print(engine_section(ENGINES['fakeserve']))",
    )
    assert done.returncode == 0, done.stderr
    with (tree / "docs" / "engines.md").open("a", encoding="utf-8") as page:
        page.write("\n" + done.stdout)
    pytest_in(
        tree,
        "tests/test_registries.py",
        "tests/test_docs.py",
        "tests/test_extending.py::test_every_engine_follows_the_engine_recipe",
    )
    got = classify(
        tree,
        "fakeserve 1.0 starting\n"
        "fakeserve: the KV pool needs 9000 MiB, 1200 MiB free\n"
        "fakeserve exited with status 1\n",
    )
    facts = got["facts"]
    assert isinstance(facts, dict) and facts["engine"] == "fakeserve", facts
    assert got["label"] == "kv_cache_oom", got
    assert re.search(r"FakeServe|fakeserve", json.dumps(got["actions"]))
