"""The helpers that replaced copies: one ISO-8601 grammar, one nearest-rank percentile, one
TOML loader, and the two retry loops (tenacity) — each against the real thing it serves."""

from __future__ import annotations

import json
import math
import sqlite3
import threading
import time
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from advisor.cli.main import cli
from advisor.core.errors import InputError, StoreError
from advisor.core.quantiles import nearest_rank, p95
from advisor.core.timefmt import (
    MAX_TIME_US,
    format_iso_us,
    format_us,
    parse_iso_us,
    parse_time_us,
)
from advisor.core.toml import load_toml
from advisor.diagnosis.rulefile import load_file
from advisor.fleet.ship import open_central
from advisor.planning.policy import load_policy
from advisor.store import open_store
from advisor.store.engine import make_engine, retry_busy
from advisor.views.read.history import release_p95_s

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# -- times ------------------------------------------------------------------------------------


@given(st.integers(min_value=0, max_value=MAX_TIME_US))
def test_a_time_to_the_microsecond_reads_back_exactly(us: int) -> None:
    stamp = format_iso_us(us)
    assert stamp.endswith("Z") and len(stamp) == 27
    assert parse_iso_us(stamp) == us
    assert parse_iso_us(format_us(us)) == us - us % 1000  # printed to the millisecond


@given(st.integers(min_value=0, max_value=4_102_444_800_000_000))  # to the year 2100
def test_the_run_id_stamp_is_the_one_the_fold_prints(us: int) -> None:
    """The fold prints a run id's time through a float; below 2100 that is the same text."""
    by_float = datetime.fromtimestamp(us / 1_000_000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert format_iso_us(us) == by_float


def test_the_iso_grammar() -> None:
    at = 1_771_633_975_123_000
    for stamp in (
        "2026-02-21T00:32:55.123Z",
        "2026-02-21T00:32:55.123+00:00",
        "2026-02-21T01:32:55.123+01:00",
        "2026-02-21 00:32:55.123",
    ):
        assert parse_iso_us(stamp) == at, stamp
    assert parse_time_us("2026-02-21T00:32:55.123Z") == at
    assert EPOCH + timedelta(microseconds=at) == datetime(
        2026, 2, 21, 0, 32, 55, 123_000, tzinfo=UTC
    )
    for bad in ("yesterday", "2026-02-30T00:00:00Z", ""):
        with pytest.raises(ValueError):
            parse_iso_us(bad)
    with pytest.raises(InputError, match="is not a time"):
        parse_time_us("2026-02-30T00:00:00Z")
    with pytest.raises(InputError, match="outside the times"):
        parse_time_us("1969-12-31T23:59:59Z")


# -- percentiles -----------------------------------------------------------------------------


@given(
    st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1),
    st.floats(min_value=0.01, max_value=1.0),
)
def test_nearest_rank_is_the_smallest_value_covering_the_share(
    values: list[float], q: float
) -> None:
    got = nearest_rank(values, q)
    assert got in values
    n = len(values)
    assert sum(v <= got for v in values) >= q * n - 1e-9
    assert sum(v < got for v in values) < math.ceil(q * n)


def test_p95() -> None:
    assert p95([]) is None
    assert p95(range(1, 21)) == 19 and p95(range(1, 22)) == 20 and p95([3.0]) == 3.0
    with pytest.raises(ValueError):
        nearest_rank([], 0.95)


def test_the_release_p95_is_the_same_in_python_and_in_sql(
    sqlite_url: str, seed_journal: Path, seed_csv: Path
) -> None:
    runner = CliRunner()
    for argv in (
        ["ingest", "nvidia-smi", str(seed_csv), "--host", "gpu-node-07"],
        ["ingest", "journal", "--file", str(seed_journal)],
    ):
        assert runner.invoke(cli, [*argv, "--db", sqlite_url]).exit_code == 0
    report = json.loads(runner.invoke(cli, ["stats", "--json", "--db", sqlite_url]).output)
    (row,) = report["gpu_release_after_kill"]
    with open_store(sqlite_url) as store:
        in_python = release_p95_s(store, "gpu-node-07")
    assert in_python is not None and row["p95_s"] == round(in_python, 1) > 0


# -- TOML files --------------------------------------------------------------------------------


def test_a_bad_toml_file_is_one_input_error_naming_the_file_and_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "policy.toml"
    bad.write_text("dry_run = true\nmax_actions_per_hour = = 3\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"policy\.toml: not valid TOML: .*line 2") as caught:
        load_policy(bad)
    assert caught.value.exit_code == 4
    with pytest.raises(InputError, match=r"rules\.toml: not valid TOML: .*line 1"):
        load_file(tmp_path / "rules.toml", "[[rule]\n")
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b'note = "caf\xe9"\n')
    with pytest.raises(InputError, match=r"latin\.toml: not valid TOML"):
        load_toml(latin, "policy")
    with pytest.raises(InputError, match=r"missing\.toml: cannot read policy: No such file"):
        load_policy(tmp_path / "missing.toml")
    with pytest.raises(InputError, match=r": cannot read rule file: Is a directory"):
        load_file(tmp_path)
    good = tmp_path / "good.toml"
    good.write_text("dry_run = true\n", encoding="utf-8")
    assert load_toml(good, "policy") == {"dry_run": True}
    assert load_policy(good).dry_run is True


# -- retries ------------------------------------------------------------------------------------


def test_a_busy_sqlite_store_is_retried_until_the_lock_is_let_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that cannot wait (busy timeout 0) finds the store locked by another
    connection: retried with pauses from 0.05 s doubling, until the holder commits."""
    path = tmp_path / "busy.db"
    with open_store(f"sqlite:///{path}"):
        pass
    waiter = make_engine(f"sqlite:///{path}")
    attempts: list[float] = []

    def write() -> int:
        attempts.append(time.monotonic())
        with waiter.connect() as conn:
            conn.connection.driver_connection.execute("PRAGMA busy_timeout=0")
            with conn.execution_options(advisor_write=True).begin():  # BEGIN IMMEDIATE
                pass
        return len(attempts)

    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.3, holder.execute, ["COMMIT"])
    release.start()
    try:
        took = retry_busy(write)
    finally:
        release.join()
    assert 2 <= took <= 6  # 0.05 + 0.1 + 0.2 = 0.35 s: the lock went at 0.3 s
    gaps = [b - a for a, b in pairwise(attempts)]
    assert gaps[0] >= 0.05
    assert all(later > earlier for earlier, later in pairwise(gaps))

    pauses: list[float] = []
    monkeypatch.setattr(time, "sleep", pauses.append)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(OperationalError, match="locked"):
            retry_busy(write)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert pauses == [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2.0]  # eight attempts in all

    def not_busy() -> None:
        with waiter.connect() as conn:
            conn.execute(text("SELECT * FROM no_such_table"))

    pauses.clear()
    with pytest.raises(OperationalError, match="no such table"):
        retry_busy(not_busy)
    assert pauses == []
    waiter.dispose()


def test_an_unreachable_central_store_is_retried_with_waits_doubling_to_30_s() -> None:
    """Nothing listens on port 1: every connect is refused at once, the waits double from
    0.5 s up to 30 s and end at the give-up time; then one StoreError saying so."""
    waits: list[float] = []
    started = time.monotonic()
    with pytest.raises(StoreError, match=r"is unreachable \(gave up after 120 s\)"):
        open_central(
            "postgresql+psycopg://postgres@127.0.0.1:1/test",
            give_up_after_s=120,
            sleep=waits.append,
        )
    took = time.monotonic() - started
    assert waits[:8] == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert len(waits) == 9 and 120 - took <= sum(waits) <= 120
    with pytest.raises(StoreError, match="unsupported database"):
        open_central("mysql://root@127.0.0.1/test", give_up_after_s=120, sleep=waits.append)
    assert len(waits) == 9  # not worth retrying
