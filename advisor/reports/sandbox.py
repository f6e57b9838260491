"""What a query may run, and the DuckDB connections it runs in: ATTACH/DETACH and the
scanners' own functions are refused in every query, and in a sandbox the statements that
write files or load code; a sealed connection reaches nothing but what is attached."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Final

import duckdb

from advisor.core.errors import InputError

__all__ = [
    "REFUSED_FUNCTIONS",
    "SCANNER_FUNCTIONS",
    "check_sql",
    "first_line",
    "new_duckdb",
    "seal",
    "sql_literal",
]

# The scanner extensions' functions (tests/reports/test_query_sandbox.py checks this list against
# what loading them adds): they open SQLite files and PostgreSQL servers of their own,
# which DuckDB's enable_external_access does not see, and `postgres_execute` runs any SQL
# on the store's own session. And DuckDB's functions that run SQL given as a string, which
# the check below could not read.
SCANNER_FUNCTIONS: Final = frozenset(
    {
        "sqlite_attach",
        "sqlite_query",
        "sqlite_scan",
        "pg_clear_cache",
        "postgres_attach",
        "postgres_configure_pool",
        "postgres_execute",
        "postgres_hstore_get",
        "postgres_hstore_to_json",
        "postgres_query",
        "postgres_scan",
        "postgres_scan_pushdown",
        "read_postgres_binary",
    }
)
REFUSED_FUNCTIONS: Final = SCANNER_FUNCTIONS | {
    "query",
    "query_table",
    "json_execute_serialized_sql",
}
_ST = duckdb.StatementType
# ATTACH and DETACH in every query: the store stays the one attached read-only.
_REFUSED_ALWAYS: Final = frozenset({_ST.ATTACH, _ST.DETACH, _ST.COPY_DATABASE})
# In a sandbox, only statements that cannot write a file (COPY, EXPORT) or load code (LOAD,
# INSTALL): reading, and tables, views and macros in DuckDB's own memory.
_SANDBOX_STATEMENTS: Final = frozenset(
    {
        _ST.SELECT,
        _ST.EXPLAIN,
        _ST.PRAGMA,
        _ST.CALL,
        _ST.SET,
        _ST.VARIABLE_SET,
        _ST.PREPARE,
        _ST.EXECUTE,
        _ST.TRANSACTION,
        _ST.CREATE,
        _ST.CREATE_FUNC,
        _ST.INSERT,
        _ST.UPDATE,
        _ST.DELETE,
        _ST.DROP,
        _ST.ALTER,
        _ST.MERGE_INTO,
        _ST.ANALYZE,
    }
)
_QUOTED: Final = re.compile(r'"((?:[^"]|"")*)"')
_BARE: Final = re.compile(r"[^\s\"(),.;:\[\]{}]+")


def check_sql(
    sql: str, *, sandbox: bool, con: duckdb.DuckDBPyConnection | None = None
) -> list[duckdb.Statement]:
    """The statements of `sql`, parsed by `con` (by default a DuckDB of its own, sealed like a
    sandbox when `sandbox`: parsing expands PRAGMAs, and `import_database` reads files), or
    InputError for SQL that a query may not run."""
    if not sql.strip():
        raise InputError("query: no SQL given (an empty string)")
    name = _refused_function(sql)
    if name is not None:
        raise InputError(
            f"query: {name}() is refused: it reaches past the read-only store "
            "(a scanner's own connection, or SQL run from a string)"
        )
    parser = con if con is not None else new_duckdb(sandbox)
    try:
        if con is None and sandbox:
            seal(parser)
        statements = parser.extract_statements(sql)
    except duckdb.Error as e:
        raise InputError(f"query: {first_line(e)}") from e
    finally:
        if con is None:
            parser.close()
    if not statements:
        raise InputError("query: no SQL statement given (only comments or semicolons)")
    for statement in statements:
        kind = statement.type
        if kind in _REFUSED_ALWAYS:
            raise InputError(
                f"query: {_kind(kind)} is refused: the store stays the one "
                "database attached, read-only"
            )
        if sandbox and kind not in _SANDBOX_STATEMENTS:
            raise InputError(
                f"query: {_kind(kind)} statements are refused: the query reads "
                "the store and nothing else (--allow-files lets it use files)"
            )
    return statements


def _kind(kind: duckdb.StatementType) -> str:
    name = str(getattr(kind, "name", ""))
    return name.replace("_", " ") if name.replace("_", "").isalpha() else "this statement"


def _refused_function(sql: str) -> str | None:
    """The first name in `sql` (an identifier or keyword token: function names are case
    insensitive, quoted or not) that is one of REFUSED_FUNCTIONS."""
    tokens = duckdb.tokenize(sql)
    for i, (start, kind) in enumerate(tokens):
        if kind not in (duckdb.token_type.identifier, duckdb.token_type.keyword):
            continue
        end = tokens[i + 1][0] if i + 1 < len(tokens) else len(sql)
        text = sql[start:end]
        quoted = _QUOTED.match(text)
        bare = _BARE.match(text)
        name = (
            quoted.group(1).replace('""', '"') if quoted else bare.group() if bare else ""
        ).lower()
        if name in REFUSED_FUNCTIONS:
            return name
    return None


def first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [e.__class__.__name__])[0]


def seal(con: duckdb.DuckDBPyConnection, folder: Path | None = None) -> None:
    """Nothing but what is attached (and `folder`) from now on, and no setting changed."""
    if folder is not None:
        con.execute(
            "SET allowed_directories = "
            f"[{sql_literal(str(folder.resolve()).rstrip(os.sep) + os.sep)}]"
        )
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def new_duckdb(sandbox: bool) -> duckdb.DuckDBPyConnection:
    config: dict[str, str | bool | int | float | list[str]] = {"python_enable_replacements": False}
    if sandbox:  # nothing fetched or loaded behind the query's back
        config |= {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    return duckdb.connect(config=config)


def sql_literal(text: str) -> str:
    """A SQL string literal (ATTACH, COPY and read_parquet take no parameters here)."""
    if "\0" in text:
        raise InputError("a path or connection string with a NUL character")
    return "'" + text.replace("'", "''") + "'"
