"""Which key signs a store's heads, and which heads file they go to: one key per store.

Two stores on one machine (the daemon's, a test store, a second service's) never share a key
and heads file. The key that signs a store's heads is, first found:

1. the key given: `--key PATH`, else the `key` setting (`$ADVISOR_KEY`, `key = "…"` in the
   settings file) — its heads file beside it (`PATH.heads`);
2. the store's own key, `DIR/keys/NAME.DIGEST.key` (NAME: the store's label made safe for a
   file name, DIGEST: the first 16 hex digits of its SHA-256), heads in `….key.heads`;
   `DIR` is /etc/advisor for root, `$XDG_CONFIG_HOME/advisor` for anyone else;
3. for a store whose heads were signed before keys were kept per store: the machine's shared
   key `DIR/host-key` (and `DIR/host-key.heads`), as long as that file holds a head of this
   store signed by that key. The first writing command then makes the store's own key a
   symbolic link to the shared key, so the store keeps that key (and its heads file) from
   then on without reading the heads file again. Its older heads still verify, and a central
   store that has the shared key registered for the host goes on taking its heads.

A store without heads yet gets its own key (created by the first writing command). Reading
commands (`verify --heads`, `ship`) create nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import orjson

from advisor.store.integrity.headlog import KEY_ENV, MAX_HEAD_LINE, heads_file_for, load_key
from advisor.store.integrity.heads import SignedHead

KEYS_FOLDER: Final = "keys"
SHARED_KEY: Final = "host-key"
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+")
_NAME_LEN: Final = 48


@dataclass(frozen=True)
class KeyPlace:
    """Where a store's key and heads file are; `link`: the store's own key path to make a
    link to the shared key (a store migrated from the shared key, not settled yet)."""

    key: Path
    heads: Path
    how: str  # "given", "store", "shared"
    link: Path | None = None


def key_folder(environ: Mapping[str, str] | None = None) -> Path:
    """/etc/advisor for root, `$XDG_CONFIG_HOME/advisor` (`~/.config/advisor`) for others."""
    env = os.environ if environ is None else environ
    if os.geteuid() == 0:
        return Path("/etc/advisor")
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME", "~")) / ".config")
    return Path(base).expanduser() / "advisor"


def store_key_path(label: str, folder: Path) -> Path:
    """The store's own key under `folder`: `keys/NAME.DIGEST.key`."""
    digest = hashlib.sha256(label.encode()).hexdigest()[:16]
    name = _UNSAFE.sub("-", label.partition("://")[2] or label).strip("-.")[-_NAME_LEN:]
    name = name.lstrip("-.")
    return folder / KEYS_FOLDER / (f"{name}.{digest}.key" if name else f"{digest}.key")


def signed_with(label: str, key_path: Path) -> bool:
    """Whether the heads file beside `key_path` holds a head of store `label` signed by the
    key there (a line at a time; only lines naming the store are parsed)."""
    key = load_key(key_path)
    if key is None:
        return False
    needle = orjson.dumps(label)
    try:
        with open(heads_file_for(key_path), "rb") as f:
            for line in f:
                if len(line) > MAX_HEAD_LINE or needle not in line:
                    continue
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    obj = orjson.loads(line)
                    head = SignedHead.from_json(obj) if isinstance(obj, dict) else None
                    if head and head.store == label and head.public_key == key.public_key:
                        return True
    except OSError:
        return False
    return False


def place_for(
    label: str | None, given: Path | None = None, environ: Mapping[str, str] | None = None
) -> KeyPlace:
    """Where the key and heads of the store named `label` are (see the module docstring);
    `given`: `--key` or the `key` setting. Creates nothing."""
    env = os.environ if environ is None else environ
    if given is None and env.get(KEY_ENV):
        given = Path(env[KEY_ENV])
    if given is not None:
        path = given.expanduser()
        return KeyPlace(path, heads_file_for(path), "given")
    folder = key_folder(env)
    shared = folder / SHARED_KEY
    if label is None:  # an in-memory store: no heads of its own
        return KeyPlace(shared, heads_file_for(shared), "shared")
    own = store_key_path(label, folder)
    if own.is_symlink():  # settled on the shared key
        return KeyPlace(own, heads_file_for(own.resolve()), "shared")
    if own.exists():
        return KeyPlace(own, heads_file_for(own), "store")
    if signed_with(label, shared):
        return KeyPlace(shared, heads_file_for(shared), "shared", link=own)
    return KeyPlace(own, heads_file_for(own), "store")


def settle(place: KeyPlace) -> None:
    """For a writing command: a store migrated from the shared key keeps it (its own key made
    a link to the shared one). Best effort: where the link cannot be made, the heads file is
    read again next time."""
    if place.link is None:
        return
    with contextlib.suppress(OSError):
        place.link.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.symlink(os.path.relpath(place.key, place.link.parent), place.link)
