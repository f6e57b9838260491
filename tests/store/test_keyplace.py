"""One key per store (advisor.store.integrity.keyplace): two stores on one machine never share
a key and heads file; `--key` and the `key` setting choose one; a store whose heads were
signed with the machine's shared key before keeps that key.

Before: every store of a user was signed with one key (`/etc/advisor/host-key` for root) and
its heads appended to one heads file; there was no `key` setting and no `watch --key`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from advisor.store.integrity.headlog import heads_file_for, load_key, store_label
from advisor.store.integrity.heads import SignedHead
from advisor.store.integrity.keyplace import KEYS_FOLDER, place_for, store_key_path
from tests.conftest import advisor_argv
from tests.journal_fixtures import make_journal
from tests.pipeline.test_watch_daemon import _fields, _wait, needs_journal
from tests.store.test_heads import _ingest, _verify


@pytest.fixture
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No key given: the keys go where they would for a user who is not root."""
    monkeypatch.delenv("ADVISOR_KEY", raising=False)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    home = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home / "advisor"


def test_two_stores_get_a_key_and_heads_file_each(config_home: Path, tmp_path: Path) -> None:
    a, b = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    _ingest(a, tmp_path, "a", 5)
    _ingest(b, tmp_path, "b", 7)
    key_a, key_b = (store_key_path(store_label(u) or "", config_home) for u in (a, b))
    assert key_a != key_b and key_a.parent == key_b.parent == config_home / KEYS_FOLDER
    assert key_a.name.endswith(".key") and "-a.db." in key_a.name  # named for a person
    loaded_a, loaded_b = load_key(key_a), load_key(key_b)
    assert loaded_a is not None and loaded_b is not None
    assert loaded_a.public_key != loaded_b.public_key
    assert key_a.stat().st_mode & 0o777 == 0o600
    assert len(heads_file_for(key_a).read_text().splitlines()) == 1
    assert len(heads_file_for(key_b).read_text().splitlines()) == 1
    assert not (config_home / "host-key").exists(), "no shared key made any more"
    for url, key in ((a, loaded_a), (b, loaded_b)):
        code, report = _verify(url, "--heads")
        assert code == 0, report
        assert report["heads"]["public_key"] == key.public_key.hex()
        assert report["heads"]["heads"] == 1


def test_a_store_signed_with_the_shared_key_keeps_it(config_home: Path, tmp_path: Path) -> None:
    shared = config_home / "host-key"
    old, new = f"sqlite:///{tmp_path / 'old.db'}", f"sqlite:///{tmp_path / 'new.db'}"
    os.environ["ADVISOR_KEY"] = str(shared)  # how every store was signed before
    try:
        _ingest(old, tmp_path, "before", 5)
    finally:
        del os.environ["ADVISOR_KEY"]
    key = load_key(shared)
    assert key is not None
    place = place_for(store_label(old))
    assert (place.key, place.heads, place.how) == (shared, heads_file_for(shared), "shared")
    own = store_key_path(store_label(old) or "", config_home)
    assert not own.exists() and not own.is_symlink(), "a reading look creates nothing"
    code, report = _verify(old, "--heads")
    assert code == 0 and report["heads"]["public_key"] == key.public_key.hex()
    _ingest(old, tmp_path, "after", 5)  # a writing command settles it: a link to the shared key
    assert own.is_symlink() and own.resolve() == shared
    assert len(heads_file_for(shared).read_text().splitlines()) == 2
    code, report = _verify(old, "--heads")
    assert code == 0 and report["heads"]["heads"] == 2, report
    assert place_for(store_label(old)).heads == heads_file_for(shared)
    _ingest(new, tmp_path, "fresh", 3)  # a store with no heads yet: its own key
    fresh = load_key(store_key_path(store_label(new) or "", config_home))
    assert fresh is not None and fresh.public_key != key.public_key


def test_the_key_setting_and_watch_key_choose_it(
    config_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = f"sqlite:///{tmp_path / 'k.db'}"
    chosen = tmp_path / "chosen-key"
    settings = tmp_path / "advisor.toml"
    settings.write_text(f'key = "{chosen}"\n')
    monkeypatch.setenv("ADVISOR_CONFIG", str(settings))
    _ingest(db, tmp_path, "set", 4)
    key = load_key(chosen)
    assert key is not None and len(heads_file_for(chosen).read_text().splitlines()) == 1
    assert not (config_home / KEYS_FOLDER).exists()
    code, report = _verify(db, "--heads")
    assert code == 0 and report["heads"]["key"] == str(chosen)


@needs_journal
def test_watch_key_signs_the_heads_with_that_key(
    tmp_path: Path, sqlite_url: str, seed_journal: Path
) -> None:
    entries = [_fields(json.loads(line)) for line in seed_journal.read_text().splitlines()]
    journal = make_journal(tmp_path / "live.journal", entries)
    chosen = tmp_path / "watch-key"
    argv = ["watch", "--journal-file", str(journal), "--no-gpu", "--key", str(chosen)]
    proc = subprocess.Popen(
        advisor_argv(*argv, "--db", sqlite_url), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        _wait(heads_file_for(chosen).exists, proc, "no head signed with --key")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    key = load_key(chosen)
    assert key is not None
    heads = [
        SignedHead.from_json(json.loads(x)) for x in heads_file_for(chosen).read_text().split()
    ]
    assert heads and all(h.valid(key.public_key) for h in heads)
    assert not Path(os.environ["ADVISOR_KEY"]).exists(), "--key, not the key setting"
