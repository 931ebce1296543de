"""DuckDB's DECIMAL columns hold no NaN or infinity, and a DECIMAL(p, s) has no non-zero
value closer to 0 than 10^-s: the rewriter then cleans such a column with a plain clamp,
without the tests for non-finite and tiny values, and counts it as it is
(``ColumnInfo.finite``, ``bound_per_unit.clean``). PostgreSQL's numeric(p, s) holds NaN,
so there the tests stay and NaN still counts as NULL.

Each query's exact totals (no noise) must equal those of the fully tested cleaning, on
extreme values of each type, NULLs and zeros included."""

from __future__ import annotations

import asyncio
from pathlib import Path

import duckdb
import psycopg
import pytest

from proxy.backends import Backend, column_digits, column_types
from proxy.backends.duckdb import DuckDBBackend
from proxy.backends.postgres import PostgresBackend
from rewriter import Catalog, ColumnPolicy, PlanRequest, TablePolicy, build_catalog, plan

POLICY = TablePolicy(
    privacy_unit="pid",
    max_rows_per_unit=50,
    columns={
        "price": ColumnPolicy(lower=0, upper=50),
        "fine": ColumnPolicy(lower=-1, upper=1),  # 37 places: below the flush threshold
        "share": ColumnPolicy(lower=-0.25, upper=0.75),
    },
)
CREATE = (
    "CREATE TABLE {schema}t (pid INTEGER, price DECIMAL(15,2), fine DECIMAL(38,37), "
    "share DECIMAL(4,4))"
)
VALUES = [
    ("9999999999999.99", "9.9999999999999999999999999999999999999", "0.9999"),
    ("-9999999999999.99", "-9.9999999999999999999999999999999999999", "-0.9999"),
    ("0", "0", "0"),
    ("0.01", "0.0000000000000000000000000000000000001", "0.0001"),
    ("-0.01", "-0.0000000000000000000000000000000000001", "-0.0001"),
    ("49.99", "0.5", "0.25"),
    ("50.01", "1.0000000000000000000000000000000000001", "0.7501"),
    ("NULL", "NULL", "NULL"),
    ("12.5", "-0.5", "-0.5"),
]
QUERIES = [
    "SELECT COUNT(price), SUM(price), AVG(price) FROM t",
    "SELECT COUNT(fine), SUM(fine), AVG(share), COUNT(share) FROM t",
    "SELECT VAR_POP(price), STDDEV(share) FROM t",
    "SELECT SUM(price * (1 - share)), SUM(price * fine), SUM(share * share) FROM t",
    "SELECT COUNT(*) FILTER (WHERE price > 10), SUM(price) FILTER (WHERE share < 0) FROM t",
]


def _rows() -> list[str]:
    return [f"({pid}, {p}, {f}, {s})" for pid in range(1, 4) for p, f, s in VALUES]


def _catalog(backend: Backend, schema: str, *, finite: bool) -> Catalog:
    async def declared():  # type: ignore[no-untyped-def]
        try:
            return await backend.schema_declared(schema)
        finally:
            await backend.close()

    found = asyncio.run(declared())
    return build_catalog(
        column_types(found),
        {"t": POLICY},
        schema=schema,
        digits=column_digits(found),
        finite_decimals=finite,
    )


def _duckdb_file(tmp_path: Path) -> Path:
    path = tmp_path / "finite.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute(CREATE.format(schema=""))
        conn.execute("INSERT INTO t VALUES " + ", ".join(_rows()))
    return path


@pytest.mark.parametrize("query", QUERIES)
def test_duckdb_decimals_are_cleaned_without_tests_and_count_the_same(
    tmp_path: Path, query: str
) -> None:
    path = _duckdb_file(tmp_path)
    assert DuckDBBackend.finite_decimals
    finite = _catalog(DuckDBBackend(path, timeout_seconds=5), "main", finite=True)
    tested = _catalog(DuckDBBackend(path, timeout_seconds=5), "main", finite=False)
    assert finite.table("t").column("price").finite
    assert not tested.table("t").column("price").finite
    short = plan(query, finite, PlanRequest(1.0)).sql
    long = plan(query, tested, PlanRequest(1.0)).sql
    assert "1.7976931348623157e308" in long and len(short) < len(long)
    if "fine" not in query:  # fine keeps its test for tiny values; the others lose all
        assert "1.7976931348623157e308" not in short
    with duckdb.connect(str(path), read_only=True) as conn:
        assert conn.execute(short).fetchall() == conn.execute(long).fetchall()


def test_postgres_numeric_keeps_its_tests_and_nan_counts_as_null(
    pg_dsn: str, pg_schema: str
) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{pg_schema}"')
        conn.execute(
            CREATE.format(schema="").replace("DECIMAL", "numeric").replace("INTEGER", "integer")
        )
        conn.execute("INSERT INTO t VALUES " + ", ".join(_rows()))
        conn.execute("INSERT INTO t VALUES (1, 'NaN', 'NaN', 'NaN')")
        assert not PostgresBackend.finite_decimals
        catalog = _catalog(
            PostgresBackend(pg_dsn, pool_size=1, timeout_seconds=5),
            pg_schema,
            finite=PostgresBackend.finite_decimals,
        )
        assert not catalog.table("t").column("price").finite
        made = plan(
            "SELECT COUNT(price), COUNT(share) FROM t", catalog, PlanRequest(1.0, "postgres")
        )
        # 8 non-NULL values for each of 3 persons; the NaN row is not counted.
        assert conn.execute(made.sql).fetchall() == [(24, 24)]
