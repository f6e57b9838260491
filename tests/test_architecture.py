"""docs/architecture.md, `.importlinter` and the package docstrings tell one story: the page's
drawing of the stages is made from the contracts' layers and each package's own first
paragraph, every contract is named on the page, and the README points to the page instead of
drawing the packages a second time."""

from __future__ import annotations

import ast
import configparser
import re

from tests.import_graph import ROOT

PAGE = ROOT / "docs" / "architecture.md"


def _linter() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter", encoding="utf-8")
    return config


def layers() -> list[str]:
    """The stages, top (what people run) to bottom (the ground), as import-linter has them."""
    return _linter()["importlinter:contract:stages"]["layers"].split()


def first_paragraph(package: str) -> str:
    path = ROOT / package.replace(".", "/") / "__init__.py"
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return " ".join(doc.split("\n\n")[0].split())


def drawing() -> str:
    """The page's table of stages, as the code says it."""
    rows = ["| stage | package | what it is (its docstring's first paragraph) |", "|---|---|---|"]
    for n, package in enumerate(layers(), 1):
        text = first_paragraph(package).replace("|", "\\|")
        rows.append(f"| {n} | `{package}` | {text} |")
    return "\n".join(rows)


def test_the_page_draws_the_stages_from_the_code() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert drawing() in page, (
        "docs/architecture.md: regenerate its table with tests.test_architecture.drawing()"
    )


def test_every_contract_is_named_on_the_page() -> None:
    page = " ".join(PAGE.read_text(encoding="utf-8").split())
    config = _linter()
    names = [config[s]["name"] for s in config.sections() if s.startswith("importlinter:contract:")]
    assert len(names) >= 3
    assert [n for n in names if n not in page] == []


def test_every_package_has_a_first_paragraph() -> None:
    assert [p for p in layers() if len(first_paragraph(p)) < 40] == []


def test_the_readme_does_not_draw_the_packages_again() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    layout = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    assert "docs/architecture.md" in layout
    assert re.findall(r"^\| `(advisor/\w+/|ingest/)`", layout, flags=re.M) == []
