"""Real systemd, booted as PID 1 of fresh namespaces: a host to remediate without a host.

``SystemdBox`` boots the installed systemd (252 on Debian 12) inside new PID, mount, UTS, IPC,
network and cgroup namespaces, running nothing but journald and the units the caller installs.
The box shares the host's file system (so a store, a claims folder or a test's tmp_path are the
same files inside and out) except for what it mounts over:

* ``/proc`` (its own), ``/proc/sys`` and ``/sys`` read-only, a fresh ``cgroup2`` on
  ``/sys/fs/cgroup`` rooted at the box's own cgroup (the cgroup namespace);
* a tmpfs ``/run`` and a tmpfs ``/dev`` (null, zero, full, random, urandom, tty, a new devpts,
  shm, a file bound on ``/dev/console``);
* box files over ``/etc/systemd/system`` (the box's unit folder, ``units_dir`` here),
  ``/etc/machine-id``, ``/etc/hostname``, ``/etc/systemd/journald.conf`` (``Storage=volatile``),
  ``/run/log/journal`` (``journal_dir`` here: the journal files are readable from the host) and
  ``/var/log/journal``.

systemd runs in container mode (``container=``) with ``SYSTEMD_UNIT_PATH`` limited to the box's
unit folder and a vendor folder holding links to journald's units and *stand-ins* for the
targets a boot pulls in (sysinit, basic, sockets, local-fs, network, multi-user…), and boots its
own target. Booting the host's default target instead would run the host's sysinit inside the
namespace: ``systemd-tmpfiles --remove`` empties the shared ``/tmp``, sysctl and module loading
touch the shared kernel, and every installed server starts a second time.

Clients on the host reach the box's PID 1 at ``bus_address``: systemd refuses a private-bus
client whose PID it cannot see (one outside the box's PID namespace: "Incoming private
connection from unprivileged client, refusing"), so systemd's own ``systemd-socket-proxyd``,
socket-activated inside the box, carries the connection to ``/run/systemd/private`` (peer to
peer, as root). ``nsenter_argv`` runs a command inside the box's namespaces (``systemctl``,
``journalctl``, an advisor process), where everything is as on a real host.

Stopping SIGKILLs the box's PID 1 (the kernel ends the whole PID namespace), waits for
``unshare`` and removes the box's cgroups depth first: nothing is left on the host.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final

from advisor.sim.boxfiles import SOCKET_PROXYD, write_box_files

SYSTEMD: Final = Path("/lib/systemd/systemd")
CGROUP2_HOST: Final = (Path("/sys/fs/cgroup/unified"), Path("/sys/fs/cgroup"))


class BoxError(RuntimeError):
    """The box could not be booted or driven."""


def unavailable() -> str | None:
    """Why no box can be booted here (None when one can): root, the tools, cgroup2."""
    if os.geteuid() != 0:
        return "booting systemd in namespaces needs root"
    for tool in ("unshare", "nsenter", "mount", "mknod"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    for binary in (SYSTEMD, SOCKET_PROXYD):
        if not binary.exists():
            return f"{binary} is not installed"
    if _cgroup2_root() is None:
        return "no cgroup2 hierarchy mounted at /sys/fs/cgroup(/unified)"
    if Path("/proc/1/comm").read_text().strip() == "systemd" and not os.environ.get(
        "ADVISOR_BOX_ON_SYSTEMD_HOST"
    ):
        return (
            "this host runs systemd as PID 1: the box is for hosts where it does not "
            "(set ADVISOR_BOX_ON_SYSTEMD_HOST=1 to boot one anyway)"
        )
    return None


def _cgroup2_root() -> Path | None:
    for root in CGROUP2_HOST:
        if (root / "cgroup.procs").exists() and (root / "cgroup.subtree_control").exists():
            return root
    return None


@dataclass(frozen=True)
class Unit:
    """A unit file to install in the box."""

    name: str
    text: str


class SystemdBox:
    """One booted systemd. Use as a context manager, or ``start()`` / ``stop()``."""

    def __init__(
        self,
        root: Path,
        *,
        hostname: str = "gpu-box",
        name: str | None = None,
        units: Sequence[Unit] = (),
    ) -> None:
        self.root = root
        self.hostname = hostname
        self.name = name or f"advisor-box-{uuid.uuid4().hex[:8]}"
        self.units_dir = root / "units"
        self.vendor_dir = root / "vendor"
        self.journal_dir = root / "journal"
        self._initial_units = list(units)
        self._launcher: subprocess.Popen[bytes] | None = None
        self._cgroup: Path | None = None
        self.pid: int | None = None  # the box's PID 1, as the host sees it
        self.boot_s: float | None = None
        # A short path: a unix socket's must fit in 108 bytes, a test's folder may not.
        self.bus_socket = Path("/tmp") / f"{self.name}.bus"

    # ------------------------------------------------------------------ lifetime
    def __enter__(self) -> SystemdBox:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _prepare(self) -> None:
        for folder in (self.units_dir, self.vendor_dir, self.journal_dir):
            folder.mkdir(parents=True, exist_ok=True)
        write_box_files(self.root, self.hostname, self.bus_socket)
        for unit in self._initial_units:
            self.install(unit.name, unit.text, reload=False)

    def start(self, timeout_s: float = 20.0) -> None:
        reason = unavailable()
        if reason is not None:
            raise BoxError(f"cannot boot a systemd box: {reason}")
        self._prepare()
        cgroot = _cgroup2_root()
        assert cgroot is not None
        self._cgroup = cgroot / self.name
        self._cgroup.mkdir()
        env = {
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "BOX": str(self.root),
            "SYSTEMD_BIN": str(SYSTEMD),
        }
        began = time.monotonic()
        # The launcher moves itself into the box's cgroup before unshare: the cgroup
        # namespace is rooted there, and so is everything the box's systemd starts.
        script = (
            f'echo $$ > "{self._cgroup}/cgroup.procs" && exec unshare --fork --pid '
            "--mount --uts --ipc --net --cgroup --propagation private "
            f'--kill-child=SIGKILL /bin/bash "{self.root}/init.sh"'
        )
        log = (self.root / "boot.log").open("wb")
        try:
            self._launcher = subprocess.Popen(
                ["/bin/sh", "-c", script],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        finally:
            log.close()
        try:
            self.pid = self._find_pid1(began + timeout_s)
            self._wait_running(began + timeout_s)
        except BaseException:
            self.stop()
            raise
        self.boot_s = time.monotonic() - began

    def _find_pid1(self, deadline: float) -> int:
        assert self._launcher is not None
        launcher = self._launcher.pid
        while time.monotonic() < deadline:
            if self._launcher.poll() is not None:
                raise BoxError(f"the box did not boot: {self._boot_log()}")
            try:
                children = Path(f"/proc/{launcher}/task/{launcher}/children").read_text().split()
            except OSError:
                children = []
            if children:
                return int(children[0])
            time.sleep(0.005)
        raise BoxError("the box did not start in time")

    def _wait_running(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            if self._launcher is not None and self._launcher.poll() is not None:
                raise BoxError(f"the box's systemd exited: {self._boot_log()}")
            if self.bus_socket.exists():
                state = self.systemctl("is-system-running", check=False).stdout.strip()
                if state in ("running", "degraded") and self._bus_answers():
                    return
            time.sleep(0.01)
        raise BoxError(f"the box's systemd did not come up in time: {self._boot_log()}")

    def _bus_answers(self) -> bool:
        """The proxy carries a call (its first connection, right after activation, has been
        seen to get lost once in a while: a fresh one is then tried)."""
        from advisor.execution.bus import BusError, SystemdBus

        with SystemdBus(self.bus_address, peer_to_peer=True) as bus:
            try:
                bus.probe(timeout_s=0.5)
            except BusError:
                return False
        return True

    def _boot_log(self) -> str:
        try:
            text = (self.root / "boot.log").read_text(errors="replace").strip()
        except OSError:
            text = ""
        return text.splitlines()[-1] if text else "no output"

    def stop(self) -> None:
        """SIGKILL the box's PID 1 and clean up after it (safe to call twice)."""
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, 9)
        if self._launcher is not None:
            if self.pid is None and self._launcher.poll() is None:
                self._launcher.kill()
            try:
                self._launcher.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._launcher.kill()
                self._launcher.wait(timeout=10)
        if self._cgroup is not None:
            _remove_cgroup(self._cgroup)
            self._cgroup = None
        self.pid = None
        self._launcher = None
        self.bus_socket.unlink(missing_ok=True)

    # ------------------------------------------------------------------ use
    @property
    def bus_address(self) -> str:
        """Where a client on the host reaches the box's PID 1 (through the proxy)."""
        return f"unix:path={self.bus_socket}"

    def nsenter_argv(self, argv: Sequence[str]) -> list[str]:
        """`argv` run inside the box's namespaces (its PID 1's view of everything)."""
        if self.pid is None:
            raise BoxError("the box is not running")
        return ["nsenter", "-t", str(self.pid), "-m", "-u", "-i", "-n", "-p", "-C", "--", *argv]

    def run(
        self,
        argv: Sequence[str],
        *,
        check: bool = True,
        timeout: float = 60,
        input: bytes | None = None,
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            self.nsenter_argv(argv),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            input=input.decode() if input is not None else None,
        )
        if check and done.returncode != 0:
            raise BoxError(
                f"{' '.join(argv)} exited {done.returncode}: "
                f"{(done.stderr or done.stdout).strip()[-500:]}"
            )
        return done

    def systemctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run(["systemctl", "--no-pager", *args], check=check)

    def show(self, unit: str, *props: str) -> dict[str, str]:
        """`systemctl show -p …` as a dict (for tests' eyes; the advisor reads D-Bus)."""
        out = self.systemctl("show", unit, *(f"--property={p}" for p in props)).stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def install(self, name: str, text: str, *, reload: bool = True) -> Path:
        path = self.units_dir / name
        path.write_text(text)
        if reload and self.pid is not None:
            self.systemctl("daemon-reload")
        return path

    def journal_files(self) -> list[Path]:
        return sorted(self.journal_dir.rglob("*.journal"))

    def journalctl(self, *args: str) -> str:
        """journalctl on the box's journal files, run on the host."""
        done = subprocess.run(
            ["journalctl", f"--directory={self.journal_dir}", "--no-pager", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return done.stdout


def _remove_cgroup(path: Path, deadline_s: float = 10.0) -> None:
    """Remove a cgroup and its children, depth first, once their processes are gone."""
    end = time.monotonic() + deadline_s
    children = sorted(
        (p for p in path.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True
    )
    for child in [*children, path]:
        while True:
            try:
                child.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.02)
