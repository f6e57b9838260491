"""Reading never creates, and reads where it cannot write; bad arguments and altered rows
give one-line errors, not tracebacks."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine, text

from advisor.cli.main import cli
from advisor.store import EventStore
from tests.conftest import PG_ENV, run_advisor

Opener = Callable[[str], EventStore]
READERS = (
    ["verify"],
    ["status"],
    ["events", "--limit", "3"],
    ["explain", "vllm-minimax-m25"],
    ["runs"],
    ["incidents"],
    ["stats"],
    ["query", "SELECT count(*) FROM events"],
)


def invoke(*args: str) -> click.testing.Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def one_line_error(result: click.testing.Result | subprocess.CompletedProcess[bytes]) -> str:
    out = result.stderr if isinstance(result.stderr, str) else result.stderr.decode()
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1, out
    assert lines[0].startswith("Error: "), out
    assert "Traceback" not in out
    return lines[0]


def digest(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file()
    }


@pytest.fixture
def seeded(tmp_path: Path, seed_journal: Path) -> Path:
    """A SQLite store holding the seed story, ingested and diagnosed by the CLI."""
    folder = tmp_path / "store"
    folder.mkdir()
    db = folder / "events.db"
    done = invoke("ingest", "journal", "--file", str(seed_journal), "--db", f"sqlite:///{db}")
    assert done.exit_code == 0, done.output
    return db


@pytest.mark.parametrize("args", READERS, ids=lambda a: a[0])
def test_a_reading_command_on_a_mistyped_path_creates_nothing(
    tmp_path: Path, args: list[str]
) -> None:
    missing = tmp_path / "no-such-folder" / "events.db"
    result = invoke(*args, "--db", f"sqlite:///{missing}")
    assert result.exit_code == 1
    assert "does not exist" in one_line_error(result)
    assert list(tmp_path.iterdir()) == []


def test_verify_of_a_deleted_store_fails_instead_of_verifying_nothing(seeded: Path) -> None:
    assert invoke("verify", "--db", f"sqlite:///{seeded}").exit_code == 0
    for p in seeded.parent.iterdir():
        p.unlink()
    result = invoke("verify", "--db", f"sqlite:///{seeded}")
    assert result.exit_code != 0
    assert "verified" not in result.output
    assert not seeded.exists()


@pytest.mark.parametrize("args", READERS, ids=lambda a: a[0])
def test_reading_commands_leave_the_store_file_as_it_was(seeded: Path, args: list[str]) -> None:
    before = digest(seeded.parent)["events.db"]
    result = invoke(*args, "--db", f"sqlite:///{seeded}")
    assert result.exit_code == 0, result.output
    assert digest(seeded.parent)["events.db"] == before


def test_a_file_that_is_not_a_store_is_refused_by_readers_and_writers(tmp_path: Path) -> None:
    other = tmp_path / "app.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    before = other.read_bytes()
    assert "not an advisor store" in one_line_error(invoke("status", "--db", f"sqlite:///{other}"))
    written = invoke("db", "upgrade", "--db", f"sqlite:///{other}")
    assert written.exit_code == 1
    assert "1 other tables (users)" in one_line_error(written)
    assert other.read_bytes() == before
    assert invoke("db", "upgrade", "--shared-schema", "--db", f"sqlite:///{other}").exit_code == 0
    assert invoke("verify", "--db", f"sqlite:///{other}").exit_code == 0


def test_an_older_schema_is_named_with_the_command_that_upgrades_it(seeded: Path) -> None:
    with sqlite3.connect(seeded) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0006'")
    result = invoke("status", "--db", f"sqlite:///{seeded}")
    assert result.exit_code == 1
    line = one_line_error(result)
    assert "revision 0006" in line and "advisor db upgrade" in line


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)")
def test_a_store_on_read_only_media_is_verified_and_read(seeded: Path) -> None:
    """A read-only bind mount in a private mount namespace (as root, where file modes do not
    stop writes): SQLite cannot keep its WAL index there, so the store opens immutable."""
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"no mount namespaces here: {probe.stderr.decode().strip()}")
    folder = seeded.parent
    for p in folder.glob("events.db-*"):
        p.unlink()  # a store closed cleanly: no WAL or index beside it
    url = f"sqlite:///{seeded}"
    script = " && ".join(
        [
            f"mount --bind -o ro {folder} {folder}",
            f"! touch {folder}/probe 2>/dev/null",
            f"{sys.executable} -m advisor verify --db {url}",
            f"{sys.executable} -m advisor status --db {url} --json",
            f"{sys.executable} -m advisor explain vllm-minimax-m25 --db {url}",
            f"{sys.executable} -m advisor events --limit 1 --db {url}",
        ]
    )
    done = subprocess.run(
        ["unshare", "--mount", "sh", "-c", script], capture_output=True, timeout=120, check=False
    )
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert "hash chain intact" in out
    assert "wedged_stop" in out
    assert sorted(p.name for p in folder.iterdir()) == ["events.db"]


def _on_read_only_media(folder: Path, command: str, tmp: Path) -> str:
    """`command` run where `folder` is a read-only bind mount (a private mount namespace),
    temporary files under `tmp`: its stdout and stderr."""
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True, check=False)
    if shutil.which("unshare") is None or probe.returncode != 0:
        pytest.skip("no mount namespaces here")
    script = f"mount --bind -o ro {folder} {folder} && ! touch {folder}/probe 2>/dev/null"
    done = subprocess.run(
        ["unshare", "--mount", "sh", "-c", f"{script} && {command}"],
        capture_output=True,
        timeout=120,
        check=False,
        env={**os.environ, "TMPDIR": str(tmp)},
    )
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode() + done.stderr.decode()


def test_query_and_stats_read_a_store_on_read_only_media(seeded: Path, tmp_path: Path) -> None:
    """DuckDB's SQLite cannot open a WAL store where it cannot create the WAL index, and
    takes no immutable URI: it reads a private copy, made by SQLite from the immutable file
    and removed afterwards."""
    folder = seeded.parent
    for p in folder.glob("events.db-*"):
        p.unlink()  # a store closed cleanly: no WAL or index beside it
    before = digest(folder)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    url = f"sqlite:///{seeded}"
    sql = "SELECT count(*) AS n FROM log_lines"
    out = _on_read_only_media(
        folder, f"{sys.executable} -m advisor query '{sql}' --json --verbose --db {url}", tmp
    )
    assert '"n": 86' in out and "private copy" in out
    out = _on_read_only_media(folder, f"{sys.executable} -m advisor stats --json --db {url}", tmp)
    assert json.loads(out)["crashes_by_label"][0]["label"] in ("sampler_warmup_oom", "wedged_stop")
    assert digest(folder) == before and list(tmp.iterdir()) == []


def test_read_only_media_with_an_unmerged_wal_is_refused_not_misread(seeded: Path) -> None:
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True, check=False)
    if shutil.which("unshare") is None or probe.returncode != 0:
        pytest.skip("no mount namespaces here")
    folder = seeded.parent
    # A WAL that holds events the main file does not: what a crashed host leaves behind.
    keep = sqlite3.connect(seeded)
    keep.execute("PRAGMA wal_autocheckpoint=0")
    keep.execute("CREATE TABLE scratch (x)")
    wal = folder / "events.db-wal"
    copy = folder.parent / "copy"
    copy.mkdir()
    for p in folder.iterdir():
        shutil.copy(p, copy / p.name)
    keep.close()
    (copy / "events.db-shm").unlink()
    assert (copy / "events.db-wal").stat().st_size > 0, wal
    script = (
        f"mount --bind -o ro {copy} {copy} && "
        f"{sys.executable} -m advisor verify --db sqlite:///{copy / 'events.db'}"
    )
    done = subprocess.run(
        ["unshare", "--mount", "sh", "-c", script], capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 1
    assert "write-ahead log" in one_line_error(done)


# ------------------------------------------------------------------------- PostgreSQL


@pytest.fixture
def pg_schema() -> Iterator[tuple[str, Callable[[str], list[str]]]]:
    """An empty PostgreSQL schema (its URL) and a function listing its tables."""
    import os

    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(f"{PG_ENV} is not set")
    schema = f"ro_{uuid.uuid4().hex[:10]}"
    admin = create_engine(base)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))

    def tables(_: str = "") -> list[str]:
        with admin.connect() as conn:
            return list(
                conn.execute(
                    text(
                        "SELECT table_name FROM information_schema.tables WHERE table_schema = :s "
                        "ORDER BY 1"
                    ),
                    {"s": schema},
                ).scalars()
            )

    sep = "&" if "?" in base else "?"
    try:
        yield f"{base}{sep}options=-csearch_path%3D{schema}", tables
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.mark.parametrize("args", READERS, ids=lambda a: a[0])
def test_reading_a_postgresql_schema_without_a_store_creates_nothing(
    pg_schema: tuple[str, Callable[[], list[str]]], args: list[str]
) -> None:
    url, tables = pg_schema
    result = invoke(*args, "--db", url)
    assert result.exit_code == 1
    assert "not an advisor store" in one_line_error(result)
    assert tables() == []


def test_a_postgresql_schema_with_other_tables_is_not_written_into_unless_asked(
    pg_schema: tuple[str, Callable[[], list[str]]], seed_journal: Path
) -> None:
    url, tables = pg_schema
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE invoices (id int)"))
    engine.dispose()
    result = invoke("ingest", "journal", "--file", str(seed_journal), "--db", url)
    assert result.exit_code == 1
    assert "other tables (invoices)" in one_line_error(result)
    assert tables() == ["invoices"]
    assert invoke("db", "upgrade", "--shared-schema", "--db", url).exit_code == 0
    assert invoke("ingest", "journal", "--file", str(seed_journal), "--db", url).exit_code == 0
    assert "events" in tables() and "invoices" in tables()


def test_postgresql_readers_run_read_only_transactions(
    pg_schema: tuple[str, Callable[[], list[str]]], seed_journal: Path
) -> None:
    from advisor.store import open_store

    url, _tables = pg_schema
    assert invoke("ingest", "journal", "--file", str(seed_journal), "--db", url).exit_code == 0
    store = open_store(url, read_only=True)
    try:
        with store.connect() as conn:
            assert conn.execute(text("SHOW transaction_read_only")).scalar() == "on"
            with pytest.raises(Exception, match="read-only transaction"):
                conn.execute(text("CREATE TABLE sneaky (x int)"))
    finally:
        store.close()


# ------------------------------------------------------------------------- one-line errors


@pytest.mark.parametrize(
    "args",
    [
        ["events", "--since", "-99999999999999999999h"],
        ["events", "--since", "@1e400"],
        ["events", "--since", "@-5"],
        ["stats", "--since", "-99999999999999999999d"],
        ["events", "--limit", "99999999999999999999"],
    ],
    ids=["since-relative", "since-inf", "since-before-1970", "stats-since", "limit"],
)
def test_numbers_out_of_range_are_one_line_errors(seeded: Path, args: list[str]) -> None:
    done = run_advisor(*args, "--db", f"sqlite:///{seeded}")
    assert done.returncode in (2, 4), done.stderr.decode()
    err = done.stderr.decode()
    assert "Traceback" not in err
    assert "Error" in err


def test_out_into_a_missing_folder_is_one_line_and_writes_nothing(
    seeded: Path, tmp_path: Path
) -> None:
    target = tmp_path / "missing" / "pm.md"
    result = invoke(
        "explain",
        "vllm-minimax-m25",
        "--format",
        "markdown",
        "--out",
        str(target),
        "--db",
        f"sqlite:///{seeded}",
    )
    assert result.exit_code == 1
    assert str(target) in one_line_error(result)
    assert not target.parent.exists()


def _alter(db: Path, sql: str) -> None:
    """What someone holding the file can do: drop the triggers, change a row."""
    with sqlite3.connect(db) as conn:
        names = [
            n
            for (n,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'events'"
            )
        ]
        for name in names:
            conn.execute(f'DROP TRIGGER "{name}"')
        conn.execute(sql)


def test_a_payload_that_is_not_json_is_named_by_its_seq(seeded: Path) -> None:
    _alter(seeded, "UPDATE events SET payload = 'not json {' WHERE seq = 5")
    for args in (["events"], ["explain", "vllm-minimax-m25"]):
        result = invoke(*args, "--db", f"sqlite:///{seeded}")
        assert result.exit_code == 3, result.output
        line = one_line_error(result)
        assert "event seq 5" in line and "advisor verify" in line
    verified = invoke("verify", "--db", f"sqlite:///{seeded}")
    assert verified.exit_code == 3


def test_a_hash_stored_as_text_is_a_broken_chain_not_a_traceback(seeded: Path) -> None:
    _alter(seeded, "UPDATE events SET hash = 'deadbeef' WHERE seq = 7")
    result = invoke("verify", "--db", f"sqlite:///{seeded}")
    assert result.exit_code == 3
    assert "seq 7" in one_line_error(result)


def test_a_payload_that_is_not_json_is_named_by_its_seq_on_postgresql(
    pg_schema: tuple[str, Callable[[], list[str]]], seed_journal: Path
) -> None:
    url, _tables = pg_schema
    assert invoke("ingest", "journal", "--file", str(seed_journal), "--db", url).exit_code == 0
    engine = create_engine(url)
    with engine.begin() as conn:  # the owner, triggers off: what a superuser can do
        conn.execute(text("ALTER TABLE events DISABLE TRIGGER events_append_only"))
        conn.execute(text("UPDATE events SET payload = 'not json {' WHERE seq = 5"))
        conn.execute(text("ALTER TABLE events ENABLE TRIGGER events_append_only"))
    engine.dispose()
    for args in (["events"], ["explain", "vllm-minimax-m25"]):
        result = invoke(*args, "--db", url)
        assert result.exit_code == 3, result.output
        line = one_line_error(result)
        assert "event seq 5" in line and "advisor verify" in line
    assert invoke("verify", "--db", url).exit_code == 3
