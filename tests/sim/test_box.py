"""The systemd box itself: it boots the real systemd in about a fifth of a second, runs only
journald, gives units real lifecycles, and leaves the host exactly as it was."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from advisor.execution.bus import UNIT, SystemdBus
from advisor.sim.box import SystemdBox
from advisor.sim.box import unavailable as box_unavailable


def _mounts() -> list[str]:
    return sorted(Path("/proc/self/mountinfo").read_text().splitlines())


def _cgroups() -> list[str]:
    roots = [Path("/sys/fs/cgroup/unified"), Path("/sys/fs/cgroup")]
    root = next(r for r in roots if (r / "cgroup.procs").exists())
    return sorted(str(p) for p in root.rglob("*") if p.is_dir())


def _private_tmp() -> list[str]:
    """What a box could leave in the host's /tmp: systemd's PrivateTmp= folders. (The whole
    listing is no measure: other processes on the host create and remove their own files
    there while the box runs; that the box empties nothing is the marker's test.)"""
    return [name for name in _listing(Path("/tmp")) if name.startswith("systemd-private-")]


def _listing(folder: Path) -> list[str]:
    try:
        return sorted(p.name for p in folder.iterdir())
    except OSError:
        return []


def test_a_box_boots_runs_units_and_leaves_nothing_behind(tmp_path: Path) -> None:
    reason = box_unavailable()
    if reason is not None:
        pytest.skip(f"no systemd box: {reason}")
    before = (
        _mounts(),
        _cgroups(),
        _private_tmp(),
        _listing(Path("/dev")),
        _listing(Path("/var/log/journal")),
        _listing(Path("/run")),
    )
    marker = Path("/tmp") / f"advisor-box-test-{os.getpid()}"
    marker.write_text("the host's /tmp must survive a box")
    try:
        with SystemdBox(tmp_path / "box", hostname="box-test") as box:
            assert box.boot_s is not None and box.boot_s < 10
            active = box.systemctl(
                "list-units", "--no-legend", "--plain", "--state=active", "--type=service"
            ).stdout
            services = sorted(line.split()[0] for line in active.splitlines() if line.strip())
            # Nothing of the host's: only journald and the box's bus proxy (once used).
            assert set(services) <= {"systemd-journald.service", "advisor-box-bus.service"}
            box.install(
                "hello.service",
                "[Service]\nExecStart=/bin/sh -c 'echo hello from the box; sleep 30'\n",
            )
            box.systemctl("start", "hello.service")
            with SystemdBus(box.bus_address) as bus:
                props = bus.properties(bus.unit_path("hello.service"), UNIT)
            assert (props["ActiveState"], props["SubState"]) == ("active", "running")
            assert len(props["InvocationID"]) == 16  # 128 bits, as bytes
            deadline = time.monotonic() + 10
            while "hello from the box" not in box.journalctl("-u", "hello.service", "-o", "cat"):
                assert time.monotonic() < deadline, "the unit's line never reached the journal"
                time.sleep(0.05)
            assert box.journal_files(), "the box's journal is readable from the host"
            assert box.run(["hostname"]).stdout.strip() == "box-test"
        assert marker.exists()
    finally:
        marker.unlink(missing_ok=True)
    after = (
        _mounts(),
        _cgroups(),
        _private_tmp(),
        _listing(Path("/dev")),
        _listing(Path("/var/log/journal")),
        _listing(Path("/run")),
    )
    assert after == before
