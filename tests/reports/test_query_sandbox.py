"""`advisor query` is read-only and sandboxed: the store attached read-only, and nothing else
reachable (no file read or written, no database attached, no extension installed or loaded, no
setting changed back), on SQLite, on PostgreSQL and over a Parquet export; `--allow-files`
gives DuckDB's file access back with the store still read-only. Every refusal is one line;
output is escaped for its format."""

from __future__ import annotations

import csv
import hashlib
import io
import json
from pathlib import Path

import click.testing
import duckdb
import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine, make_url, text

from advisor.cli.main import cli
from advisor.reports.analytics import _extension
from advisor.reports.sandbox import SCANNER_FUNCTIONS, sql_literal
from tests.conftest import run_advisor


def invoke(*args: str) -> click.testing.Result:
    return CliRunner().invoke(cli, list(args))


def one_line_error(result: click.testing.Result, code: int = 4) -> str:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == code, result.output
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    return lines[0]


@pytest.fixture
def loaded(store_url: str, seed_journal: Path, seed_csv: Path) -> str:
    for argv in (
        ["ingest", "journal", "--file", str(seed_journal)],
        ["ingest", "nvidia-smi", str(seed_csv), "--host", "gpu-node-07"],
    ):
        result = invoke(*argv, "--db", store_url)
        assert result.exit_code == 0, result.output
    return store_url


def snapshot(url: str) -> dict[str, object]:
    """What a write would change: the tables, every event's hash, the checkpoints; and for
    SQLite the main file's bytes."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            tables = sorted(conn.dialect.get_table_names(conn))
            hashes = conn.execute(text("SELECT seq, hash FROM events ORDER BY seq")).all()
            checkpoints = sorted(map(tuple, conn.execute(text("SELECT * FROM checkpoints"))))
    finally:
        engine.dispose()
    shot: dict[str, object] = {"tables": tables, "events": hashes, "checkpoints": checkpoints}
    database = make_url(url).database or ""
    if url.startswith("sqlite"):
        shot["bytes"] = hashlib.sha256(Path(database).read_bytes()).hexdigest()
    return shot


def attacks(url: str, tmp_path: Path) -> list[tuple[str, str]]:
    """(SQL, what the one-line error says) for each way out of the sandbox."""
    secret = tmp_path / "secret.csv"
    secret.write_text("password\nhunter2\n")
    out = tmp_path / "out"
    store_path = make_url(url).database if url.startswith("sqlite") else None
    other = (
        f"'{store_path}' AS s2 (TYPE sqlite)"
        if store_path
        else (
            f"{sql_literal(make_url(url).set(drivername='postgresql', query={}).render_as_string(hide_password=False))} "  # noqa: E501
            "AS s2 (TYPE postgres)"
        )
    )
    refused_read = "file system operations are disabled"
    dump = tmp_path / "dump"  # IMPORT DATABASE runs the SQL of the folder's schema.sql
    dump.mkdir(exist_ok=True)
    (dump / "schema.sql").write_text(
        f"ATTACH '{out}.db' AS p (TYPE sqlite); CREATE TABLE p.x AS SELECT 1 AS a;"
    )
    (dump / "load.sql").write_text("")
    return [
        (f"COPY (SELECT 1) TO '{out}.csv'", "COPY statements are refused"),
        (f"COPY (SELECT * FROM events) TO '{out}.parquet' (FORMAT parquet)", "COPY"),
        (f"EXPORT DATABASE '{out}'", "EXPORT statements are refused"),
        (f"SELECT * FROM read_text('{secret}')", refused_read),
        (f"SELECT * FROM read_csv('{secret}')", refused_read),
        (f"SELECT * FROM read_blob('{secret}')", refused_read),
        (f"SELECT * FROM '{secret}'", refused_read),
        (f"SELECT * FROM glob('{tmp_path}/*')", refused_read),
        (
            f"DETACH store; ATTACH {other}; INSERT INTO s2.checkpoints SELECT * FROM "
            "s2.checkpoints",
            "DETACH is refused",
        ),
        (f"ATTACH {other}", "ATTACH is refused"),
        (f"ATTACH '{out}.db' AS n (TYPE sqlite)", "ATTACH is refused"),
        (f"ATTACH '{out}.duckdb' AS n", "ATTACH is refused"),
        ("ATTACH ':memory:' AS m", "ATTACH is refused"),
        (
            f"SELECT * FROM sqlite_scan('{store_path or secret}', 'events')",
            "sqlite_scan() is refused",
        ),
        (f"CALL sqlite_attach('{store_path or secret}')", "sqlite_attach() is refused"),
        (f"SELECT * FROM \"SQLite_Scan\"('{secret}', 't')", "sqlite_scan() is refused"),
        (
            "SELECT * FROM postgres_execute('store', 'COMMIT; CREATE TABLE pwned (a int)')",
            "postgres_execute() is refused",
        ),
        ("SELECT * FROM postgres_query('store', 'SELECT 1')", "postgres_query() is refused"),
        (f"SELECT * FROM query('SELECT * FROM read_text(''{secret}'')')", "query() is refused"),
        ("INSERT INTO store.checkpoints SELECT * FROM store.checkpoints", "read-only mode"),
        ("INSERT INTO store.events SELECT * FROM store.events LIMIT 1", "read-only mode"),
        ("UPDATE store.checkpoints SET position = 0", "read-only mode"),
        ("DELETE FROM store.events", "read-only mode"),
        ("DROP TABLE store.checkpoints", "read-only"),
        ("CREATE TABLE store.pwned (a INTEGER)", "read-only"),
        ("INSTALL httpfs", "LOAD statements are refused"),
        ("LOAD httpfs", "LOAD statements are refused"),
        ("SET enable_external_access = true", "the configuration has been locked"),
        ("RESET enable_external_access", "the configuration has been locked"),
        ("SET lock_configuration = false", "the configuration has been locked"),
        ("SET allowed_directories = ['/']", "the configuration has been locked"),
        ("PRAGMA memory_limit = '1GB'", "the configuration has been locked"),
        (f"SET log_query_path = '{out}.log'", "the configuration has been locked"),
        (f"PRAGMA import_database('{dump}')", refused_read),
        (f"IMPORT DATABASE '{dump}'", refused_read),
        ("PRAGMA copy_database('store', 'memory')", "COPY DATABASE is refused"),
        # not installed behind the query's back (autoinstall is off in the sandbox)
        ("PRAGMA create_fts_index('events', 'seq', 'type')", "is not in the catalog"),
        ("SELECT * FROM read_csv('https://example.com/x.csv')", refused_read),
    ]


def test_every_way_out_is_refused_and_the_store_is_unchanged(loaded: str, tmp_path: Path) -> None:
    before = snapshot(loaded)
    for sql, says in attacks(loaded, tmp_path):
        error = one_line_error(invoke("query", sql, "--db", loaded))
        assert error.startswith("Error: query: ") and says in error, (sql, error)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("out")) == []
    for sql in ("CHECKPOINT store", "FORCE CHECKPOINT store", "USE store; SELECT 1"):
        invoke("query", sql, "--db", loaded)  # allowed or not: they may not write the store
    assert snapshot(loaded) == before
    assert invoke("verify", "--db", loaded).exit_code == 0
    # what the sandbox leaves: the views, and DuckDB's own memory
    result = invoke(
        "query",
        "CREATE TABLE t AS SELECT type, count(*) AS n FROM events "
        "GROUP BY type; SELECT n FROM t WHERE type = 'log.recorded'",
        "--json",
        "--db",
        loaded,
    )
    assert result.exit_code == 0 and json.loads(result.output) == [{"n": 86}], result.output


def test_the_real_cli_refuses_in_one_line(loaded: str, tmp_path: Path) -> None:
    target = tmp_path / "x.csv"
    done = run_advisor("query", f"COPY (SELECT 1) TO '{target}'", "--db", loaded)
    assert done.returncode == 4 and not target.exists()
    assert done.stderr.decode().startswith("Error: query: COPY statements are refused")
    assert done.stderr.decode().count("\n") == 1


def test_the_scanner_functions_list_is_what_loading_them_adds() -> None:
    con = duckdb.connect()
    names = "SELECT DISTINCT function_name FROM duckdb_functions()"
    before = {r[0] for r in con.execute(names).fetchall()}
    for package in ("duckdb_extension_sqlite_scanner", "duckdb_extension_postgres_scanner"):
        con.execute(f"LOAD {sql_literal(_extension(package))}")
    assert {r[0] for r in con.execute(names).fetchall()} - before == SCANNER_FUNCTIONS


def test_the_parquet_views_read_their_folder_and_nothing_else(loaded: str, tmp_path: Path) -> None:
    folder = tmp_path / "export"
    assert invoke("export", "parquet", str(folder), "--db", loaded).exit_code == 0
    exported = sorted(str(p) for p in folder.rglob("*"))
    result = invoke(
        "query", "SELECT count(*) AS n FROM log_lines", "--json", "--parquet", str(folder)
    )
    assert result.exit_code == 0 and json.loads(result.output) == [{"n": 86}], result.output
    for sql, says in [
        *attacks(loaded, tmp_path),
        (f"COPY (SELECT 1) TO '{folder}/runs.parquet'", "COPY statements are refused"),
        (f"SELECT * FROM read_text('{folder}/../secret.csv')", "disabled"),
        (f"SELECT * FROM read_text('{folder}2/x')", "disabled"),
    ]:
        if "read-only" in says:  # no store attached here: those fail otherwise
            continue
        error = one_line_error(invoke("query", sql, "--parquet", str(folder)))
        assert says in error, (sql, error)
    assert sorted(str(p) for p in folder.rglob("*")) == exported
    stats = invoke("stats", "--json", "--parquet", str(folder))
    assert stats.exit_code == 0 and json.loads(stats.output)["crashes_by_label"]


def test_allow_files_reads_and_writes_files_but_not_the_store(loaded: str, tmp_path: Path) -> None:
    before = snapshot(loaded)
    mine = tmp_path / "mine.csv"
    mine.write_text("a,b\n1,2\n")
    out = tmp_path / "labels.csv"
    result = invoke(
        "query",
        f"COPY (SELECT label FROM incidents ORDER BY 1) TO '{out}'",
        "--allow-files",
        "--db",
        loaded,
    )
    assert result.exit_code == 0, result.output
    assert out.read_text().splitlines() == ["label", "sampler_warmup_oom", "wedged_stop"]
    result = invoke(
        "query", f"SELECT b FROM read_csv('{mine}')", "--json", "--allow-files", "--db", loaded
    )
    assert result.exit_code == 0 and json.loads(result.output) == [{"b": 2}], result.output
    for sql, says in attacks(loaded, tmp_path):
        if ("refused" in says and "statements" not in says) or "read-only" in says:
            error = one_line_error(invoke("query", sql, "--allow-files", "--db", loaded))
            assert says in error, (sql, error)
    assert snapshot(loaded) == before
    assert invoke("verify", "--db", loaded).exit_code == 0


def test_no_sql_and_bad_folders_are_one_line_errors(sqlite_url: str, tmp_path: Path) -> None:
    assert invoke("db", "upgrade", "--db", sqlite_url).exit_code == 0
    for sql in ("", "   ", "\n\t", ";", "-- only a comment"):
        assert "no SQL" in one_line_error(invoke("query", "--db", sqlite_url, "--", sql))
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    for folder in (afile / "sub", afile):
        error = one_line_error(invoke("export", "parquet", str(folder), "--db", sqlite_url))
        assert str(folder) in error
    assert afile.read_text() == "not a folder"
    # a store that cannot be read leaves no folder behind
    never = tmp_path / "never" / "made"
    bad = tmp_path / "bad.db"
    bad.write_text("")
    one_line_error(invoke("export", "parquet", str(never), "--db", f"sqlite:///{bad}"), 1)
    assert not never.parent.exists()
    error = one_line_error(
        invoke(
            "stats",
            "--format",
            "html",
            "--out",
            str(tmp_path / "missing" / "stats.html"),
            "--db",
            sqlite_url,
        ),
        1,
    )
    assert "missing" in error and not (tmp_path / "missing").exists()
    empty = tmp_path / "empty"
    (empty / "events").mkdir(parents=True)
    assert "not a readable Parquet export" in one_line_error(
        invoke("query", "SELECT 1", "--parquet", str(empty))
    )


def test_values_python_cannot_print_plainly_come_out_anyway(sqlite_url: str) -> None:
    assert invoke("db", "upgrade", "--db", sqlite_url).exit_code == 0
    sql = (
        "SELECT TIMESTAMPTZ '2026-02-21 00:33:16+00' AS at, 1.5 AS d, INTERVAL 90 SECOND "
        "AS i, '\\x00ab'::BLOB AS b, 1267650600228229401496703205376::HUGEINT AS big, "
        "MAP {1: 'x'} AS m"
    )
    result = invoke("query", sql, "--json", "--db", sqlite_url)
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)
    assert row["at"].startswith("2026-02-21 00:33:16") and row["d"] == 1.5
    assert row["b"] == "\\x00ab" and row["m"] == {"1": "x"} and row["i"] == "0:01:30"
    assert row["big"] == str(2**100)
    for fmt in ([], ["--csv"]):
        result = invoke("query", sql, *fmt, "--db", sqlite_url)
        assert result.exit_code == 0 and "2026-02-21 00:33:16" in result.output, result.output


HOSTILE = "a\x1b[2Jb\x1b]0;owned\x07c\rd\x9be\nf\tg"


def test_csv_and_table_output_never_print_raw_control_characters(
    sqlite_url: str, tmp_path: Path
) -> None:
    journal = tmp_path / "hostile.jsonl"
    journal.write_text(
        json.dumps(
            {
                "__CURSOR": "s=1;i=1",
                "__REALTIME_TIMESTAMP": "1771633975000000",
                "__MONOTONIC_TIMESTAMP": "1",
                "_BOOT_ID": "b" * 32,
                "_HOSTNAME": "h1",
                "PRIORITY": "6",
                "MESSAGE": list(HOSTILE.encode()),
                "_PID": "7",
                "_COMM": "vllm",
                "SYSLOG_IDENTIFIER": "vllm",
                "_TRANSPORT": "stdout",
                "_SYSTEMD_UNIT": "x.service",
            }
        )
        + "\n"
    )
    result = invoke("ingest", "journal", "--file", str(journal), "--db", sqlite_url)
    assert result.exit_code == 0, result.output
    sql = 'SELECT message, message AS "\x1b[31mred" FROM log_lines'
    as_csv = invoke("query", sql, "--csv", "--db", sqlite_url)
    assert as_csv.exit_code == 0, as_csv.output
    for raw in "\x1b\x07\r\x9b":
        assert raw not in as_csv.output
    header, row = list(csv.reader(io.StringIO(as_csv.output)))
    assert header == ["message", "\\x1b[31mred"]
    # the newline stays (quoted, as CSV carries it), the tab too; the rest shown as \xNN
    assert row[0] == "a\\x1b[2Jb\\x1b]0;owned\\x07c\\x0dd\\x9be\nf\tg" == row[1]
    table = invoke("query", sql, "--db", sqlite_url)
    assert table.exit_code == 0 and len(table.output.splitlines()) == 2
    for raw in "\x1b\x07\r\x9b":
        assert raw not in table.output
    as_json = invoke("query", sql, "--json", "--db", sqlite_url)
    assert json.loads(as_json.output)[0]["message"] == HOSTILE
