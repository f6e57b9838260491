"""Fixtures shared by the suite: a store URL on each real engine, helpers to run the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from advisor.pipeline.processing import Processor
from advisor.sim.box import SystemdBox
from advisor.sim.box import unavailable as box_unavailable
from advisor.sim.gpuhost import GpuHost
from advisor.store import EventStore, open_store
from ingest.journal_sources import ingest_json_file

ROOT = Path(__file__).resolve().parent.parent
# Copies of the team's seed scenario (seed-minimax-m25.*), kept here so the suite
# does not depend on a folder outside the repository.
SCENARIOS = ROOT / "tests" / "fixtures"
PG_ENV = "ADVISOR_TEST_PG_URL"


def _pg_base_url() -> str | None:
    return os.environ.get(PG_ENV) or None


@pytest.fixture(autouse=True)
def _host_key(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Writing commands sign chain heads with the host key (docs/integrity.md): each test
    gets its own, never the machine's."""
    monkeypatch.setenv("ADVISOR_KEY", str(tmp_path_factory.mktemp("key") / "host-key"))


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'events.db'}"


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh schema in the test PostgreSQL database, dropped afterwards."""
    base = _pg_base_url()
    if base is None:
        pytest.skip(f"{PG_ENV} is not set: PostgreSQL tests need a server (.ci/run sets it)")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    sep = "&" if "?" in base else "?"
    try:
        yield f"{base}{sep}options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest) -> str:
    """Run the test once on SQLite and once on PostgreSQL."""
    name = "sqlite_url" if request.param == "sqlite" else "pg_url"
    url: str = request.getfixturevalue(name)
    return url


@pytest.fixture
def opener() -> Iterator[Callable[[str], EventStore]]:
    """open_store for tests: every store opened is closed at teardown."""
    opened: list[EventStore] = []

    def _open(url: str) -> EventStore:
        store = open_store(url)
        opened.append(store)
        return store

    yield _open
    for store in opened:
        store.close()


@pytest.fixture
def seed_journal() -> Path:
    return SCENARIOS / "seed-minimax-m25.journal.jsonl"


@pytest.fixture
def diagnosed(
    sqlite_url: str, opener: Callable[[str], EventStore], seed_journal: Path
) -> EventStore:
    """A SQLite store holding the seed scenario, ingested and diagnosed."""
    store = opener(sqlite_url)
    ingest_json_file(store, seed_journal)
    Processor(store).run(final=True)
    return store


def seed_on_host(
    folder: Path, seed_journal: Path, host: str, *, diagnose: bool = False
) -> EventStore:
    """A SQLite store in `folder` holding the seed scenario as seen on `host` (the caller
    closes it)."""
    journal = folder / f"{host}.jsonl"
    journal.write_text(seed_journal.read_text().replace('"gpu-node-07"', f'"{host}"'))
    store = open_store(f"sqlite:///{folder / host}.db")
    ingest_json_file(store, journal)
    if diagnose:
        Processor(store).run(final=True)
    return store


@pytest.fixture
def seed_csv() -> Path:
    return SCENARIOS / "seed-minimax-m25.nvidia-smi.csv"


def advisor_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "advisor", *args]


def run_advisor(
    *args: str, input: bytes | None = None, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """The real CLI as a process."""
    return subprocess.run(
        advisor_argv(*args), input=input, capture_output=True, timeout=timeout, env=env, check=False
    )


@pytest.fixture
def box(tmp_path: Path) -> Iterator[SystemdBox]:
    """Real systemd (the installed one, 252 on Debian 12) booted as PID 1 of fresh
    namespaces, running only journald: see advisor.sim.box. Skipped, with the reason, where
    that cannot be done (not root, no namespaces)."""
    reason = box_unavailable()
    if reason is not None:
        pytest.skip(f"no systemd box: {reason}")
    with SystemdBox(tmp_path / "box") as booted:
        yield booted


@pytest.fixture
def gpu_host(tmp_path: Path) -> Iterator[GpuHost]:
    """A box running the simulated GPU driver (memory freed 1 s after a process dies), ready
    for vLLM units (`advisor.sim.gpuhost`)."""
    reason = box_unavailable()
    if reason is not None:
        pytest.skip(f"no systemd box: {reason}")
    with GpuHost(tmp_path / "host", release_delay_s=1.0) as booted:
        yield booted
