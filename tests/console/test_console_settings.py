"""The `[console]` settings (file, then ADVISOR_CONSOLE__*, then flags) and `advisor serve`'s
refusals, read for real: a TOML file on disk, the environment, the CLI."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

import advisor.core.settings as settings_module
from advisor.cli.main import cli
from advisor.core.errors import InputError
from advisor.core.settings import load_settings


@pytest.fixture(autouse=True)
def _no_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(settings_module, "SYSTEM_CONFIG", tmp_path / "absent" / "advisor.toml")
    for name in ("ADVISOR_CONFIG", "ADVISOR_CONSOLE__TOKEN", "ADVISOR_CONSOLE__LISTEN"):
        monkeypatch.delenv(name, raising=False)


def test_console_defaults_to_loopback_and_no_token() -> None:
    console = load_settings().console
    assert (console.listen, console.token) == ("127.0.0.1:8750", None)


def test_console_section_then_environment_then_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "advisor.toml"
    path.write_text('[console]\nlisten = "127.0.0.1:9000"\ntoken = "from-file"\n')
    monkeypatch.setenv("ADVISOR_CONFIG", str(path))
    assert load_settings().console.token == "from-file"
    monkeypatch.setenv("ADVISOR_CONSOLE__TOKEN", "from-env")
    s = load_settings()
    assert (s.console.listen, s.console.token) == ("127.0.0.1:9000", "from-env")
    s = load_settings(console={"listen": "127.0.0.1:9001", "token": None})
    assert (s.console.listen, s.console.token) == ("127.0.0.1:9001", "from-env")


def test_an_unknown_console_key_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "advisor.toml"
    path.write_text('[console]\npassword = "x"\n')
    monkeypatch.setenv("ADVISOR_CONFIG", str(path))
    with pytest.raises(InputError, match=r"console\.password"):
        load_settings()


@pytest.mark.parametrize("listen", ["8750", "localhost", ":8750", "127.0.0.1:http", "[::1]:99999"])
def test_serve_refuses_a_listen_address_it_cannot_use(listen: str, sqlite_url: str) -> None:
    result = CliRunner().invoke(cli, ["serve", "--listen", listen, "--db", sqlite_url])
    assert result.exit_code == 4, result.output
    assert result.output == f"Error: --listen {listen!r}: not HOST:PORT (e.g. 127.0.0.1:8750)\n"


def test_serve_on_a_busy_port_is_unusable_input(sqlite_url: str) -> None:
    """Another process listens there: one `Error:` line naming the address, exit 4 (the
    README's code for an input that cannot be used, as `watch --metrics` has it), not
    uvicorn's 3 — which the README documents as a hash chain that does not verify."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        listen = f"127.0.0.1:{busy.getsockname()[1]}"
        result = CliRunner().invoke(cli, ["serve", "--listen", listen, "--db", sqlite_url])
    assert result.exit_code == 4, result.output
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"Error: serve: {listen} is in use: ")
