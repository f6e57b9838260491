"""The settings file's sections (`[notify]`, `[metrics]`): read from a real TOML file, a key
overridden by `ADVISOR_<SECTION>__<KEY>`, bad values refused with one line (also through the
CLI), and docs/config.md listing every key the settings take."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import BaseModel

import advisor.core.settings as settings_module
from advisor.cli.main import cli
from advisor.core.errors import InputError
from advisor.core.settings import NOTICE_KINDS, Settings, load_settings
from tests.conftest import ROOT


@pytest.fixture(autouse=True)
def _no_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(settings_module, "SYSTEM_CONFIG", tmp_path / "absent" / "advisor.toml")
    for name in list(os.environ):
        if name.startswith("ADVISOR_") and name != "ADVISOR_TEST_PG_URL":
            monkeypatch.delenv(name)


def _config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> Path:
    path = tmp_path / "advisor.toml"
    path.write_text(text)
    monkeypatch.setenv("ADVISOR_CONFIG", str(path))
    return path


def test_the_sections_default_to_telling_no_one_and_serving_nothing() -> None:
    s = load_settings()
    assert (s.notify.urls, s.notify.alertmanager, s.notify.on) == ((), (), NOTICE_KINDS)
    assert s.metrics.listen is None


def test_the_sections_from_the_file_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _config(
        tmp_path,
        monkeypatch,
        '[notify]\nurls = ["json://127.0.0.1:8080/hook"]\non = ["incident_opened"]\n'
        '[metrics]\nlisten = "127.0.0.1:9750"\n',
    )
    s = load_settings()
    assert s.notify.urls == ("json://127.0.0.1:8080/hook",)
    assert s.notify.on == ("incident_opened",) and s.metrics.listen == "127.0.0.1:9750"
    monkeypatch.setenv("ADVISOR_NOTIFY__ALERTMANAGER", '["http://127.0.0.1:9093"]')
    monkeypatch.setenv("ADVISOR_METRICS__LISTEN", "0.0.0.0:9751")
    s = load_settings()
    assert s.notify.alertmanager == ("http://127.0.0.1:9093",)
    assert s.notify.urls == ("json://127.0.0.1:8080/hook",)  # the file's key stays
    assert s.metrics.listen == "0.0.0.0:9751"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[notify]\nurl = ["x"]\n', "notify.url: Extra inputs are not permitted"),
        ('[notify]\non = ["crash"]\n', "notify.on.0: Input should be 'incident_opened'"),
        ("[notify]\ntimeout_s = 0\n", "notify.timeout_s: Input should be greater than 0"),
        ("[metrics]\nport = 9750\n", "metrics.port: Extra inputs are not permitted"),
    ],
)
def test_a_bad_section_key_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, message: str
) -> None:
    _config(tmp_path, monkeypatch, text)
    with pytest.raises(InputError, match=re.escape(message)):
        load_settings()


def test_watch_refuses_a_target_apprise_does_not_know(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _config(tmp_path, monkeypatch, '[notify]\nurls = ["slakc://T0/B0/secret"]\n')
    result = CliRunner().invoke(cli, ["watch", "--unit", "v.service", "--no-gpu"])
    assert result.exit_code == 4
    assert result.output == "Error: [notify] urls: slakc://…: not a URL Apprise knows\n"


def _keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    out: list[str] = []
    for name, field in model.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            out += _keys(kind, f"{prefix}{name}.")
        else:
            out.append(f"{prefix}{name}")
    return out


def test_docs_config_lists_every_key() -> None:
    text = (ROOT / "docs/config.md").read_text()
    documented = set(re.findall(r"^\|\s*`([a-z_.]+)`\s*\|", text, re.MULTILINE))
    keys = set(_keys(Settings))
    assert {"db", "host", "gpu_twin", "notify.urls", "metrics.listen"} <= keys
    assert keys == documented
