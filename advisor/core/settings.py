"""Defaults the CLI reads once, at the edge: where the store lives, what this host is called."""

from __future__ import annotations

import os
import socket
from pathlib import Path


def default_db_path(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    base = env.get("XDG_DATA_HOME") or str(Path(env.get("HOME", "~")) / ".local" / "share")
    return Path(base).expanduser() / "advisor" / "events.db"


def default_db_url(environ: dict[str, str] | None = None) -> str:
    return f"sqlite:///{default_db_path(environ)}"


def this_host() -> str:
    return socket.gethostname().split(".", 1)[0] or "localhost"
