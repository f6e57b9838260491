"""`advisor classify --json` on lines a test writes, through click's runner: the answer as
the command line gives it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from advisor.cli.main import cli
from advisor.diagnosis.classify import diagnose
from advisor.diagnosis.model import LinearModel, load_model
from advisor.diagnosis.rules import RuleSet, load_rules
from advisor.pipeline.inputs import read_log
from advisor.reports.contract import to_contract


def classify_lines(tmp_path: Path, lines: list[str], name: str = "paste.log") -> dict[str, Any]:
    """The `classify --json` answer for `lines` written to a file under `tmp_path`."""
    log = tmp_path / name
    log.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(cli, ["classify", str(log), "--json"])
    assert result.exit_code == 0, result.output
    answer: dict[str, Any] = json.loads(result.output)
    return answer


class FileClassifier:
    """`classify --json`'s answer for a log file, in process: the shipped rules and model are
    loaded once (a module-scoped fixture holds one)."""

    def __init__(self) -> None:
        self.rules: RuleSet = load_rules()
        self.model: LinearModel | None = load_model()

    def __call__(self, path: Path) -> dict[str, Any]:
        fmt, lines = read_log(str(path))
        return to_contract(diagnose(lines, self.rules, self.model), fmt)
