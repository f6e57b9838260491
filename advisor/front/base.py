"""What every part of the front door shares: the store and the settings an `Advisor` works
with, how a store is opened for it, and the backend and notices its actions go through.

Nothing heavy is imported here at import time: `advisor --help` imports the front door."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from advisor.core.settings import Settings
    from advisor.execution.backends import Backend
    from advisor.execution.notices import Notices
    from advisor.store import EventStore


def open_store(url: str, *, read_only: bool = False, shared_schema: bool = False) -> EventStore:
    """The store at `url` (`advisor.store.open_store`): `read_only` refuses a store that does
    not exist and writes nothing; `shared_schema` creates the tables beside others."""
    from advisor.store import open_store as open_

    return open_(url, read_only=read_only, shared_schema=shared_schema)


def store_failure(e: Exception) -> str:
    """A store's (SQLAlchemy's) error as one line, without its SQL echo and background link:
    what a command says of a store that failed under it."""
    from advisor.store.engine import first_line

    return first_line(e)


def backend_for(
    name: str,
    systemd_root: Path,
    gpu_twin: Path | None = None,
    host: str | None = None,
    *,
    notices: Notices | None = None,
) -> Backend | None:
    """The backend to act through (`systemd`, its `notify` steps telling `notices`); None
    for a dry run (`dry-run`)."""
    from advisor.pipeline.remediate import backend_for as backend_

    return backend_(name, systemd_root, gpu_twin, host, notices=notices)


def human() -> str:
    """Who approves or rejects at this terminal, as the actions record it."""
    from advisor.pipeline.remediate import human as human_

    return human_()


class Front:
    """The store (None for the operations that need none: classify, rules, the model; or a
    function that opens it, called when an operation first needs it, so that what is refused
    before the store is opened still is) and the settings (None where the caller brings its
    own backend, as the console does)."""

    def __init__(
        self,
        store: EventStore | Callable[[], EventStore] | None,
        settings: Settings | None = None,
    ) -> None:
        self._store = store
        self._settings = settings

    @property
    def store(self) -> EventStore:
        """The store, opened now if it was given as a function that opens it."""
        if self._store is None:
            raise RuntimeError("this operation needs a store: Advisor(store, settings)")
        if callable(self._store):
            self._store = self._store()
        return self._store

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            raise RuntimeError("this operation needs the settings: Advisor(store, settings)")
        return self._settings

    def notices(self) -> Notices:
        """Whom to tell, from the settings' `[notify]` section."""
        from advisor.execution.notices import Notices

        return Notices(self.settings.notify)

    def backend(self, name: str, systemd_root: Path) -> Backend | None:
        """The backend to act through, as `advisor remediate` builds it: the settings' GPU
        twin and host, its `notify` steps telling the settings' targets; None for `dry-run`."""
        conf = self.settings
        return backend_for(name, systemd_root, conf.gpu_twin, conf.host, notices=self.notices())

    def systemd_backend(self, systemd_root: Path) -> Backend:
        """The systemd backend, with the settings' host alone (no GPU twin, no notices): what
        a rollback puts the drop-in back through."""
        backend = backend_for("systemd", systemd_root, host=self.settings.host)
        assert backend is not None
        return backend
