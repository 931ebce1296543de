"""A per-person value of no values is NULL, as in the query written (red-team finding).

``SUM(cost)`` of a person whose costs are all NULL is NULL; the per-person clamp
``LEAST(GREATEST(SUM(x), low), high)`` made it ``low`` (GREATEST skips NULL on both
engines), so ``COUNT(s.tot)`` counted that person, ``WHERE s.tot <= 10`` kept them and
``s.tot IS NULL`` was never true. The exact (noise-free) answers are compared with the
query run as written on PostgreSQL, on DuckDB and PostgreSQL alike.

A per-person subquery over a table that sets no group cap (one row per person) no longer
sets the enclosing query's cap to 1: ``visits JOIN (SELECT patient_id, … FROM patients
GROUP BY patient_id)`` keeps as many groups as ``visits JOIN patients``."""

from __future__ import annotations

import psycopg
import pytest

from rewriter import PlanRequest, plan
from tests.rewriter import tables
from tests.rewriter.noise import ZeroNoise

#: Patient 1's one visit has no cost and no stay; patient 2's has both.
ROWS: list[tables.Row] = [(1, 1, "A", None, None), (2, 2, "A", 30.0, 4)]
PER_PERSON = "(SELECT patient_id, SUM(cost) AS tot, MAX(stay) AS m FROM visits GROUP BY patient_id)"
QUERIES = [
    f"SELECT COUNT(*) FROM {PER_PERSON} s WHERE s.tot <= 10",
    f"SELECT COUNT(s.tot), COUNT(s.m) FROM {PER_PERSON} s",
    f"SELECT COUNT(*) FILTER (WHERE s.tot IS NULL) FROM {PER_PERSON} s",
    f"SELECT SUM(s.tot) FROM {PER_PERSON} s",
]


@pytest.mark.postgres
@pytest.mark.parametrize("dialect", ["duckdb", "postgres"])
@pytest.mark.parametrize("sql", QUERIES)
def test_a_sum_of_no_values_is_null(sql: str, dialect: str, pg_dsn: str, pg_schema: str) -> None:
    tables.load_postgres(pg_dsn, pg_schema, ROWS)
    with psycopg.connect(pg_dsn, autocommit=True) as pg:
        pg.execute(f'SET search_path = "{pg_schema}"')
        written = pg.execute(sql.encode()).fetchall()
        schema = "main" if dialect == "duckdb" else pg_schema
        made = plan(sql, tables.catalog(schema), PlanRequest(1.0, dialect))  # type: ignore[arg-type]
        if dialect == "duckdb":
            exact = tables.duckdb_with(ROWS).execute(made.sql).fetchall()
        else:
            exact = pg.execute(made.sql.encode()).fetchall()
    released = made.release(exact, ZeroNoise()).rows
    assert [tuple(float(v) for v in row) for row in released] == [
        tuple(float(v) for v in row) for row in written
    ]


def test_a_per_person_subquery_keeps_the_joined_tables_group_cap() -> None:
    catalog = tables.catalog("main")
    joined = plan(
        "SELECT v.department, COUNT(*) FROM visits v JOIN patients p "
        "ON v.patient_id = p.patient_id GROUP BY 1",
        catalog,
        PlanRequest(1.0),
    )
    through_subquery = plan(
        "SELECT v.department, COUNT(*) FROM visits v JOIN (SELECT patient_id, COUNT(*) AS n "
        "FROM patients GROUP BY patient_id) s ON v.patient_id = s.patient_id GROUP BY 1",
        catalog,
        PlanRequest(1.0),
    )
    assert joined.max_groups_per_unit == tables.POLICY.max_groups_per_unit == 2
    assert through_subquery.max_groups_per_unit == 2
