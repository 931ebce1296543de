"""A public table holding more than ``[backend] max_public_rows`` rows may not be read.

A red-team reviewer joined a 20-million-row lookup table on its unique key: DuckDB reads the
lookup table only when the other side of the join has a row, so ``WHERE p.patient_id = 42
AND p.income > x`` ran 30 ms when the condition held and 11 ms when not, and 30 queries at
ε=0.0001 read the income to within 5,000. The difference grows with the table (about 1 ms
per million rows, 0.02 ms for 10,000), so dpproxy counts each public table's rows when it
starts (reading at most the limit + 1 of them) and refuses queries that read a larger one,
on DuckDB again whenever it opens a changed file."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import duckdb
import psycopg
import pytest

from proxy.backends import Backend, CancelToken, NotReady, Schema, column_types
from proxy.backends.duckdb import DuckDBBackend
from proxy.backends.postgres import PostgresBackend
from proxy.public_keys import PublicKeys, find_public_keys
from proxy.settings import BackendSettings
from rewriter import PlanRequest, PolicyError, Rejected, TablePolicy, build_catalog, plan
from tests.rewriter import tables

POLICIES = {"t": TablePolicy(privacy_unit="pid"), "lookup": TablePolicy(public=True)}


def _found(backend: Backend, schema: str, max_rows: int) -> PublicKeys:
    async def run() -> PublicKeys:
        try:
            declared = await backend.schema_declared(schema)
            return await find_public_keys(backend, schema, declared, POLICIES, max_rows=max_rows)
        finally:
            await backend.close()

    return asyncio.run(run())


def _duckdb_file(path: Path, rows: int) -> Path:
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE t (pid INTEGER, code INTEGER)")
        conn.execute("CREATE TABLE lookup (code INTEGER PRIMARY KEY, label VARCHAR)")
        conn.execute(f"INSERT INTO lookup SELECT i, 'x' || (i % 2) FROM range({rows}) r(i)")
    return path


def _check(found: PublicKeys, rows: int, max_rows: int) -> None:
    if rows <= max_rows:
        assert found.oversized == {}
        assert "code" in found.unique["lookup"]
        assert found.warnings == []
        return
    assert found.oversized == {"lookup": max_rows}
    assert "lookup" not in found.unique  # not even scanned for its keys
    (warning,) = found.warnings
    assert warning.startswith(f"public table lookup holds more than {max_rows} rows, so queries")
    assert "[backend] max_public_rows" in warning


@pytest.mark.parametrize(("rows", "max_rows"), [(5, 5), (6, 5), (1, 0), (0, 0)])
def test_duckdb_public_tables_are_counted_up_to_the_limit(
    tmp_path: Path, rows: int, max_rows: int
) -> None:
    data = _duckdb_file(tmp_path / "data.duckdb", rows)
    _check(_found(DuckDBBackend(data, timeout_seconds=10), "main", max_rows), rows, max_rows)


@pytest.mark.parametrize(("rows", "max_rows"), [(5, 5), (6, 5)])
def test_postgres_public_tables_are_counted_up_to_the_limit(
    pg_dsn: str, pg_schema: str, rows: int, max_rows: int
) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{pg_schema}"')
        conn.execute("CREATE TABLE t (pid integer, code integer)")
        conn.execute("CREATE TABLE lookup (code integer PRIMARY KEY, label text)")
        conn.execute(
            f"INSERT INTO lookup SELECT i, 'x' || (i % 2) FROM generate_series(1, {rows}) i"
        )
    backend = PostgresBackend(pg_dsn, pool_size=1, timeout_seconds=5)
    _check(_found(backend, pg_schema, max_rows), rows, max_rows)


def test_a_changed_duckdb_file_whose_public_table_grew_past_the_limit_needs_a_restart(
    tmp_path: Path,
) -> None:
    """The lookup table's key is declared, so a changed file would be used without a
    restart: its rows are counted again, and more than the limit refuse it."""
    data = _duckdb_file(tmp_path / "data.duckdb", 5)
    grown = _duckdb_file(tmp_path / "grown.duckdb", 6)
    same = _duckdb_file(tmp_path / "same.duckdb", 5)

    async def reopened(replacement: Path) -> None:
        backend = DuckDBBackend(data, timeout_seconds=10, settle_seconds=0)
        try:
            declared = await backend.schema_declared("main")
            found = await find_public_keys(backend, "main", declared, POLICIES, max_rows=5)
            assert found.unique == {"lookup": ["code"]}
            shutil.copyfile(replacement, data)
            await backend.ready(CancelToken())
        finally:
            await backend.close()

    asyncio.run(reopened(same))  # within the limit: opened without a restart
    with pytest.raises(NotReady, match=r"public table lookup now holds more than 5 rows") as caught:
        asyncio.run(reopened(grown))
    assert caught.value.needs_restart
    assert "max_public_rows" in str(caught.value)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) FROM visits v JOIN departments d ON d.name = v.department",
        "SELECT COUNT(*) FROM visits v WHERE v.department IN (SELECT name FROM departments)",
        "SELECT COUNT(*) FROM visits v WHERE EXISTS "
        "(SELECT 1 FROM departments d WHERE d.name = v.department)",
        "SELECT d.name FROM departments d",
        "WITH d AS (SELECT * FROM departments) "
        "SELECT COUNT(*) FROM visits v JOIN d ON d.name = v.department",
    ],
)
def test_a_query_reading_an_oversized_public_table_is_refused(sql: str) -> None:
    columns = {
        "visits": tables.COLUMNS,
        "patients": tables.PATIENT_COLUMNS,
        "departments": tables.DEPARTMENT_COLUMNS,
    }
    policies = {
        "visits": tables.POLICY,
        "patients": tables.PATIENT_POLICY,
        "departments": tables.DEPARTMENT_POLICY,
    }
    within = build_catalog(columns, policies, schema="main", unique=tables.UNIQUE)
    oversized = build_catalog(
        columns, policies, schema="main", unique=tables.UNIQUE, oversized={"departments": 10}
    )
    joined = "SELECT COUNT(*) FROM visits v JOIN departments d ON d.name = v.department"
    plan(joined, within, PlanRequest(1.0))  # answered while the table is within the limit
    with pytest.raises(Rejected) as rejected:
        plan(sql, oversized, PlanRequest(1.0))
    assert rejected.value.message.startswith(
        'public table "departments" holds more than 10 rows, so queries cannot read it'
    )
    assert rejected.value.sqlstate == "42501"
    assert rejected.value.hint is not None and "max_public_rows" in rejected.value.hint


def test_the_limit_is_a_setting_with_a_small_default() -> None:
    settings = BackendSettings(engine="duckdb", path=Path("x.duckdb"))
    assert settings.max_public_rows == 10_000
    with pytest.raises(ValueError, match="max_public_rows"):
        BackendSettings.model_validate({"path": "x.duckdb", "max_public_rows": -1})


@pytest.mark.postgres
def test_postgres_tables_whose_names_differ_only_in_case_are_refused(
    pg_dsn: str, pg_schema: str
) -> None:
    """A reviewer's bypass: PostgreSQL lists "Lookup" before lookup, the row count took the
    first and the catalog the last, so a large lookup passed as the small one. dpproxy
    reads names without regard to case: a policy whose name matches two tables, or a table
    with two such columns, stops the start, naming both."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{pg_schema}"')
        conn.execute("CREATE TABLE t (pid integer, code integer)")
        conn.execute('CREATE TABLE "Lookup" (code integer PRIMARY KEY, label text)')
        conn.execute("CREATE TABLE lookup (code integer PRIMARY KEY, label text)")
        conn.execute("INSERT INTO lookup SELECT i, 'x' FROM generate_series(1, 50) i")
        conn.execute('CREATE TABLE "T2" (pid integer, "Code" integer, code integer)')

    async def declared() -> Schema:
        backend = PostgresBackend(pg_dsn, pool_size=1, timeout_seconds=5)
        try:
            return await backend.schema_declared(pg_schema)
        finally:
            await backend.close()

    schema = asyncio.run(declared())
    with pytest.raises(PolicyError) as refused:
        build_catalog(column_types(schema), POLICIES, schema=pg_schema)
    assert str(refused.value) == (
        '[tables.lookup]: the database has tables "Lookup" and "lookup", whose names differ '
        "only in case, which dpproxy cannot tell apart; rename one of them (or serve another "
        "schema)"
    )
    policies = {"t2": TablePolicy(privacy_unit="pid")}
    with pytest.raises(PolicyError, match='columns of "T2" "Code" and "code"'):
        build_catalog(column_types(schema), policies, schema=pg_schema)
    # Without the second spelling, the same tables are served.
    alone = {k: v for k, v in schema.items() if k != "Lookup"}
    assert build_catalog(column_types(alone), POLICIES, schema=pg_schema).table("lookup")
