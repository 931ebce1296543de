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
from rewriter.passes import engine_limits
from rewriter.passes.engine_limits import POSTGRES_MAX_SELECTED

READINGS = {
    "reading_id": ColumnType.INTEGER,
    "person_id": ColumnType.INTEGER,
    "value": ColumnType.FLOAT,
    "grp": ColumnType.INTEGER,
}
POLICY = TablePolicy(
    privacy_unit="person_id",
    max_rows_per_unit=4,
    max_groups_per_unit=2,
    columns={"value": ColumnPolicy(lower=0, upper=100), "grp": ColumnPolicy(domain=[1, 2, 3])},
)
CREATE = (
    "CREATE TABLE {}.readings (reading_id BIGINT, person_id BIGINT, value DOUBLE PRECISION, "
    "grp INTEGER)"
)


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
        pg.execute(f'INSERT INTO "{pg_schema}".readings VALUES (1, 1, 5.0, 1)'.encode())
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
    conn.execute("INSERT INTO main.readings VALUES (1, 1, 5.0, 1)")
    assert len(conn.execute(_plan(fits + 5, "duckdb", "main")).fetchall()) == 1


def _grouped(quantiles: int, averages: int) -> str:
    listed = [f"quantile_cont(value * {i + 1}, 0.5)" for i in range(quantiles)]
    listed += [f"AVG(value + {i})" for i in range(averages)]
    return f"SELECT grp, {', '.join(listed)} FROM readings GROUP BY grp"


@pytest.mark.postgres
@pytest.mark.parametrize("bias_check", [False, True])
def test_the_widest_grouped_query_planned_runs_on_postgres(
    pg_dsn: str, pg_schema: str, bias_check: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Grouped, the bounded query ranks each person's groups with SELECT *, ROW_NUMBER()
    OVER (…): PostgreSQL counts what * expands to, the window's hidden entries and, with the
    bias check, its columns. A reviewer's 25 quantiles and 30 AVGs by group were planned
    (* counted as one entry), charged, and then refused by PostgreSQL (54011)."""
    catalog = build_catalog({"readings": READINGS}, {"readings": POLICY}, schema=pg_schema)
    request = PlanRequest(1.0, "postgres", bias_check=bias_check)
    planned: dict[int, str] = {}
    for averages in range(24, 32):
        try:
            planned[averages] = plan(_grouped(25, averages), catalog, request).sql
        except Rejected as refused:
            assert refused.sqlstate == "54011"
    widest = max(planned)
    assert widest < 30 and widest + 1 not in planned  # the reviewer's 30 is refused
    with psycopg.connect(pg_dsn, autocommit=True) as pg:
        pg.execute(CREATE.format(f'"{pg_schema}"').encode())
        pg.execute(f'INSERT INTO "{pg_schema}".readings VALUES (1, 1, 5.0, 1)'.encode())
        rows = pg.execute(planned[widest].encode()).fetchall()
        assert rows
        # What is refused would fail on PostgreSQL whatever the data, close to the line:
        # planned without the check, two AVGs more than the widest fail there.
        monkeypatch.setattr(engine_limits, "POSTGRES_MAX_SELECTED", 10**6)
        over = plan(_grouped(25, widest + 2), catalog, request).sql
        with pytest.raises(psycopg.errors.TooManyColumns):
            pg.execute(over.encode())
