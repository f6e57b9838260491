"""advisor's drop-ins for the units under a systemd root: each change planned (its file, from
the unit as systemd loaded it; nothing written), written atomically with advisor's
environment file beside its drop-in, daemon-reloaded and read back — put back as it was when
systemd did not load what was meant — and restored as a step left it (rollback). The hold on
restarts is removed here too (an earlier version's name as well)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from advisor.execution.dropins import (
    ADVISOR_DROPIN,
    HOLD_DROPIN,
    LEGACY_DROPINS,
    env_companion,
    write_atomically,
)
from advisor.execution.primitives import BackendError, ConfigEdit, FileChange, Outcome
from advisor.execution.state import UnitSnapshot


def _same_file(a: str, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a) == b


@dataclass(frozen=True)
class UnitFiles:
    """The drop-in folders under `root`; `reload` is systemd's daemon-reload, `observe`
    reads a unit back."""

    root: Path
    reload: Callable[[], None]
    observe: Callable[[str], UnitSnapshot]

    def folder(self, unit: str) -> Path:
        return self.root / f"{unit}.d"

    def plan(self, unit: str, before: UnitSnapshot, edit: ConfigEdit) -> FileChange:
        """The file `edit` will write, from the unit as loaded; nothing written yet."""
        if before.load_state != "loaded":
            raise BackendError(
                f"{unit}: systemd has no such unit loaded (LoadState={before.load_state})"
            )
        path = self.folder(unit) / edit.dropin
        current = self.read(path)
        return FileChange(path, edit.text(path, current, before), current, current is not None)

    def read(self, path: Path) -> str | None:
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as e:
            raise BackendError(f"{path}: {e.strerror}") from e

    def apply(
        self, unit: str, change: FileChange, mismatch: Callable[[UnitSnapshot], str | None]
    ) -> Outcome:
        """Write the drop-in, reload, read back; put the old file back if systemd did not
        load what was intended."""
        self.write(change.path, change.text)
        self.reload()
        after = self.observe(unit)
        problem = mismatch(after)
        if (
            problem is None
            and change.text is not None
            and not any(_same_file(p, change.path) for p in after.drop_in_paths)
        ):
            problem = (
                f"systemd did not load {change.path} (DropInPaths: "
                f"{', '.join(after.drop_in_paths) or 'none'})"
            )
        if problem is None and after.need_daemon_reload:
            problem = "systemd still says the unit needs a daemon-reload"
        if problem is not None:
            self.write(change.path, change.previous)
            self.reload()
            raise BackendError(
                f"{unit}: after daemon-reload systemd shows {problem}; "
                f"{change.path} was put back as it was"
            )
        action = "removed" if change.text is None else "wrote"
        return Outcome(f"{action} {change.path}; daemon-reload; systemd loaded it", after)

    def write(self, path: Path, text: str | None) -> None:
        """Write (or, for None, remove) a drop-in; advisor's own drop-in takes its
        environment file with it — written before the drop-in that names it, removed after
        the drop-in that no longer does."""
        companion, env = env_companion(path, text) if path.name == ADVISOR_DROPIN else (None, None)
        if companion is not None and env is not None:
            write_atomically(companion, env)
        if text is None:
            path.unlink(missing_ok=True)
        else:
            write_atomically(path, text)
        if companion is not None and env is None:
            companion.unlink(missing_ok=True)

    def remove_hold(self, unit: str) -> Path | None:
        """Remove advisor's hold drop-in (an earlier version's too) and reload; None when
        there was none."""
        folder = self.folder(unit)
        holds = [folder / name for name in (HOLD_DROPIN, LEGACY_DROPINS[1])]
        present = [hold for hold in holds if hold.exists()]
        if not present:
            return None
        for hold in present:
            hold.unlink()
        self.reload()
        return present[0]

    def restore(self, change: FileChange) -> Outcome:
        """Put a drop-in back as it was before a step (`previous`), reload, read back."""
        path = change.path
        unit = path.parent.name[:-2] if path.parent.name.endswith(".d") else ""
        self.write(path, change.previous)
        self.reload()
        detail = f"restored {path} as it was" if change.had_previous else f"removed {path}"
        if unit:
            after = self.observe(unit)
            still = any(_same_file(p, path) for p in after.drop_in_paths)
            if still != change.had_previous or after.need_daemon_reload:
                raise BackendError(
                    f"{unit}: after daemon-reload systemd does not show {path} as restored"
                )
            return Outcome(f"{detail}; daemon-reload", after)
        return Outcome(f"{detail}; daemon-reload")
