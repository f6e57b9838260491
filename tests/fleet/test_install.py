"""`advisor install` / `uninstall` into a folder (`--root`, as a packager does), the shipped
examples loaded through the real settings and policy loaders, and shell completion. On real
systemd: tests/fleet/test_install_systemd.py."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.core.errors import InputError
from advisor.core.settings import load_settings
from advisor.fleet.hostfiles import (
    Layout,
    checked_central,
    dropin_text,
    running_executable,
    unsafe_for_root,
)
from advisor.planning.policy import load_policy
from tests.conftest import ROOT, run_advisor

UNIT = Path("etc/systemd/system/advisor-watch.service")
DROPIN = Path("etc/systemd/system/advisor-watch.service.d/central.conf")
CENTRAL = "postgresql+psycopg://advisor_ship_gpu_node_07@central.example/fleet?sslmode=verify-full"


def advisor(*args: str) -> subprocess.CompletedProcess[bytes]:
    return run_advisor(*args, timeout=120)


def as_json(done: subprocess.CompletedProcess[bytes]) -> dict[str, object]:
    assert done.returncode == 0, done.stderr.decode()
    result: dict[str, object] = json.loads(done.stdout)
    return result


def what(result: dict[str, object]) -> dict[str, str]:
    files = result["files"]
    assert isinstance(files, list)
    return {f["path"]: f["what"] for f in files}


def test_the_shipped_examples_load_through_the_real_loaders(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("ADVISOR_DB", "ADVISOR_HOST", "ADVISOR_POLICY", "ADVISOR_SHIP_TO"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ADVISOR_CONFIG", str(ROOT / "deploy/advisor.toml.example"))
    settings = load_settings()
    assert settings.db_url == "sqlite:////var/lib/advisor/events.db"
    assert settings.console.listen == "127.0.0.1:8750"
    policy = load_policy(ROOT / "deploy/policy.toml.example")
    assert policy.dry_run
    assert policy.allow and policy.allow[0].units == "vllm-*.service"
    assert policy.bounds["--max-num-seqs"].min == 8


def test_install_into_a_root_writes_the_unit_settings_and_policy(tmp_path: Path) -> None:
    root = tmp_path / "root"
    result = as_json(advisor("install", "--root", str(root), "--central", CENTRAL, "--json"))
    exe = running_executable()
    assert result["executable"] == str(exe)
    assert what(result) == {
        "/etc/advisor": "created",
        "/var/lib/advisor": "created",
        "/" + str(UNIT): "written",
        "/" + str(DROPIN): "written",
        "/etc/advisor/policy.toml.example": "written",
        "/etc/advisor/advisor.toml": "written",
    }
    assert result["systemctl"] == [
        ["systemctl", f"--root={root}", "enable", "advisor-watch.service"]
    ]
    unit = (root / UNIT).read_text()
    assert f"\nExecStart={exe} watch --metrics 127.0.0.1:9750\n" in unit
    assert "\nEnvironment=ADVISOR_KEY=/etc/advisor/host-key\n" in unit
    assert "ADVISOR_CONFIG" not in unit  # the settings' own default
    wants = root / "etc/systemd/system/multi-user.target.wants/advisor-watch.service"
    assert os.readlink(wants) == "/etc/systemd/system/advisor-watch.service"
    dropin = (root / DROPIN).read_text()
    assert (
        f'Environment="ADVISOR_SHIP_TO={CENTRAL}"\nEnvironment=PGPASSFILE=/etc/advisor/pgpass'
        in dropin
    )
    settings = root / "etc/advisor/advisor.toml"
    assert settings.read_text() == (ROOT / "deploy/advisor.toml.example").read_text()
    assert stat.S_IMODE(settings.stat().st_mode) == 0o600
    assert stat.S_IMODE((root / "var/lib/advisor").stat().st_mode) == 0o700
    assert not [p for p in root.rglob("*.tmp")]


def test_a_second_install_changes_nothing_and_keeps_the_operators_settings(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    as_json(advisor("install", "--root", str(root), "--json"))
    mine = root / "etc/advisor/advisor.toml"
    mine.write_text('host = "mine"\n')
    again = advisor("install", "--root", str(root))
    assert again.returncode == 0, again.stderr.decode()
    out = again.stdout.decode()
    assert "kept      /etc/advisor/advisor.toml (yours: not overwritten)" in out
    assert out.rstrip().endswith("nothing to change: the agent is installed")
    assert mine.read_text() == 'host = "mine"\n'
    result = as_json(advisor("install", "--root", str(root), "--json"))
    assert result["changed"] is False and result["systemctl"] == []


def test_a_changed_unit_is_rewritten(tmp_path: Path) -> None:
    root = tmp_path / "root"
    as_json(advisor("install", "--root", str(root), "--json"))
    (root / UNIT).write_text("[Service]\nExecStart=/opt/old/advisor watch\n")
    result = as_json(advisor("install", "--root", str(root), "--metrics", "[::1]:9751", "--json"))
    assert what(result)["/" + str(UNIT)] == "written"
    assert "ExecStart=" in (root / UNIT).read_text()
    assert ' watch --metrics "[::1]:9751"\n' in (root / UNIT).read_text()


def test_install_with_other_folders_says_them_in_the_files(tmp_path: Path) -> None:
    root, conf, state = tmp_path / "root", tmp_path / "conf", tmp_path / "state"
    args = ("--root", str(root), "--config-dir", str(conf), "--state-dir", str(state))
    as_json(advisor("install", *args, "--json"))
    unit = (root / UNIT).read_text()
    assert f"Environment=ADVISOR_CONFIG={conf}/advisor.toml" in unit
    assert f"Environment=ADVISOR_KEY={conf}/host-key" in unit
    assert "StateDirectory=" not in unit
    written = root / conf.relative_to("/") / "advisor.toml"
    env = {**os.environ, "ADVISOR_CONFIG": str(written)}
    env.pop("ADVISOR_DB", None)
    code = "from advisor.core.settings import load_settings; print(load_settings().db_url)"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == f"sqlite:///{state}/events.db"


def test_uninstall_removes_the_units_and_keeps_the_settings_unless_purged(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    as_json(advisor("install", "--root", str(root), "--central", CENTRAL, "--json"))
    result = as_json(advisor("uninstall", "--root", str(root), "--json"))
    assert what(result) == {
        "/" + str(DROPIN): "removed",
        "/" + str(UNIT): "removed",
        "/etc/advisor": "kept",
        "/var/lib/advisor": "kept",
    }
    assert not (root / UNIT).exists() and not (root / DROPIN).parent.exists()
    assert not (
        root / "etc/systemd/system/multi-user.target.wants/advisor-watch.service"
    ).is_symlink()
    assert (root / "etc/advisor/advisor.toml").is_file()
    again = advisor("uninstall", "--root", str(root), "--purge")
    assert again.returncode == 0, again.stderr.decode()
    assert not (root / "etc/advisor").exists() and not (root / "var/lib/advisor").exists()
    nothing = advisor("uninstall", "--root", str(root))
    assert (
        nothing.stdout.decode().rstrip().endswith("nothing to remove: the agent is not installed")
    )


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--central", "mysql://x@y/z"), "not a PostgreSQL URL"),
        (("--central", "postgresql://x@y/z\nExecStart=/bin/sh"), "not a PostgreSQL URL"),
        (("--metrics", "9750"), "not HOST:PORT"),
        (("--metrics", "127.0.0.1:9750 --auto"), "not HOST:PORT"),
        (("--config-dir", "etc/advisor"), "not an absolute path"),
        (("--state-dir", "/var/lib/my advisor"), "not an absolute path"),
    ],
)
def test_bad_options_are_one_line_and_write_nothing(
    tmp_path: Path, args: tuple[str, ...], words: str
) -> None:
    root = tmp_path / "root"
    done = advisor("install", "--root", str(root), *args)
    assert done.returncode == 4
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and words in lines[0]
    assert not root.exists()


def test_a_root_service_is_warned_off_a_program_others_may_change(tmp_path: Path) -> None:
    exe = tmp_path / "bin" / "advisor"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\n")
    why = unsafe_for_root(exe)
    assert why is not None and "is not root's alone" in why  # /tmp: anyone may write it
    assert unsafe_for_root(Path("/usr/bin/env")) is None  # root's, as a system program is


def test_the_central_url_is_quoted_for_systemd() -> None:
    text = dropin_text(Layout(), 'postgresql://a@b/c?x=%41&y="q"\\')
    assert 'Environment="ADVISOR_SHIP_TO=postgresql://a@b/c?x=%%41&y=\\"q\\"\\\\"' in text
    with pytest.raises(InputError):
        checked_central("postgresql://a@b/c\x00")
    assert Layout.checked(Path("/x/../y")).root == Path("/y")


@pytest.mark.parametrize(
    ("shell", "mark"),
    [
        ("bash", "complete -o nosort -F _advisor_completion advisor"),
        ("zsh", "#compdef advisor"),
        ("fish", "complete --no-files --command advisor"),
    ],
)
def test_the_completion_script_is_produced(shell: str, mark: str) -> None:
    env = {**os.environ, "_ADVISOR_COMPLETE": f"{shell}_source"}
    done = run_advisor(env=env)
    assert done.returncode == 0, done.stderr.decode()
    assert mark in done.stdout.decode()


def test_completion_offers_the_commands_and_their_options() -> None:
    def complete(words: str, cword: int) -> list[str]:
        env = {
            **os.environ,
            "_ADVISOR_COMPLETE": "bash_complete",
            "COMP_WORDS": words,
            "COMP_CWORD": str(cword),
        }
        done = run_advisor(env=env)
        assert done.returncode == 0, done.stderr.decode()
        return done.stdout.decode().split()

    assert "plain,install" in complete("advisor inst", 1)
    assert "plain,uninstall" in complete("advisor unin", 1)
    assert "plain,--central" in complete("advisor install --cen", 2)


def test_a_live_install_or_uninstall_needs_root(monkeypatch: pytest.MonkeyPatch) -> None:
    from advisor.core.errors import PrerequisiteError
    from advisor.fleet.install import install, uninstall

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(PrerequisiteError, match="run it as root"):
        install(Layout(), running_executable(), metrics="127.0.0.1:9750")
    with pytest.raises(PrerequisiteError, match="run it as root"):
        uninstall(Layout())
