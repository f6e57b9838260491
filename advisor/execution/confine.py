"""Paths read from the store are data: a rollback touches only advisor's own drop-ins.

A recorded drop-in path is accepted only if, with every symlink and `..` resolved, it is
`ROOT/<unit name>.d/<one of advisor's file names>` — so an event saying
`/etc/systemd/system/../../../etc/passwd` (or a symlink planted in a drop-in folder) writes
nothing outside the systemd root.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from advisor.core.errors import InputError
from advisor.core.units import is_unit_name
from advisor.execution.dropins import ADVISOR_DROPIN, HOLD_DROPIN, LEGACY_DROPINS

DEFAULT_ROOT: Final = Path("/etc/systemd/system")
_NAMES: Final = frozenset({ADVISOR_DROPIN, HOLD_DROPIN, *LEGACY_DROPINS})


def confined_dropin(path: Path, root: Path | None) -> Path:
    base = (root or DEFAULT_ROOT).resolve()
    resolved = path.resolve()
    folder = resolved.parent
    if (
        folder.parent != base
        or not folder.name.endswith(".d")
        or not is_unit_name(folder.name[:-2])
        or resolved.name not in _NAMES
    ):
        raise InputError(
            f"{str(path)[:200]}: not one of advisor's drop-ins under {base}; not touched"
        )
    return resolved
