"""A row-level subquery joined with LEFT JOIN is inlined (rewriter.passes.subqueries): its
columns become its tables' columns, which are NULL where the join finds no row, as the
subquery's are in PostgreSQL. A column it computes is NULL there too only if computed
through strict operations on its columns; one that is not (``1 AS one``, COALESCE, CASE)
would have its value on every unmatched row, and ``COUNT(d.one)`` counted them: refused,
with the way to write it."""

from __future__ import annotations

import pytest

from rewriter import (
    Catalog,
    ColumnPolicy,
    ColumnType,
    PlanRequest,
    Rejected,
    TablePolicy,
    build_catalog,
    plan,
)
from tests.rewriter.noise import ZeroNoise
from tests.rewriter.post import post_processed
from tests.rewriter.scratch import fresh_duckdb, insert

COLUMNS = {
    "visits": {
        "patient_id": ColumnType.INTEGER,
        "department": ColumnType.TEXT,
        "stay": ColumnType.INTEGER,
    },
    "departments": {"name": ColumnType.TEXT, "floor": ColumnType.INTEGER},
}
POLICIES = {
    "visits": TablePolicy(
        privacy_unit="patient_id",
        max_rows_per_unit=5,
        columns={"stay": ColumnPolicy(lower=0, upper=10)},
    ),
    "departments": TablePolicy(public=True),
}
VISITS = [(1, "A", 1), (1, "B", 2), (2, "X", 3), (3, None, 4), (4, "A", 5)]
DEPARTMENTS = [("A", 1), ("B", None)]


def catalog() -> Catalog:
    return build_catalog(COLUMNS, POLICIES, schema="main", unique={"departments": ["name"]})


def exact(sql: str) -> list[tuple[object, ...]]:
    """The query's answer without noise (the bounds hold every row), on DuckDB."""
    made = plan(sql, catalog(), PlanRequest(1.0))
    conn = fresh_duckdb()
    conn.execute("CREATE TABLE visits (patient_id INTEGER, department VARCHAR, stay INTEGER)")
    conn.execute("CREATE TABLE departments (name VARCHAR, floor INTEGER)")
    insert(conn, "visits", VISITS)
    insert(conn, "departments", DEPARTMENTS)
    rows = conn.execute(made.sql).fetchall()
    return post_processed(made, list(made.release(rows, ZeroNoise()).rows))


def native(sql: str) -> list[tuple[object, ...]]:
    """The same query run as it is, on the same rows."""
    conn = fresh_duckdb()
    conn.execute("CREATE TABLE visits (patient_id INTEGER, department VARCHAR, stay INTEGER)")
    conn.execute("CREATE TABLE departments (name VARCHAR, floor INTEGER)")
    insert(conn, "visits", VISITS)
    insert(conn, "departments", DEPARTMENTS)
    return [tuple(r) for r in conn.execute(sql).fetchall()]


@pytest.mark.parametrize(
    ("output", "column"),
    [
        ("1 AS one", "one"),
        ("COALESCE(floor, 0) AS f", "f"),
        ("CASE WHEN floor IS NULL THEN 0 ELSE floor END AS f", "f"),
        ("floor IS NULL AS f", "f"),
        ("'x' || name AS f", "f"),  # strict, but 'x' alone (below) is not
        ("upper('x') AS f", "f"),
        ("concat(name, 'x') AS f", "f"),
    ],
)
def test_a_computed_column_not_null_where_unmatched_is_refused(output: str, column: str) -> None:
    sql = (
        f"SELECT COUNT(d.{column}) FROM visits v LEFT JOIN (SELECT name, {output} "
        "FROM departments) d ON v.department = d.name"
    )
    if column == "f" and output.startswith("'x' ||"):
        assert exact(sql) == native(sql)  # strict: NULL where unmatched
        return
    with pytest.raises(Rejected, match=rf"d\.{column} is computed in a subquery joined with LEFT"):
        plan(sql, catalog(), PlanRequest(1.0))


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(d.n) FROM visits v LEFT JOIN (SELECT name AS n FROM departments) d "
        "ON v.department = d.n",
        "SELECT COUNT(d.u), COUNT(d.f2) FROM visits v LEFT JOIN (SELECT name, upper(name) AS u, "
        "length(lower(name)) AS f2 FROM departments) d ON v.department = d.name",
        "SELECT COUNT(*) FROM visits v LEFT JOIN (SELECT name, lower(name) AS u "
        "FROM departments) d ON v.department = d.name WHERE d.u IS NULL",
        "SELECT COUNT(d.one) FROM visits v JOIN (SELECT name, 1 AS one FROM departments) d "
        "ON v.department = d.name",
    ],
)
def test_strict_columns_and_inner_joins_answer_as_postgresql(sql: str) -> None:
    assert exact(sql) == native(sql)
