"""`advisor install` and `advisor uninstall`: a host in one command. Writes the agent's unit
(advisor.fleet.hostfiles), the central store's drop-in when asked, the policy example and —
only where there is none — the settings file; makes the state folder; then has systemd
reload, enable and start the agent (`systemctl` run with an argv list, never a shell).

Each file is written to a temporary file beside it and renamed over it, and only when its
text differs, so a second install changes nothing and says so; an install after `pipx
upgrade advisor` (`--upgrade`) rewrites what changed and restarts the agent. Uninstall
stops, disables and removes the units it wrote, and keeps the settings and the store unless
asked to purge them. Under another root (`--root`, for packagers and tests) systemd is only
told to enable the unit there (`systemctl --root`), never to start anything."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from advisor.core.errors import AdvisorError, PrerequisiteError
from advisor.execution.dropins import write_atomically
from advisor.fleet.hostfiles import (
    UNIT,
    Layout,
    dropin_text,
    policy_text,
    settings_text,
    unit_text,
    unsafe_for_root,
)

Systemctl = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


class SystemctlError(AdvisorError):
    """systemctl refused or failed (its own words in the message)."""


def systemctl(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """`systemctl ARGS` as an argv list; PrerequisiteError where there is no systemctl."""
    exe = shutil.which("systemctl")
    if exe is None:
        raise PrerequisiteError("systemctl is not installed: advisor runs as a systemd unit")
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=300, check=False)


@dataclass
class Report:
    """What an install or uninstall did: each file or folder and what became of it
    (`written`, `unchanged`, `kept`, `created`, `removed`), and the systemctl calls made."""

    executable: str | None = None
    warnings: list[str] = field(default_factory=list)
    files: list[tuple[str, str]] = field(default_factory=list)
    systemctl: list[list[str]] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """Whether anything changed on the host."""
        quiet = ("unchanged", "kept", "absent")
        return bool(self.systemctl) or any(what not in quiet for _, what in self.files)

    def to_json(self) -> dict[str, Any]:
        return {
            "executable": self.executable,
            "warnings": self.warnings,
            "changed": self.changed,
            "files": [{"path": p, "what": w} for p, w in self.files],
            "systemctl": self.systemctl,
        }


def _put(path: Path, text: str, mode: int) -> bool:
    """Write `text` to `path` through a temporary file renamed over it, unless it already
    holds that text with that mode; whether it was written."""
    same_mode = path.is_file() and (path.stat().st_mode & 0o7777) == mode
    if same_mode and path.read_text(encoding="utf-8", errors="replace") == text:
        return False
    write_atomically(path, text, mode)
    return True


def _mkdir(path: Path, mode: int) -> bool:
    """Make the folder (and its parents); whether it was made."""
    if path.is_dir():
        return False
    path.mkdir(parents=True, mode=mode)
    path.chmod(mode)
    return True


class _Run:
    """The systemctl calls of one install or uninstall, recorded in its report."""

    def __init__(self, layout: Layout, report: Report, run: Systemctl) -> None:
        self.layout, self.report, self._run = layout, report, run

    def __call__(self, *args: str, check: bool = True) -> bool:
        argv = list(args) if self.layout.live else [f"--root={self.layout.root}", *args]
        done = self._run(argv)
        self.report.systemctl.append(["systemctl", *argv])
        if check and done.returncode != 0:
            words = (done.stderr or done.stdout).strip().splitlines()
            raise SystemctlError(
                f"systemctl {' '.join(argv)} exited {done.returncode}"
                + (f": {words[-1][:300]}" if words else "")
            )
        return done.returncode == 0

    def ask(self, *args: str) -> bool:
        """A question (`is-enabled`, `is-active`): not recorded, never an error."""
        return self._run(list(args)).returncode == 0


def _write_files(
    layout: Layout, report: Report, executable: Path, metrics: str, central: str | None
) -> bool:
    """Write the files; whether a unit file changed (systemd must reload it)."""
    unit_changed = False
    texts: list[tuple[Path, str, int, bool]] = [
        (layout.unit, unit_text(layout, executable, metrics), 0o644, True),
        (layout.policy_example, policy_text(layout), 0o644, False),
    ]
    if central is not None:
        texts.insert(1, (layout.dropin, dropin_text(layout, central), 0o644, True))
    for folder, mode in ((layout.config_dir, 0o755), (layout.state_dir, 0o700)):
        if _mkdir(layout.on_disk(folder), mode):
            report.files.append((str(folder), "created"))
    for path, text, mode, is_unit in texts:
        written = _put(layout.on_disk(path), text, mode)
        report.files.append((str(path), "written" if written else "unchanged"))
        unit_changed |= written and is_unit
    settings = layout.on_disk(layout.settings)
    if settings.exists():
        report.files.append((str(layout.settings), "kept"))
    else:
        _put(settings, settings_text(layout), 0o600)
        report.files.append((str(layout.settings), "written"))
    return unit_changed


def install(
    layout: Layout,
    executable: Path,
    *,
    metrics: str,
    central: str | None = None,
    start: bool = True,
    upgrade: bool = False,
    run: Systemctl = systemctl,
) -> Report:
    """Install the agent (see the module docstring); what was done."""
    if layout.live and os.geteuid() != 0:
        raise PrerequisiteError("advisor install writes /etc and runs systemctl: run it as root")
    report = Report(executable=str(executable))
    unsafe = unsafe_for_root(executable) if layout.live else None
    report.warnings += [unsafe] if unsafe else []
    unit_changed = _write_files(layout, report, executable, metrics, central)
    ctl = _Run(layout, report, run)
    if layout.live and unit_changed:
        ctl("daemon-reload")
    # Enabled: the link `systemctl enable` makes for WantedBy=multi-user.target (it points
    # at the host's path, so under another root it resolves to nothing: a link is enough).
    wants = layout.on_disk(layout.unit_dir / "multi-user.target.wants" / UNIT)
    if not wants.is_symlink():
        ctl("enable", UNIT)
    if not layout.live:
        return report
    if start:
        if not ctl.ask("is-active", "--quiet", UNIT):
            ctl("start", UNIT)
        elif unit_changed or upgrade:
            ctl("try-restart", UNIT)  # running: restart it (stopped meanwhile: leave it)
    return report


def uninstall(layout: Layout, *, purge: bool = False, run: Systemctl = systemctl) -> Report:
    """Stop, disable and remove the units `install` wrote; remove the settings, the policy
    example and the state folder (the store) too with `purge`, else keep them."""
    if layout.live and os.geteuid() != 0:
        raise PrerequisiteError("advisor uninstall runs systemctl: run it as root")
    report = Report()
    ctl = _Run(layout, report, run)
    unit = layout.on_disk(layout.unit)
    if unit.exists():
        ctl("disable", *(["--now"] if layout.live else []), UNIT)
    removed = False
    for path in (layout.dropin, layout.unit):
        on_disk = layout.on_disk(path)
        there = on_disk.exists()
        if there:
            on_disk.unlink()
        removed |= there
        report.files.append((str(path), "removed" if there else "absent"))
    dropins = layout.on_disk(layout.dropin.parent)
    if dropins.is_dir() and not any(dropins.iterdir()):
        dropins.rmdir()
    if removed and layout.live:
        ctl("daemon-reload")
        ctl("reset-failed", UNIT, check=False)
    for folder in (layout.config_dir, layout.state_dir):
        on_disk = layout.on_disk(folder)
        if not on_disk.exists():
            continue
        if purge:
            shutil.rmtree(on_disk)
        report.files.append((str(folder), "removed" if purge else "kept"))
    return report
