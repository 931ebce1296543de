"""A query that the engine refuses for its shape alone is refused before it is charged
(rewriter.passes.engine_limits): a red-team reviewer's 26 quantiles in one query were charged
on PostgreSQL and then always failed, as the per-person query selected more than the 1664
entries a PostgreSQL select list may hold (64 bin counts per quantile)."""

from __future__ import annotations

import duckdb
import psycopg
import pytest

from rewriter import (
    ColumnPolicy,
    ColumnType,
    PlanRequest,
    Rejected,
    TablePolicy,
    build_catalog,
    plan,
)
from rewriter.passes.engine_limits import POSTGRES_MAX_SELECTED

READINGS = {
    "reading_id": ColumnType.INTEGER,
    "person_id": ColumnType.INTEGER,
    "value": ColumnType.FLOAT,
}
POLICY = TablePolicy(
    privacy_unit="person_id",
    max_rows_per_unit=4,
    columns={"value": ColumnPolicy(lower=0, upper=100)},
)
CREATE = "CREATE TABLE {}.readings (reading_id BIGINT, person_id BIGINT, value DOUBLE PRECISION)"


def _quantiles(count: int) -> str:
    listed = ", ".join(f"quantile_cont(value * {i + 1}, 0.5)" for i in range(count))
    return f"SELECT {listed} FROM readings"


def _plan(count: int, dialect: str, schema: str) -> str:
    catalog = build_catalog({"readings": READINGS}, {"readings": POLICY}, schema=schema)
    return plan(_quantiles(count), catalog, PlanRequest(1.0, dialect)).sql  # type: ignore[arg-type]


@pytest.mark.postgres
def test_postgres_gets_at_most_its_select_list_and_duckdb_more(pg_dsn: str, pg_schema: str) -> None:
    fits = 25  # 25 * 64 bin counts and the unit's columns: within 1664
    with psycopg.connect(pg_dsn, autocommit=True) as pg:
        pg.execute(CREATE.format(f'"{pg_schema}"').encode())
        pg.execute(f'INSERT INTO "{pg_schema}".readings VALUES (1, 1, 5.0)'.encode())
        rows = pg.execute(_plan(fits, "postgres", pg_schema).encode()).fetchall()
        assert len(rows) == 1
    with pytest.raises(Rejected) as rejected:
        _plan(fits + 1, "postgres", pg_schema)
    assert rejected.value.sqlstate == "54011"
    assert rejected.value.message.startswith("this query needs ")
    assert f"PostgreSQL allows at most {POSTGRES_MAX_SELECTED}" in rejected.value.message
    assert (
        rejected.value.hint == "ask fewer quantiles or aggregates per query: split it into several"
    )
    # DuckDB has no such limit: the same query runs there.
    conn = duckdb.connect()
    conn.execute(CREATE.format("main"))
    conn.execute("INSERT INTO main.readings VALUES (1, 1, 5.0)")
    assert len(conn.execute(_plan(fits + 5, "duckdb", "main")).fetchall()) == 1
