"""Unit names as systemctl takes them.

``systemctl status vllm-minimax-m25`` means ``vllm-minimax-m25.service``: a name without a unit
type suffix gets ``.service`` (systemd's ``unit_name_mangle``). Every command that takes a
SERVICE accepts ``UNIT`` or ``HOST/UNIT`` and mangles the unit part the same way, so what an
operator types finds what the store holds.
"""

from __future__ import annotations

import re
from typing import Final

from advisor.core.errors import InputError

UNIT_TYPES: Final = (
    "service",
    "scope",
    "socket",
    "target",
    "timer",
    "mount",
    "slice",
    "path",
    "swap",
    "automount",
    "device",
)
_UNIT_NAME = re.compile(
    r"^[A-Za-z0-9:_\\][A-Za-z0-9:_.\\@-]{0,240}\.(?:" + "|".join(UNIT_TYPES) + r")$"
)
_GLOB = re.compile(r"[*?\[]")
# A host as streams hold it: what journald's _HOSTNAME or --host gave, without control
# characters or slashes.
_HOST_NAME = re.compile(r"^[^\x00-\x1f\x7f/\s][^\x00-\x1f\x7f/]{0,199}$")
# Units that are a user's (or the system's) service manager, not a server: acting on one
# would stop every unit of that user.
_MANAGERS: Final = re.compile(r"^(?:user@\d+|user-runtime-dir@\d+|systemd-[a-z-]+|dbus)\.service$")
EXAMPLE: Final = "UNIT or HOST/UNIT, e.g. vllm-minimax-m25 or gpu-node-07/vllm-minimax-m25.service"


def is_unit_name(name: str) -> bool:
    """A name systemd would accept as a unit (no globs, no paths, no shell)."""
    return bool(_UNIT_NAME.match(name)) and ".." not in name


def has_type_suffix(name: str) -> bool:
    return name.rpartition(".")[2] in UNIT_TYPES and "." in name


def mangle(name: str) -> str:
    """`vllm-x` → `vllm-x.service`; a name with a unit type, or a glob, is kept as it is."""
    if not name or has_type_suffix(name) or _GLOB.search(name):
        return name
    return f"{name}.service"


def split_service(text: str) -> tuple[str | None, str]:
    """`HOST/UNIT` or `UNIT` → (host or None, the unit name mangled)."""
    host, _, unit = text.rpartition("/")
    return host or None, mangle(unit)


def parse_service(text: str) -> tuple[str | None, str]:
    """A SERVICE as an operator types it, `UNIT` or `HOST/UNIT`, as (host or None, the unit
    mangled); InputError naming the input when it is not a unit (a glob, a path, a blank)."""
    host, unit = split_service(text)
    if not is_unit_name(unit):
        raise InputError(f"{text!r} is not a unit name ({EXAMPLE})")
    if host is not None and not _HOST_NAME.match(host):
        raise InputError(f"{text!r}: {host!r} is not a host name ({EXAMPLE})")
    return host, unit


def service_host(service: str, from_service: str | None, host: str | None) -> str | None:
    """The host of `HOST/UNIT` and of a --host option together; InputError if they differ."""
    if from_service is not None and host is not None and from_service != host:
        raise InputError(f"{service!r} names host {from_service!r} but --host says {host!r}")
    return from_service or host


def not_a_server(name: str) -> str | None:
    """Why the unit `name` is never diagnosed into an incident, planned for or acted on
    (None: it may be). A server is a `.service`: a scope (a login session, `session-3.scope`,
    whatever its processes log), a slice, a socket, a timer is not one, nor is a service
    manager or a part of systemd (`user@1000.service`, `systemd-journald.service`). Their
    lines are evidence at most. A name with no unit type (lines filed under the sender's
    identifier) is no unit at all: what acts on units refuses it as such."""
    kind = name.rpartition(".")[2] if has_type_suffix(name) else None
    if kind is not None and kind != "service":
        return (
            f"{name[:80]} is a {kind} unit, not a server's service: advisor does not diagnose, "
            "plan for or act on it (its lines are evidence at most)"
        )
    if _MANAGERS.match(name):
        return (
            f"{name} is a service manager or a part of systemd, not a server: advisor does "
            "not act on it (a user's own units are not advisor's to change)"
        )
    return None
