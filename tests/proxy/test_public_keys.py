"""The columns a public table may be joined on are found when dpproxy starts
(proxy.public_keys): a declared key on either engine, the rows themselves on DuckDB only,
and only where a join cannot find two distinct keys equal (collations, char(n))."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Mapping
from pathlib import Path

import duckdb
import psycopg
import pytest

from proxy.backends import Backend, CancelToken, NotReady
from proxy.backends.duckdb import DuckDBBackend
from proxy.backends.postgres import PostgresBackend
from proxy.public_keys import PublicKeys, find_public_keys
from rewriter import TablePolicy

PROTECTED = TablePolicy(privacy_unit="pid")


def _found(
    backend: Backend, schema: str, policies: Mapping[str, TablePolicy], max_rows: int = 10_000
) -> PublicKeys:
    async def run() -> PublicKeys:
        try:
            declared = await backend.schema_declared(schema)
            return await find_public_keys(backend, schema, declared, policies, max_rows=max_rows)
        finally:
            await backend.close()

    return asyncio.run(run())


def _duckdb_file(path: Path, *statements: str) -> Path:
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE t (pid INTEGER, code VARCHAR)")
        for statement in statements:
            conn.execute(statement)
    return path


LOOKUP = (
    "CREATE TABLE lookup (k INTEGER PRIMARY KEY, u VARCHAR UNIQUE, distinct_now INTEGER, "
    "repeated INTEGER, x DOUBLE, d DECIMAL(9, 2), day DATE, nulls INTEGER)",
    "INSERT INTO lookup VALUES (1, 'a', 10, 5, 0.5, 1.5, '2024-01-01', NULL), "
    "(2, 'A', 20, 5, 1.5, 2.5, '2024-01-02', NULL), (3, NULL, NULL, 6, 2.5, 3.5, NULL, 7)",
)
POLICIES = {"t": PROTECTED, "lookup": TablePolicy(public=True)}


def test_duckdb_keys_are_declared_or_unique_in_the_rows(tmp_path: Path) -> None:
    data = _duckdb_file(tmp_path / "data.duckdb", *LOOKUP)
    found = _found(DuckDBBackend(data, timeout_seconds=10), "main", POLICIES)
    # Not a floating-point column (x), nor one holding a value twice (repeated); NULLs
    # repeat freely (a join never matches them).
    assert found.unique == {"lookup": ["k", "u", "distinct_now", "d", "day", "nulls"]}
    assert found.warnings == []
    (note,) = found.notes
    assert note.startswith("public table lookup may be joined on k, u, distinct_now, d, day, nulls")
    assert "distinct_now, d, day, nulls without a declared key" in note


def test_duckdb_rows_found_unique_need_a_restart_a_repeated_column_does_not(
    tmp_path: Path,
) -> None:
    """A column found unique by its rows is recorded by the backend, so that a changed file
    is used only after a restart (which checks it again); one that repeats values is
    recorded nowhere: a file copied over with only declared keys relied on reopens."""
    declared_only = {
        "t": PROTECTED,
        "keyed": TablePolicy(public=True),
    }
    data = _duckdb_file(
        tmp_path / "data.duckdb",
        "CREATE TABLE keyed (k INTEGER PRIMARY KEY, repeated INTEGER)",
        "INSERT INTO keyed VALUES (1, 5), (2, 5)",
        *LOOKUP,
    )
    copy = tmp_path / "copy.duckdb"
    shutil.copyfile(data, copy)

    async def reopened(policies: Mapping[str, TablePolicy]) -> None:
        backend = DuckDBBackend(data, timeout_seconds=10, settle_seconds=0)
        try:
            declared = await backend.schema_declared("main")
            found = await find_public_keys(backend, "main", declared, policies, max_rows=10)
            assert found.unique["keyed"] == ["k"]
            shutil.copyfile(copy, data)  # the same content, a changed file
            await backend.ready(CancelToken())
        finally:
            await backend.close()

    asyncio.run(reopened(declared_only))
    with pytest.raises(NotReady, match=r"distinct_now.*found unique") as caught:
        asyncio.run(reopened({**declared_only, "lookup": TablePolicy(public=True)}))
    assert caught.value.needs_restart


def test_duckdb_text_keys_under_a_collation_are_not_keys(tmp_path: Path) -> None:
    """DuckDB's declared key holds 'a' and 'A' in a NOCASE column, and a join compares a
    key of the default collation under the NOCASE of the column it meets: 'a' and 'A' of
    the key then both match one row."""
    data = _duckdb_file(
        tmp_path / "data.duckdb",
        "CREATE TABLE ci (name VARCHAR COLLATE NOCASE PRIMARY KEY, n INTEGER)",
        "INSERT INTO ci VALUES ('a', 1), ('A', 2)",
        "CREATE TABLE plain (name VARCHAR PRIMARY KEY)",
        "INSERT INTO plain VALUES ('a'), ('A')",
    )
    with duckdb.connect(str(data), read_only=True) as conn:
        joined = "SELECT COUNT(*) FROM ci JOIN plain ON plain.name = ci.name WHERE ci.n = 1"
        assert conn.execute(joined).fetchall() == [(2,)]  # one row, two key values
    policies = {
        "t": PROTECTED,
        "ci": TablePolicy(public=True),
        "plain": TablePolicy(public=True),
    }
    found = _found(DuckDBBackend(data, timeout_seconds=10), "main", policies)
    assert found.unique == {"ci": ["n"], "plain": []}
    (warning,) = found.warnings
    assert warning.startswith("public table plain has no column known to be unique")
    assert 'name (a join may compare it under the collation "NOCASE" of other columns)' in warning
    assert "a PRIMARY KEY or UNIQUE constraint" in warning
    assert any('name (under its collation "NOCASE"' in note for note in found.notes)
    # Without the collated table configured, plain's key counts.
    alone = {"t": PROTECTED, "plain": TablePolicy(public=True)}
    assert _found(DuckDBBackend(data, timeout_seconds=10), "main", alone).unique == {
        "plain": ["name"]
    }


def _postgres(pg_dsn: str, pg_schema: str, *statements: str) -> PostgresBackend:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{pg_schema}"')
        conn.execute("CREATE TABLE t (pid integer, code text)")
        for statement in statements:
            conn.execute(statement.encode())
    return PostgresBackend(pg_dsn, pool_size=1, timeout_seconds=5)


def test_postgres_keys_are_declared(pg_dsn: str, pg_schema: str) -> None:
    """Rows unique today prove nothing on PostgreSQL (another session may add a row)."""
    backend = _postgres(
        pg_dsn,
        pg_schema,
        "CREATE TABLE lookup (k integer PRIMARY KEY, u text UNIQUE, i bigint, "
        "distinct_now integer, partial integer, pair integer, x double precision UNIQUE)",
        "CREATE UNIQUE INDEX ON lookup (i)",
        "CREATE UNIQUE INDEX ON lookup (partial) WHERE partial > 0",
        "CREATE UNIQUE INDEX ON lookup (pair, k)",
        "INSERT INTO lookup VALUES (1, 'a', 1, 1, 1, 1, 0.5), (2, 'b', 2, 2, 2, 1, 1.5)",
        "CREATE TABLE keyless (a integer, b text)",
        "INSERT INTO keyless VALUES (1, 'x'), (2, 'y')",
    )
    policies = {
        "t": PROTECTED,
        "lookup": TablePolicy(public=True),
        "keyless": TablePolicy(public=True),
    }
    found = _found(backend, pg_schema, policies)
    assert found.unique == {"lookup": ["k", "u", "i"], "keyless": []}
    (warning,) = found.warnings
    assert warning.startswith("public table keyless has no column known to be unique")
    assert "ALTER TABLE keyless ADD PRIMARY KEY (<column>)" in warning


def test_postgres_varchar_keys_meeting_a_char_n_column_are_not_keys(
    pg_dsn: str, pg_schema: str
) -> None:
    """``varchar = character(n)`` converts the varchar to character(n), which ignores
    trailing spaces: 'a' and 'a ', distinct in the key, both match 'a'. A text key is
    compared as text, where they stay distinct."""
    backend = _postgres(
        pg_dsn,
        pg_schema,
        "CREATE TABLE padded (pid integer, c character(3))",
        "INSERT INTO padded VALUES (1, 'a')",
        "CREATE TABLE names (v varchar PRIMARY KEY, t text UNIQUE)",
        "INSERT INTO names VALUES ('a', 'a'), ('a ', 'a ')",
    )
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(f'SET search_path TO "{pg_schema}"')
        count = "SELECT COUNT(*) FROM padded JOIN names ON names.{} = padded.c"
        assert conn.execute(count.format("v").encode()).fetchall() == [(2,)]
        assert conn.execute(count.format("t").encode()).fetchall() == [(1,)]
    policies = {
        "padded": PROTECTED,
        "names": TablePolicy(public=True),
    }
    found = _found(backend, pg_schema, policies)
    assert found.unique == {"names": ["t"]}
    (note,) = found.notes
    assert "v (compared with a character(n) column it is converted" in note
