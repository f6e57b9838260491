"""Unit names as systemctl takes them.

``systemctl status vllm-minimax-m25`` means ``vllm-minimax-m25.service``: a name without a unit
type suffix gets ``.service`` (systemd's ``unit_name_mangle``). Every command that takes a
SERVICE accepts ``UNIT`` or ``HOST/UNIT`` and mangles the unit part the same way, so what an
operator types finds what the store holds.
"""

from __future__ import annotations

import re
from typing import Final

UNIT_TYPES: Final = ("service", "scope", "socket", "target", "timer", "mount", "slice", "path",
                     "swap", "automount", "device")
_UNIT_NAME = re.compile(
    r"^[A-Za-z0-9:_\\][A-Za-z0-9:_.\\@-]{0,240}\.(?:" + "|".join(UNIT_TYPES) + r")$")
_GLOB = re.compile(r"[*?\[]")


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
