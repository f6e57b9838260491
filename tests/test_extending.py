"""docs/extending.md stays true: the paths it names exist, each recipe lists as many files as
it says, and what is already built follows the recipes."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import get_args

import click
import pytest

from advisor.cli.main import cli
from advisor.core.kinds import KINDS, ActionKind
from advisor.core.taxonomy import FAILURE_LABELS
from advisor.execution.handlers import ALL_HANDLERS
from ingest import kinds
from tests.commands import subcommands

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "extending.md"


def sections(text: str) -> dict[str, str]:
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return {title: body for title, body in zip(parts[1::2], parts[2::2], strict=True)}


def named_paths(text: str) -> set[str]:
    return {
        p
        for p in re.findall(r"`([\w./<>-]+)`", text)
        if "/" in p and not p.startswith(("advisor ", "-"))
    }


def test_every_path_it_names_exists() -> None:
    missing = []
    for path in named_paths(PAGE.read_text(encoding="utf-8")):
        concrete = ROOT / path.split("<")[0] if "<" in path else ROOT / path
        if not (concrete.exists() or (concrete.parent.is_dir() and "<" in path)):
            missing.append(path)
    assert missing == []


def test_the_path_check_can_fail(tmp_path: Path) -> None:
    assert "advisor/nowhere.py" in named_paths("see `advisor/nowhere.py`")
    assert not (ROOT / "advisor/nowhere.py").exists()


@pytest.mark.parametrize("title", list(sections(PAGE.read_text(encoding="utf-8"))))
def test_each_recipe_lists_as_many_files_as_it_says(title: str) -> None:
    body = sections(PAGE.read_text(encoding="utf-8"))[title]
    said = re.search(r"Files touched: (\d+)", body)
    assert said is not None, f"{title}: no 'Files touched: N'"
    steps = re.findall(r"^\d+\. ", body, flags=re.M)
    assert len(steps) == int(said.group(1)), title


def test_every_label_follows_the_label_recipe() -> None:
    rule_labels = {
        rule.get("label")
        for path in (ROOT / "rules").glob("*.toml")
        for rule in tomllib.loads(path.read_text(encoding="utf-8")).get("rule", [])
    }
    families = {p.stem for p in (ROOT / "data" / "corpus" / "families").glob("*.py")}
    taxonomy = (ROOT / "docs" / "taxonomy.md").read_text(encoding="utf-8")
    for label in FAILURE_LABELS:
        assert label in rule_labels, f"{label}: no rule in rules/"
        assert label in families, f"{label}: no data/corpus/families/{label}.py"
        assert f"`{label}`" in taxonomy, f"{label}: not in docs/taxonomy.md"


def test_every_action_kind_follows_the_kind_recipe() -> None:
    handled = {h.kind: type(h).__module__ for h in ALL_HANDLERS}
    assert set(handled) == set(KINDS) == set(get_args(ActionKind))
    for kind, module in handled.items():
        assert module.startswith("advisor.execution.handlers."), (kind, module)


def test_every_input_kind_is_read_by_the_watcher() -> None:
    watcher = (ROOT / "ingest" / "watch.py").read_text(encoding="utf-8")
    found = [
        v
        for k, v in vars(kinds).items()
        if k.isupper() and isinstance(v, str) and k not in ("JOURNAL_KEYS",)
    ]
    assert found
    for kind in found:
        assert f'"{kind}"' in watcher, f"ingest/watch.py does not read {kind!r} inputs"


def test_every_command_lives_in_the_cli_package() -> None:
    for name, command in subcommands(cli).items():
        module = command.callback.__module__ if command.callback else type(command).__module__
        if isinstance(command, click.Group) and command.callback is None:
            continue
        assert module.startswith("advisor.cli."), (name, module)


def test_every_engine_follows_the_engine_recipe() -> None:
    from advisor.core.engines import ALL

    writers = {
        tomllib.loads(p.read_text(encoding="utf-8"))["producer"]["writes"]
        for p in (ROOT / "rules" / "catalog").glob("*.toml")
    }
    for engine in ALL:
        module = ROOT / "advisor" / "core" / "engines" / f"{engine.name}.py"
        assert module.is_file(), f"{engine.name}: no advisor/core/engines/{engine.name}.py"
        assert engine.name in writers, f"{engine.name}: no catalogue writes it"
        for remedies in engine.remedies.values():
            from advisor.planning.recommend import REMEDIES

            assert set(remedies) <= set(REMEDIES), (engine.name, remedies)
