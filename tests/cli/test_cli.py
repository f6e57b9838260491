"""The command line end to end through click's runner: output, JSON, errors, exit codes, docs."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import click
import orjson
import pytest
from click.testing import CliRunner
from sqlalchemy import text

from advisor.cli.main import cli
from advisor.store import EventStore
from tests.commands import subcommands
from tests.conftest import ROOT, run_advisor
from tests.journal_fixtures import entry, json_line

Opener = Callable[[str], EventStore]


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    path = tmp_path / "j.jsonl"
    lines = [
        json_line(entry(i, f"INFO request {i}", unit=f"u{i % 2}.service"), cursor=f"s=c;i={i:x}")
        for i in range(10)
    ]
    lines.append(
        json_line(entry(10, b"\x1b[31mred\x1b[0m \x1b]0;title\x07 bell"), cursor="s=c;i=a")
    )
    path.write_bytes(b"".join(lines))
    return path


def invoke(*args: str, env: dict[str, str] | None = None) -> click.testing.Result:
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def test_ingest_then_events_status_verify(journal: Path, sqlite_url: str) -> None:
    done = invoke("ingest", "journal", "--file", str(journal), "--db", sqlite_url)
    assert done.exit_code == 0
    assert done.output.endswith("read 11, stored 11 new events, 0 already stored, 0 malformed\n")
    listed = invoke("events", "--db", sqlite_url)
    lines = listed.output.splitlines()
    assert len(lines) == 11
    assert re.match(
        r"^\s+1  2025-03-16T06:12:38\.000Z  gpu01/u0\.service  log\.recorded  "
        r"INFO request 0$",
        lines[0],
    )
    # colour codes dropped, other control characters escaped: a log cannot drive the terminal
    assert lines[-1].endswith("red \\x1b]0;title\\x07 bell")
    only = invoke(
        "events", "--stream", "gpu01/u1.service", "--limit", "2", "--json", "--db", sqlite_url
    )
    objs = [orjson.loads(line) for line in only.output.splitlines()]
    assert [o["payload"]["message"] for o in objs] == ["INFO request 7", "INFO request 9"]
    assert objs[0]["type"] == "log.recorded" and objs[0]["source"] == "journald"
    assert objs[0]["time"] == "2025-03-16T06:12:38.007Z"
    since = invoke("events", "--since", "2025-03-16T06:12:38.009Z", "--json", "--db", sqlite_url)
    assert len(since.output.splitlines()) == 2
    status = orjson.loads(invoke("status", "--json", "--db", sqlite_url).output)
    assert status["events"] == 11 and status["revision"] == status["head_revision"]
    assert status["by_stream"] == {
        "gpu01/u0.service": 5,
        "gpu01/u1.service": 5,
        "gpu01/vllm.service": 1,
    }
    assert any(name.startswith("journal-json:") for name in status["checkpoints"])
    human = invoke("status", "--db", sqlite_url).output
    assert "events:    11 (last seq 11)" in human
    ok = invoke("verify", "--db", sqlite_url)
    assert ok.exit_code == 0
    assert ok.output == "verified 11 events: hash chain intact (last seq 11)\n"


def test_verify_exits_3_on_a_tampered_store(journal: Path, sqlite_url: str, opener: Opener) -> None:
    invoke("ingest", "journal", "--file", str(journal), "--db", sqlite_url)
    store = opener(sqlite_url)
    with store.begin() as conn:
        conn.execute(text("DROP TRIGGER events_no_update"))
        conn.execute(text("UPDATE events SET stream = 'gpu01/other' WHERE seq = 4"))
    result = CliRunner().invoke(cli, ["verify", "--db", sqlite_url])
    assert result.exit_code == 3
    assert (
        result.output == "Error: hash chain broken at seq 4: hash mismatch: content or "
        "chain was altered\n"
    )
    as_json = CliRunner().invoke(cli, ["verify", "--json", "--db", sqlite_url])
    assert as_json.exit_code == 3 and orjson.loads(as_json.output)["first_bad_seq"] == 4


def test_store_url_from_environment_and_default_path(journal: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'from-env.db'}"
    invoke("ingest", "journal", "--file", str(journal), env={"ADVISOR_DB": url})
    assert (tmp_path / "from-env.db").exists()
    data_home = tmp_path / "xdg"
    done = invoke(
        "ingest",
        "journal",
        "--file",
        str(journal),
        env={"ADVISOR_DB": "", "XDG_DATA_HOME": str(data_home)},
    )
    assert done.exit_code == 0
    assert (data_home / "advisor" / "events.db").exists()


@pytest.mark.parametrize(
    "args, message, code",
    [
        (
            ["events", "--db", "mysql://x/y"],
            "Error: --db mysql://x/y: unsupported database 'mysql'; use SQLite or PostgreSQL\n",
            1,
        ),
        (
            ["events", "--db", "not a url"],
            "Error: --db 'not a url' is not a database URL "
            "(sqlite:///PATH or postgresql+psycopg://USER@HOST/DB)\n",
            1,
        ),
        (
            ["events", "--since", "yesterday-ish"],
            "Error: 'yesterday-ish' is not a time (use 2026-02-21T00:32:55Z, @1771633975 or -2h)\n",
            4,
        ),
        (
            ["ingest", "journal", "--file", "/nonexistent/j.jsonl"],
            "Error: /nonexistent/j.jsonl: no such file\n",
            4,
        ),
        (
            ["ingest", "journal", "--follow", "--unit", "x;rm -rf /"],
            "Error: --unit 'x;rm -rf /' is not a systemd unit name or glob\n",
            4,
        ),
    ],
)
def test_errors_are_one_line_with_an_exit_code(
    args: list[str], message: str, code: int, sqlite_url: str
) -> None:
    if "--db" not in args:
        args = [*args, "--db", sqlite_url]
    result = CliRunner().invoke(cli, args)
    assert (result.exit_code, result.output) == (code, message)


def test_journal_from_stdin(journal: Path, sqlite_url: str) -> None:
    result = CliRunner().invoke(
        cli,
        ["ingest", "journal", "--file", "-", "--db", sqlite_url, "--json"],
        input=journal.read_bytes(),
    )
    assert result.exit_code == 0, result.output
    assert orjson.loads(result.output)["appended"] == 11


def test_usage_errors_exit_2(sqlite_url: str) -> None:
    result = CliRunner().invoke(cli, ["ingest", "journal", "--db", sqlite_url])
    assert result.exit_code == 2
    assert "give exactly one of --file F, --journal-file PATH, --follow" in result.output


def test_the_cli_as_a_process(journal: Path, sqlite_url: str) -> None:
    done = run_advisor("ingest", "journal", "--file", str(journal), "--db", sqlite_url, "--json")
    assert done.returncode == 0 and orjson.loads(done.stdout)["appended"] == 11
    events = run_advisor("events", "--json", "--type", "log.recorded", "--db", sqlite_url)
    assert len(events.stdout.splitlines()) == 11
    missing = run_advisor("events", "--db", "postgresql+psycopg://nobody@127.0.0.1:1/none")
    assert missing.returncode == 1
    assert missing.stderr.decode().count("\n") == 1
    assert missing.stderr.startswith(b"Error: ")


def _command_paths(group: click.Group, prefix: str = "advisor") -> list[str]:
    paths = []
    for name, command in subcommands(group).items():
        path = f"{prefix} {name}"
        if isinstance(command, click.Group):
            paths.extend(_command_paths(command, path))
        else:
            paths.append(path)
    return paths


def test_every_command_and_option_is_documented() -> None:
    readme = (ROOT / "README.md").read_text()
    for path in _command_paths(cli):
        assert path in readme, f"{path} is not in README.md"
        command = cli
        for part in path.split()[1:]:
            command = subcommands(command)[part]  # type: ignore[arg-type]
        assert command.help, f"{path} has no help text"
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("--") and opt not in ("--help",):
                    assert opt in readme, f"{path} {opt} is not in README.md"
