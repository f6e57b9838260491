"""Which systemd unit a process belongs to, from /proc/PID/cgroup (PIDs as NVML reports them)."""

from __future__ import annotations

import re
from pathlib import Path

# How much of /proc/<pid>/cgroup and /proc/<pid>/comm is read: both are tiny in practice.
_CGROUP_READ_LIMIT = 64 * 1024
_COMM_READ_LIMIT = 256

# A systemd unit name: at most 255 characters of [A-Za-z0-9:_.\-@] (systemd escapes the rest as
# \xNN). Only service and scope units contain processes.
_UNIT_RE = re.compile(r"[A-Za-z0-9:_.\\@-]{1,247}\.(?:service|scope)")
# cgroup v2 appends this to the path of a cgroup that has been removed (process outlived its unit).
_DELETED_SUFFIX = " (deleted)"


def _read_bounded(path: Path, limit: int) -> bytes | None:
    """Up to ``limit`` bytes of a file, or None when it cannot be read (gone, permission, ...)."""
    try:
        with path.open("rb") as f:
            return f.read(limit)
    except (OSError, ValueError):
        return None


def _unit_in_cgroup_path(path: str) -> str | None:
    if path.endswith(_DELETED_SUFFIX):
        path = path[: -len(_DELETED_SUFFIX)]
    for component in reversed(path.split("/")):
        if _UNIT_RE.fullmatch(component):
            return component
    return None


def _unit_in_cgroup_file(text: str) -> str | None:
    v2: str | None = None
    v1_systemd: str | None = None
    for line in text.split("\n"):
        # hierarchy-ID:controller-list:cgroup-path (the path itself may contain ':')
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts[0], parts[1], parts[2]
        if hierarchy == "0" and controllers == "" and v2 is None:
            v2 = path
        elif controllers == "name=systemd" and v1_systemd is None:
            v1_systemd = path
    # The v1 name=systemd hierarchy is systemd's own view; on a hybrid system it is authoritative.
    for candidate in (v1_systemd, v2):
        if candidate is not None:
            unit = _unit_in_cgroup_path(candidate)
            if unit is not None:
                return unit
    return None


def unit_for_pid(pid: int, proc_root: Path = Path("/proc")) -> str | None:
    """The systemd unit (``*.service`` / ``*.scope``) whose cgroup holds ``pid``.

    The innermost unit in the cgroup path wins (``/user.slice/.../user@1000.service/app.slice/
    foo.service`` gives ``foo.service``; ``/system.slice/vllm.service/payload`` gives
    ``vllm.service``). None when the process is gone, its cgroup file is unreadable, or it is in no
    unit (the root cgroup, a bare ``/docker/<id>`` cgroup). Never raises for a vanished PID.
    """
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return None
    raw = _read_bounded(proc_root / str(pid) / "cgroup", _CGROUP_READ_LIMIT)
    if raw is None:
        return None
    return _unit_in_cgroup_file(raw.decode("utf-8", errors="replace"))


def comm_for_pid(pid: int, proc_root: Path) -> str | None:
    """The process name (``comm``: 15 bytes at most; vLLM's engine shows ``VLLM::EngineCor``)."""
    if pid <= 0:
        return None
    raw = _read_bounded(proc_root / str(pid) / "comm", _COMM_READ_LIMIT)
    if raw is None:
        return None
    name = raw.decode("utf-8", errors="replace").rstrip("\n").replace("\x00", "")
    return name or None
