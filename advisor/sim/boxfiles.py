"""The files a systemd box boots from: its vendor folder (links to journald's units, stand-ins
for the targets a boot pulls in, its own target and the bus proxy's units), journald's
settings, its machine id and hostname, and the script PID 1 runs before it becomes systemd."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Final

__all__ = [
    "BUS_PROXY",
    "DEVICES",
    "LINKED",
    "SOCKET_PROXYD",
    "STAND_INS",
    "TARGET",
    "VENDOR_UNITS",
    "write_box_files",
]

VENDOR_UNITS: Final = Path("/lib/systemd/system")
TARGET: Final = "advisor-box.target"
BUS_PROXY: Final = "advisor-box-bus"
SOCKET_PROXYD: Final = Path("/lib/systemd/systemd-socket-proxyd")
# journald and what it needs, linked from the host's vendor folder.
LINKED: Final = (
    "systemd-journald.service",
    "systemd-journald.socket",
    "systemd-journald-dev-log.socket",
    "systemd-journald-audit.socket",
    "systemd-journal-flush.service",
    "poweroff.target",
    "systemd-poweroff.service",
    "shutdown.target",
    "final.target",
    "umount.target",
    "exit.target",
    "systemd-exit.service",
)
# Targets a boot pulls in, replaced by stand-ins that pull in nothing.
STAND_INS: Final = (
    "sysinit.target",
    "basic.target",
    "sockets.target",
    "timers.target",
    "paths.target",
    "slices.target",
    "local-fs.target",
    "local-fs-pre.target",
    "swap.target",
    "network.target",
    "network-online.target",
    "network-pre.target",
    "multi-user.target",
    "remote-fs.target",
    "nss-lookup.target",
    "nss-user-lookup.target",
    "time-sync.target",
    "cryptsetup.target",
    "emergency.target",
    "rescue.target",
    "graphical.target",
)
DEVICES: Final = (
    ("null", 1, 3),
    ("zero", 1, 5),
    ("full", 1, 7),
    ("random", 1, 8),
    ("urandom", 1, 9),
    ("tty", 5, 0),
)

# PID 1 of the new namespaces runs this, then becomes systemd. $BOX is the box folder.
_INIT: Final = r"""set -eu
mount -t proc proc /proc
mount --bind /proc/sys /proc/sys
mount -o remount,bind,ro /proc/sys
umount -R /sys/fs/cgroup
mount --bind /sys /sys
mount -o remount,bind,ro /sys
mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup
mount -t tmpfs -o mode=755,nosuid,nodev tmpfs /run
mkdir -p /run/log/journal /run/systemd
mount --bind "$BOX/journal" /run/log/journal
mount -t tmpfs -o mode=755,nosuid tmpfs /dev
DEVICES
mkdir -p /dev/pts /dev/shm
mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts /dev/pts
ln -s pts/ptmx /dev/ptmx
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /dev/shm
ln -s /proc/self/fd /dev/fd
ln -s /proc/self/fd/0 /dev/stdin
ln -s /proc/self/fd/1 /dev/stdout
ln -s /proc/self/fd/2 /dev/stderr
: > /dev/console
mount --bind "$BOX/console" /dev/console
mount --bind "$BOX/units" /etc/systemd/system
mount --bind "$BOX/machine-id" /etc/machine-id
mount --bind "$BOX/hostname" /etc/hostname
mount --bind "$BOX/journald.conf" /etc/systemd/journald.conf
mkdir -p "$BOX/var-journal"
mount --bind "$BOX/var-journal" /var/log/journal
hostname "$(cat "$BOX/hostname")"
export container=advisor-box
export SYSTEMD_UNIT_PATH="$BOX/units:/run/systemd/transient:$BOX/vendor"
exec "$SYSTEMD_BIN" --system --unit=advisor-box.target --log-target=journal --show-status=no
"""


def write_box_files(root: Path, hostname: str, bus_socket: Path) -> None:
    """Write the box's files under `root` (its units/, vendor/ and journal/ folders exist)."""
    vendor_dir = root / "vendor"
    (root / "console").write_bytes(b"")
    (root / "machine-id").write_text(uuid.uuid4().hex + "\n")
    (root / "hostname").write_text(hostname + "\n")
    (root / "journald.conf").write_text(
        "[Journal]\nStorage=volatile\nRateLimitBurst=0\nRuntimeMaxUse=256M\n"
        "ForwardToSyslog=no\nForwardToConsole=no\nForwardToWall=no\n"
    )
    for name in LINKED:
        link = vendor_dir / name
        if not link.exists() and (VENDOR_UNITS / name).exists():
            link.symlink_to(VENDOR_UNITS / name)
    for name in STAND_INS:
        (vendor_dir / name).write_text(f"[Unit]\nDescription=Stand-in for {name} (advisor box)\n")
    (vendor_dir / TARGET).write_text(
        "[Unit]\nDescription=advisor box\nRequires=basic.target systemd-journald.service\n"
        f"Wants={BUS_PROXY}.socket\nAfter=basic.target systemd-journald.service "
        f"{BUS_PROXY}.socket\n"
    )
    # systemd refuses private-bus clients whose PID it cannot see (a process outside the
    # box's PID namespace): its own socket proxy, inside the box, carries the host's
    # connections to the private socket.
    (vendor_dir / f"{BUS_PROXY}.socket").write_text(
        "[Unit]\nDescription=The box's private D-Bus socket, for clients on the host\n"
        f"DefaultDependencies=no\n[Socket]\nListenStream={bus_socket}\n"
        "SocketMode=0600\n"
    )
    (vendor_dir / f"{BUS_PROXY}.service").write_text(
        "[Unit]\nDescription=Proxy to systemd's private D-Bus socket\n"
        "DefaultDependencies=no\n[Service]\n"
        f"ExecStart={SOCKET_PROXYD} /run/systemd/private\n"
    )
    devices = "\n".join(f"mknod -m 666 /dev/{n} c {a} {b}" for n, a, b in DEVICES)
    (root / "init.sh").write_text(_INIT.replace("DEVICES\n", devices + "\n"))
