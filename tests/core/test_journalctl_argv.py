"""The journalctl command lines the advisor builds: argv lists from validated values only."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from advisor.cli.main import cli
from advisor.core.errors import InputError
from advisor.core.journalctl import build_argv
from ingest.journal import entry_event
from ingest.journal_sources import UnitGlobs, checkpoint_name_for


def test_follow_units_from_the_current_boot() -> None:
    assert build_argv(units=["vllm*.service", "sglang@0.service"], follow=True) == [
        "journalctl",
        "--output=export",
        "--all",
        "--no-pager",
        "--quiet",
        "--unit=vllm*.service",
        "--unit=sglang@0.service",
        "--boot",
        "--follow",
        "--no-tail",
    ]


def test_resume_starts_at_the_saved_cursor() -> None:
    cursor = "s=7d2e4f6a8b0c1d3e5f7a9b1c3d5e7f9a;i=4a001;b=3f1c;m=218711a00;t=64b4aadc07bc0;x=9e37"
    argv = build_argv(files=[Path("/var/log/journal/x/system.journal")], cursor=cursor, since="-1h")
    assert argv[-2:] == ["--file=/var/log/journal/x/system.journal", f"--cursor={cursor}"]
    assert not any(a.startswith("--since") for a in argv)  # the cursor wins


def test_since_without_a_cursor() -> None:
    assert build_argv(since="2026-02-21 00:30:00")[-1] == "--since=2026-02-21 00:30:00"
    assert build_argv(since="-2h")[-1] == "--since=-2h"


@pytest.mark.parametrize("unit", ["x;rm -rf /", "$(reboot)", "a b", "../etc", "-x", "a\nb", ""])
def test_hostile_unit_names_are_refused(unit: str) -> None:
    with pytest.raises(InputError, match="not a systemd unit name"):
        build_argv(units=[unit])


@pytest.mark.parametrize("cursor", ["s=1;$(reboot)", "x\ny", "a b"])
def test_a_tampered_saved_cursor_is_refused(cursor: str) -> None:
    with pytest.raises(InputError, match="not a journald cursor"):
        build_argv(cursor=cursor)


@pytest.mark.parametrize("since", ["--unit=evil", "-rf", "today\n--flag"])
def test_since_cannot_smuggle_options(since: str) -> None:
    with pytest.raises(InputError, match="not a time"):
        build_argv(since=since)


def test_without_journalctl_exit_2_and_nothing_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no journalctl here
    db = tmp_path / "s.db"
    result = CliRunner().invoke(cli, ["ingest", "journal", "--follow", "--db", f"sqlite:///{db}"])
    assert result.exit_code == 2
    assert result.output == "Error: journalctl not found on PATH (install systemd's journalctl)\n"
    assert not db.exists()


def _event(**fields: str) -> dict[str, object]:
    base = {
        "__REALTIME_TIMESTAMP": "1771633975000000",
        "_HOSTNAME": "gpu01",
        "__CURSOR": "s=1;i=1",
        "MESSAGE": "x",
        "_TRANSPORT": "stdout",
        "_PID": "4242",
        "_UID": "1000",
    }
    return entry_event({**base, **fields})


def test_a_followed_glob_keeps_what_journalctl_u_would() -> None:
    """Live follow reads the whole journal (`-u` refuses a glob nothing has logged under yet)
    and keeps the entries about matching units: the unit entry_event says an entry is
    about."""
    globs = UnitGlobs(["vllm-*.service", "sglang"])
    assert globs.name == "sglang,vllm-*.service"
    assert globs.keep(_event(_SYSTEMD_UNIT="vllm-a.service"))
    assert globs.keep(_event(_SYSTEMD_UNIT="sglang.service"))  # `sglang` means sglang.service
    assert globs.keep(
        _event(
            _SYSTEMD_UNIT="init.scope",
            _PID="1",
            _UID="0",
            UNIT="vllm-a.service",
            MESSAGE="vllm-a.service: Main process exited, code=exited, status=1/FAILURE",
        )
    )
    assert not globs.keep(
        _event(_SYSTEMD_UNIT="init.scope", _PID="1", _UID="0", UNIT="ssh.service")
    )
    assert not globs.keep(_event(_SYSTEMD_UNIT="ssh.service"))
    assert not globs.keep(_event(_SYSTEMD_UNIT="vllm-a.service.d"))
    kernel = _event(_TRANSPORT="kernel", MESSAGE="NVRM: Xid (PCI:0000:3b:00): 79")
    assert not globs.keep(kernel)
    with_kernel = UnitGlobs(["vllm-*.service"], kernel=True)
    assert with_kernel.keep(kernel) and with_kernel.name == "vllm-*.service+kernel"
    with pytest.raises(InputError, match="not a systemd unit name"):
        UnitGlobs(["$(reboot)"])


def test_checkpoint_names() -> None:
    """`ingest journal --follow --unit` keeps its name; watch's selections have their own."""
    assert (
        checkpoint_name_for([], ["vllm-b.service", "vllm-a*.service"])
        == "journalctl:system:vllm-a*.service,vllm-b.service"
    )
    assert checkpoint_name_for([], []) == "journalctl:system:*"
    assert (
        checkpoint_name_for([], [], selection="vllm-*.service+kernel")
        == "journalctl:system:vllm-*.service+kernel"
    )


def test_a_folder_is_read_as_a_journal_directory(tmp_path: Path) -> None:
    """A folder of .journal files goes to --directory, which follows its rotations."""
    one = tmp_path / "system.journal"
    one.write_bytes(b"")
    argv = build_argv(files=[tmp_path, one], follow=True)
    assert f"--directory={tmp_path}" in argv
    assert f"--file={one}" in argv
