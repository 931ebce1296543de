"""Constant expressions are evaluated on their own before a query runs (review finding):
DuckDB fails on a constant it cannot compute only on the rows that evaluate it, so under a
condition the error would show whether some row meets it, whatever the ε."""

from __future__ import annotations

import duckdb
import psycopg
import pytest
import sqlglot

from rewriter import PlanRequest, plan
from rewriter.passes.constants import constants, evaluation_sql
from tests.rewriter.tables import Row, catalog, duckdb_with, load_postgres

CATALOG = catalog("main")
LEAKY = [
    # (CAST('x' AS INT) is refused before that, as PostgreSQL reads 'x': 22P02.)
    "SELECT COUNT(*) FROM visits WHERE CASE WHEN stay > 5 THEN CAST(3000000000 AS INT) ELSE 0 "
    "END = 0",
    "SELECT COUNT(*) FROM visits WHERE CASE WHEN stay > 5 THEN 3037000500 * 3037000500 "
    "ELSE 0 END = 0",
    "SELECT COUNT(*) FROM visits WHERE stay > 5 AND CAST(70000 AS SMALLINT) > 0",
    "SELECT COUNT(*) FILTER (WHERE stay > 5 AND CAST(1e19 AS BIGINT) IS NULL) FROM visits",
    "SELECT COUNT(CASE WHEN stay > 5 THEN 3037000500 * 3037000500 END) FROM visits",
    "SELECT COUNT(*) FROM visits WHERE stay > 5 AND DATE '2020-01-01' + INTERVAL '100000000 "
    "years' > DATE '2020-01-01'",
    "SELECT COUNT(*) FROM visits WHERE stay > 5 AND cost > CAST('NaN' AS DECIMAL)",
]
# One person with stay > 5, or none: the bounded query fails only with that person.
WITH_PERSON: list[Row] = [(1, 1, "A", 1.0, 2), (2, 2, "B", 2.0, 9)]
WITHOUT_PERSON: list[Row] = [(1, 1, "A", 1.0, 2)]


@pytest.mark.parametrize("sql", LEAKY)
def test_a_failing_constant_is_found_before_the_query_runs(sql: str) -> None:
    made = plan(sql, CATALOG, PlanRequest(1.0))
    assert made.constants, "the failing constant must be evaluated on its own"
    # The channel: run as is, the query fails only when the person exists…
    duckdb_with(WITHOUT_PERSON).execute(made.sql).fetchall()
    with pytest.raises(duckdb.Error):
        duckdb_with(WITH_PERSON).execute(made.sql).fetchall()
    # …while its constants alone fail whatever the data (they read no table).
    with pytest.raises(duckdb.Error):
        duckdb.connect().execute(evaluation_sql(made.constants)).fetchall()


@pytest.mark.postgres
@pytest.mark.parametrize("sql", LEAKY)
def test_on_postgres_either_the_constants_fail_or_the_query_runs(
    sql: str, pg_dsn: str, pg_schema: str
) -> None:
    """PostgreSQL computes constants when it plans a query (so most of these fail on every
    run); NaN is a NUMERIC there, so that query simply runs."""
    load_postgres(pg_dsn, pg_schema, WITH_PERSON)
    made = plan(sql, catalog(pg_schema), PlanRequest(1.0, "postgres"))
    with psycopg.connect(pg_dsn) as conn:
        try:
            conn.execute(evaluation_sql(made.constants).encode()).fetchall()
        except psycopg.Error:
            return  # refused before the query runs
        conn.execute(made.sql.encode()).fetchall()


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT COUNT(*) FROM visits WHERE stay > 5 AND cost < -3.5", []),
        ("SELECT SUM(cost) FROM visits GROUP BY department", []),  # RANDOM() is not one
        (
            "SELECT COUNT(*) FROM visits WHERE cost > 100 / 1.1 AND department <> 'A' || 'B'",
            ["CAST(100 AS DOUBLE PRECISION) / NULLIF(1.1, 0)", "'A' || 'B'"],
        ),
        (
            "SELECT COUNT(*) FROM visits WHERE CAST('7' AS INT) < stay AND stay < 2 + 3",
            ["CAST('7' AS INT)", "2 + 3"],
        ),
    ],
)
def test_the_constants_are_the_largest_computed_parts(sql: str, expected: list[str]) -> None:
    made = plan(sql, CATALOG, PlanRequest(1.0))
    assert sorted(c.written for c in made.constants) == sorted(expected)
    duckdb.connect().execute(evaluation_sql(made.constants) if made.constants else "SELECT 1")


@pytest.mark.parametrize(
    ("cast", "recorded"),
    [
        # A number its type holds, cast to DOUBLE or DECIMAL, cannot fail: the rewriter
        # writes such casts for its grids and exact sums, and leaves them unevaluated.
        ("CAST(16384.0 AS DOUBLE)", False),
        ("CAST(0.05 AS DECIMAL(18, 2))", False),
        ("-CAST(12 AS DECIMAL(3, 0))", False),
        ("CAST(0.125 AS DECIMAL(18, 2))", True),  # more places than the type has
        ("CAST(1000 AS DECIMAL(4, 2))", True),  # fails: too many digits
        ("CAST(1e5 AS DOUBLE)", True),
        ("CAST('1' AS DECIMAL(18, 2))", True),  # text
        # Review: more than 18 digits is a DOUBLE to DuckDB, which rounds to 1.0 and fails.
        ("CAST(0.99999999999999999999999999999999999999 AS DECIMAL(38, 38))", True),
        ("CAST(0 AS DECIMAL(0, 0))", True),
        ("CAST(0." + "0" * 400 + "1 AS DOUBLE)", True),  # underflows on PostgreSQL
    ],
)
def test_casts_of_numbers_their_type_holds_are_not_evaluated(cast: str, recorded: bool) -> None:
    tree = sqlglot.parse_one(f"SELECT x * {cast} FROM t", read="duckdb")
    found = constants(tree, "duckdb")
    assert bool(found) is recorded
    if not recorded:
        duckdb.connect().execute(f"SELECT {cast}").fetchall()  # indeed cannot fail


@pytest.mark.parametrize(
    ("array", "recorded"), [("['A', 'B']", False), ("[1, 'B']", True), ("[1 + 1]", True)]
)
def test_arrays_of_texts_are_not_evaluated(array: str, recorded: bool) -> None:
    """A GROUP BY text column's domain is written ARRAY_CONTAINS([…], column)."""
    tree = sqlglot.parse_one(f"SELECT x FROM t WHERE list_contains({array}, y)", read="duckdb")
    assert bool(constants(tree, "duckdb")) is recorded


@pytest.mark.parametrize(
    ("case", "recorded"),
    [
        ("CASE y WHEN 'A' THEN TRUE WHEN 'B' THEN TRUE ELSE FALSE END", False),
        ("CASE y WHEN 'A' || 'B' THEN TRUE ELSE FALSE END", True),
        ("CASE WHEN y = 'A' THEN CAST('x' AS INT) END", True),
    ],
)
def test_a_short_domains_case_of_texts_is_not_evaluated(case: str, recorded: bool) -> None:
    """A GROUP BY text column's short domain is written CASE y WHEN 'A' THEN TRUE …: its
    WHENs are literals, nothing to evaluate before the query (it had four constants)."""
    tree = sqlglot.parse_one(f"SELECT x FROM t WHERE {case}", read="duckdb")
    assert bool(constants(tree, "duckdb")) is recorded


DAYS_OF_A_DATE = [
    "SELECT COUNT(CASE WHEN DATE '2020-02-29' + 1 = DATE '2020-03-01' THEN 1 END) FROM visits",
    "SELECT COUNT(CASE WHEN 1 + DATE '2020-02-29' = DATE '2020-03-01' THEN 1 END) FROM visits",
    "SELECT COUNT(CASE WHEN DATE '2020-03-01' - (1) = DATE '2020-02-29' THEN 1 END) FROM visits",
    "SELECT COUNT(CASE WHEN DATE '2020-02-29' + -(3 - 2) = DATE '2020-02-28' THEN 1 END) "
    "FROM visits",
    "SELECT SUM(CASE WHEN (DATE '2020-02-29' + 1) - 1 = DATE '2020-02-29' THEN stay END) "
    "FROM visits",
]


@pytest.mark.parametrize(
    "dialect", ["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)]
)
@pytest.mark.parametrize("sql", DAYS_OF_A_DATE)
def test_days_added_to_a_constant_date_inside_an_aggregate_stay_integers(
    sql: str, dialect: str, request: pytest.FixtureRequest
) -> None:
    """Integer literals inside aggregates are widened to BIGINT, but neither engine has
    date ± bigint: the query was refused as if its constant could not be computed. The
    days of a constant date stay INTEGER; the constant is still evaluated on its own."""
    if dialect == "duckdb":
        conn = duckdb_with(WITH_PERSON)
        made = plan(sql, CATALOG, PlanRequest(1.0))
        conn.execute(evaluation_sql(made.constants)).fetchall()
        (row,) = conn.execute(made.sql).fetchall()
    else:
        dsn, schema = request.getfixturevalue("pg_dsn"), request.getfixturevalue("pg_schema")
        load_postgres(dsn, schema, WITH_PERSON)
        made = plan(sql, catalog(schema), PlanRequest(1.0, "postgres"))
        with psycopg.connect(dsn) as pg:
            pg.execute(evaluation_sql(made.constants).encode()).fetchall()
            (row,) = pg.execute(made.sql.encode()).fetchall()
    assert made.constants
    assert row[0] == (11 if "SUM" in sql else 2)  # stays 2 and 9; two persons
