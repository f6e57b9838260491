"""The one settings object: defaults, then the settings file, then ADVISOR_* variables, then
the command-line flags — each read for real (a TOML file on disk, the process environment,
the CLI as a process)."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

import advisor.core.settings as settings_module
from advisor.core.errors import InputError
from advisor.core.host import this_host
from advisor.core.settings import default_db_url, load_settings
from tests.conftest import run_advisor


@pytest.fixture(autouse=True)
def _no_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No machine settings file and no ADVISOR_* settings from the test's own environment."""
    monkeypatch.setattr(settings_module, "SYSTEM_CONFIG", tmp_path / "absent" / "advisor.toml")
    for name in ("ADVISOR_CONFIG", "ADVISOR_DB", "ADVISOR_HOST", "ADVISOR_GPU_TWIN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "advisor.toml"
    path.write_text(text)
    return path


def test_defaults_without_file_or_environment(tmp_path: Path) -> None:
    s = load_settings()
    assert (s.db, s.host, s.gpu_twin) == (None, this_host(), None)
    assert s.db_url == default_db_url() == f"sqlite:///{tmp_path}/data/advisor/events.db"


def test_each_source_overrides_the_one_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _file(
        tmp_path,
        'db = "sqlite:///from-file.db"\nhost = "file-host"\ngpu_twin = "/twin/from-file"\n',
    )
    monkeypatch.setenv("ADVISOR_CONFIG", str(path))
    s = load_settings()
    assert (s.db, s.host, s.gpu_twin) == (
        "sqlite:///from-file.db",
        "file-host",
        Path("/twin/from-file"),
    )
    monkeypatch.setenv("ADVISOR_HOST", "env-host")
    monkeypatch.setenv("ADVISOR_DB", "")  # empty: not set, the file's value stays
    s = load_settings()
    assert (s.db, s.host) == ("sqlite:///from-file.db", "env-host")
    s = load_settings(host="flag-host", db=None)  # a None flag was not given
    assert (s.db, s.host, s.db_url) == (
        "sqlite:///from-file.db",
        "flag-host",
        "sqlite:///from-file.db",
    )


def test_the_system_file_is_read_when_no_file_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(settings_module, "SYSTEM_CONFIG", _file(tmp_path, 'host = "sys-host"\n'))
    assert load_settings().host == "sys-host"
    other = tmp_path / "other.toml"
    other.write_text('host = "named-host"\n')
    monkeypatch.setenv("ADVISOR_CONFIG", str(other))
    assert load_settings().host == "named-host"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("host = \n", "not TOML"),
        ('hots = "typo"\n', "hots: Extra inputs are not permitted"),
        ("host = 3\n", "host: Input should be a valid string"),
    ],
)
def test_an_unusable_settings_file_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, message: str
) -> None:
    monkeypatch.setenv("ADVISOR_CONFIG", str(_file(tmp_path, text)))
    with pytest.raises(InputError, match=message):
        load_settings()


def test_a_named_file_that_is_missing_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ADVISOR_CONFIG", str(tmp_path / "nowhere.toml"))
    with pytest.raises(InputError, match=r"ADVISOR_CONFIG .*nowhere\.toml: no such file"):
        load_settings()


def _hosts(db: Path, env: dict[str, str]) -> list[str]:
    done = run_advisor("events", "--json", "--db", f"sqlite:///{db}", env=env)
    assert done.returncode == 0, done.stderr
    return [orjson.loads(line)["stream"].split("/")[0] for line in done.stdout.splitlines()]


def test_the_cli_takes_store_and_host_in_precedence_order(tmp_path: Path) -> None:
    """A settings file names the store and the host; ADVISOR_* overrides it; a flag overrides
    both — through the real CLI."""
    log = tmp_path / "server.log"
    log.write_text("INFO: Started server process [7]\n")
    file_db, env_db, flag_db = (tmp_path / f"{n}.db" for n in ("file", "env", "flag"))
    config = _file(tmp_path, f'db = "sqlite:///{file_db}"\nhost = "file-host"\n')
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ADVISOR_DB", "ADVISOR_HOST", "ADVISOR_GPU_TWIN")
    }
    base["ADVISOR_CONFIG"] = str(config)
    ingest = ("ingest", "text", str(log), "--service", "vllm", "--no-diagnose")
    assert run_advisor(*ingest, env=base).returncode == 0
    with_env = {**base, "ADVISOR_DB": f"sqlite:///{env_db}", "ADVISOR_HOST": "env-host"}
    assert run_advisor(*ingest, env=with_env).returncode == 0
    done = run_advisor(*ingest, "--host", "flag-host", "--db", f"sqlite:///{flag_db}", env=with_env)
    assert done.returncode == 0, done.stderr
    assert _hosts(file_db, base) == ["file-host"]
    assert _hosts(env_db, base) == ["env-host"]
    assert _hosts(flag_db, base) == ["flag-host"]


def test_the_cli_refuses_a_bad_settings_file(tmp_path: Path) -> None:
    env = {**os.environ, "ADVISOR_CONFIG": str(_file(tmp_path, "db = [\n"))}
    done = run_advisor("status", env=env)
    assert done.returncode == 4
    assert done.stderr.decode().startswith(
        f"Error: settings file {tmp_path}/advisor.toml: not TOML: "
    )
