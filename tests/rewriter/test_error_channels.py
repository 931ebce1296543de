"""No accepted query may fail on particular values: an error that happens only when some
row exists reveals that row, around the noise (review findings)."""

from __future__ import annotations

import duckdb
import psycopg
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
from tests.rewriter.tables import Row, catalog, duckdb_with, load_postgres

CATALOG = catalog("main")


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        (
            "SELECT COUNT(*) FROM visits WHERE CASE WHEN patient_id = 42 "
            "THEN CAST(department AS INT) ELSE 0 END = 0",
            "could fail",
        ),
        ("SELECT COUNT(*) FROM visits WHERE cost::int > 0", "could fail"),
        ("SELECT COUNT(*) FROM visits WHERE CAST(stay AS SMALLINT) > 0", "could fail"),
        ("SELECT COUNT(*) FROM visits WHERE department = 5", "different types"),
        ("SELECT COUNT(*) FROM visits WHERE stay IN (1, 'x', department)", "different types"),
        ("SELECT COUNT(*) FROM visits WHERE department + 1 > 2", "arithmetic on a column"),
        # Overflow oracles: the error would show whether the condition held for a person.
        (
            "SELECT COUNT(*) FROM visits WHERE CASE WHEN patient_id = 17 THEN "
            "patient_id * 9223372036854775807 ELSE 0 END = 0",
            "arithmetic on a column",
        ),
        ("SELECT COUNT(*) FROM visits WHERE 10 / (stay - 5) > 1", "arithmetic on a column"),
        (
            "SELECT SUM(CASE WHEN cost * 1e308 > 1 THEN 1 ELSE 0 END) FROM visits",
            "arithmetic on a column",
        ),
        ("SELECT COUNT(cost * 1e308) FROM visits", "arithmetic on a column"),
        ("SELECT COUNT(*) FILTER (WHERE stay * 2 > 3) FROM visits", "arithmetic on a column"),
        (
            "SELECT SUM(stay * 1099511627776 * 1099511627776 / 1099511627776) FROM visits",
            "can exceed",
        ),
        ("SELECT SUM((cost * 1e300) / 1e300) FROM visits", "can exceed"),
        (
            "SELECT SUM(CASE WHEN stay > 1 THEN department ELSE 0 END) FROM visits",
            "different types",
        ),
    ],
)
def test_queries_that_could_fail_on_some_rows_are_refused(sql: str, words: str) -> None:
    with pytest.raises(Rejected) as caught:
        plan(sql, CATALOG, PlanRequest(1.0))
    assert words in caught.value.message


# Arguments an engine checks only when it calls the function, on the rows that reach it
# (review findings: a CASE over the data made them invalid for one person's rows only).
@pytest.mark.parametrize(
    ("sql", "words"),
    [
        (
            "SELECT COUNT(*) FROM visits WHERE substring(department, 1, "
            "CASE WHEN cost > 50 THEN -1 ELSE 1 END) = 'x'",
            "substring needs constant",
        ),
        ("SELECT COUNT(*) FROM visits WHERE substring(department, 1, -1) = 'x'", "substring"),
        ("SELECT COUNT(*) FROM visits WHERE substring(department, stay) = 'x'", "substring"),
        ("SELECT COUNT(*) FROM visits WHERE substring(department FROM '(') = 'x'", "substring"),
        (
            "SELECT COUNT(*) FROM visits WHERE round(cost, CASE WHEN stay > 2 THEN 99999 "
            "ELSE 1 END) > 1",
            "round(x, d) needs",
        ),
        ("SELECT COUNT(*) FROM visits WHERE round(cost, 400) > 1", "round(x, d) needs"),
        ("SELECT COUNT(*) FROM visits WHERE department LIKE department", "pattern of LIKE"),
        (
            "SELECT COUNT(*) FROM visits WHERE department ILIKE "
            "CASE WHEN cost > 5 THEN 'A\\' ELSE 'A' END",
            "pattern of LIKE",
        ),
        ("SELECT COUNT(*) FROM visits WHERE department LIKE 'A\\'", "escape character"),
        ("SELECT COUNT(*) FROM visits WHERE abs(stay) > 1", "arithmetic on a column"),
        ("SELECT COUNT(*) FILTER (WHERE abs(cost) > 1) FROM visits", "arithmetic on a column"),
        # DuckDB reads a longer integer as a BIGNUM that fails to convert on the first row
        # compared with it; numbers beyond DOUBLE's range fail on PostgreSQL.
        ("SELECT COUNT(*) FROM visits WHERE stay > 2 AND cost > 1" + "0" * 400, "out of the"),
        ("SELECT COUNT(*) FROM visits WHERE stay < 1" + "0" * 18, "out of the range"),
        ("SELECT COUNT(*) FROM visits WHERE cost > 1e400", "out of the range"),
        ("SELECT COUNT(*) FROM visits WHERE cost > 1e-400", "out of the range"),
        # Third review: raw values keep their physical type (a HUGEINT column is INTEGER
        # to the rewriter, a DOUBLE does not fit a REAL), and DuckDB's ROUND of a
        # DECIMAL(38,0) to tens overflows at its largest values.
        ("SELECT COUNT(*) FROM visits WHERE CAST(stay AS BIGINT) > 1", "could fail"),
        ("SELECT COUNT(*) FROM visits WHERE CAST(cost AS REAL) > 1", "could fail"),
        ("SELECT COUNT(*) FROM visits WHERE round(stay, -1) > 1", "round(x, d) needs"),
        # Second review: EXTRACT of a field a date does not have fails on PostgreSQL row by
        # row; a date beyond year 9999 fails when DuckDB converts it to a timestamp.
        (
            "SELECT COUNT(*) FROM visits WHERE CASE WHEN cost > 5 THEN "
            "extract(hour FROM CAST('2020-01-01' AS DATE)) ELSE 0 END = 0",
            "a date has no hour",
        ),
        # PostgreSQL refuses these as it reads them (22008), as dpproxy does.
        (
            "SELECT COUNT(*) FROM visits WHERE CAST('2020-13-45' AS DATE) IS NULL",
            'date/time field value out of range: "2020-13-45"',
        ),
        (
            "SELECT COUNT(*) FROM visits WHERE stay > 2 AND CAST('300000-01-01' AS DATE) "
            "> CAST('2020-01-01' AS DATE)",
            "not a date",
        ),
        (
            "SELECT COUNT(*) FROM visits WHERE TIMESTAMP '2020-01-01 25:00:00' IS NULL",
            "date/time field value out of range",
        ),
    ],
)
def test_arguments_checked_only_on_some_rows_must_be_valid_constants(sql: str, words: str) -> None:
    with pytest.raises(Rejected) as caught:
        plan(sql, CATALOG, PlanRequest(1.0))
    assert words in caught.value.message


SAFE = [
    "SELECT COUNT(*) FROM visits WHERE department = 'A' AND stay > 2",
    "SELECT COUNT(*) FROM visits WHERE CAST(stay AS DOUBLE) > 1 AND CAST(cost AS TEXT) <> 'x'",
    "SELECT SUM(10 / (stay + 1)) FROM visits WHERE stay > 1 OR cost < 5",
    "SELECT SUM(GREATEST(cost, -2000000000000000)) FROM visits",
    "SELECT SUM(cost / (stay + 3)) FROM visits",
    "SELECT COUNT(*) FROM visits WHERE substring(department, 1, 1) = 'A' AND "
    "substring(department FROM 2) = '' AND department LIKE 'A%' AND department NOT ILIKE 'b\\\\'",
    "SELECT COUNT(*) FROM visits WHERE round(stay, 1) > 2 AND round(cost) < 90",
    # Second review: literals typed as 32-bit INTEGER overflowed on the rows where a
    # condition held (intervals bound the value, not the type it is computed in).
    "SELECT SUM(2 * CASE WHEN cost > 5 THEN 2000000000 ELSE 0 END) FROM visits",
    "SELECT SUM(CASE WHEN stay > 1 THEN CAST(30000 AS SMALLINT) END * CAST(2 AS SMALLINT)) "
    "FROM visits",
    "SELECT MEDIAN(2 * COALESCE(CASE WHEN cost > 5 THEN 2000000000 END, 0)) FROM visits",
    "SELECT COUNT(*) FROM visits WHERE cost > 0.5 AND stay IN (1, 2.5) AND "
    "coalesce(stay, 0.25) < 1.2345678901234567890123456789012345678",
    "SELECT COUNT(*) FROM visits WHERE stay < 9"
    + "9" * 16
    + " AND cost > -1e300 AND cost > 1e-300",
]
# Zero divisors (stay = 5), NULL costs and NULL stays: each used to be a possible error.
ROWS: list[Row] = [(1, 1, "A", None, 5), (2, 2, "B", 3.0, 5), (3, 3, "A", 1e300, None)]


@pytest.mark.parametrize("sql", SAFE)
def test_accepted_queries_run_on_duckdb_whatever_the_rows(sql: str) -> None:
    made = plan(sql, CATALOG, PlanRequest(1.0))
    duckdb_with(ROWS).execute(made.sql).fetchall()


@pytest.mark.postgres
@pytest.mark.parametrize("sql", SAFE)
def test_accepted_queries_run_on_postgres_whatever_the_rows(
    sql: str, pg_dsn: str, pg_schema: str
) -> None:
    load_postgres(pg_dsn, pg_schema, ROWS)
    made = plan(sql, catalog(pg_schema), PlanRequest(1.0, "postgres"))
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(made.sql.encode()).fetchall()


def test_analyst_comments_never_reach_the_database() -> None:
    made = plan(
        "SELECT COUNT(*) /* a */ FROM visits -- b\n WHERE stay > 3 /*+ hint */",
        CATALOG,
        PlanRequest(1.0),
    )
    assert "/*" not in made.sql and "--" not in made.sql


def test_keys_equal_in_the_domain_are_one_group() -> None:
    made = plan(
        "SELECT CASE WHEN stay > 3 THEN 0.0 ELSE 1.0 END AS k, COUNT(*) FROM visits GROUP BY 1",
        CATALOG,
        PlanRequest(1.0),
    )

    released = made.release([(-0.0, 1), (0.0, 2), (1.0, 4)], ZeroNoise())
    assert released.rows == ((0.0, 3), (1.0, 4))


NARROW_INTEGERS = [("INTEGER", 100_000), ("SMALLINT", 30_000)]  # type, largest value
WIDE_PRODUCTS = ["SELECT VAR_POP(x) FROM t", "SELECT SUM(x * x) FROM t", "SELECT AVG(x * 3) FROM t"]


def _narrow_catalog(schema: str, upper: int) -> Catalog:
    policy = TablePolicy(
        privacy_unit="pid", max_rows_per_unit=3, columns={"x": ColumnPolicy(lower=0, upper=upper)}
    )
    return build_catalog(
        {"t": {"pid": ColumnType.INTEGER, "x": ColumnType.INTEGER}}, {"t": policy}, schema=schema
    )


@pytest.mark.parametrize(("column_type", "upper"), NARROW_INTEGERS)
@pytest.mark.parametrize("sql", WIDE_PRODUCTS)
def test_products_of_narrow_integer_columns_never_overflow(
    sql: str, column_type: str, upper: int, pg_dsn: str, pg_schema: str
) -> None:
    """x * x of an INTEGER or SMALLINT column overflowed its type on rows with large
    values (an error that reveals them): cleaned integers are BIGINT."""
    rows = f"(1, 0), (2, {upper}), (3, {upper - 1}), (3, {upper})"
    duck = duckdb.connect()
    duck.execute(f"CREATE TABLE main.t (pid BIGINT, x {column_type})")
    duck.execute(f"INSERT INTO main.t VALUES {rows}")
    expected = duck.execute(
        plan(sql, _narrow_catalog("main", upper), PlanRequest(1.0)).sql
    ).fetchall()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'DROP TABLE IF EXISTS "{pg_schema}".t')
        conn.execute(f'CREATE TABLE "{pg_schema}".t (pid BIGINT, x {column_type})')
        conn.execute(f'INSERT INTO "{pg_schema}".t VALUES {rows}')
        made = plan(sql, _narrow_catalog(pg_schema, upper), PlanRequest(1.0, dialect="postgres"))
        found = conn.execute(made.sql).fetchall()
    assert [[int(v) for v in r] for r in found] == [[int(v) for v in r] for r in expected]


# Extreme decimals and wide integers, with bounds of more decimal places than the column:
# comparing such a column with a fractional literal made DuckDB cast it to a wider DECIMAL
# that large values overflow, and PostgreSQL failed to cast numerics beyond DOUBLE's range
# (or below its smallest subnormal) to DOUBLE: errors that reveal those rows.
EXTREME_QUERIES = [
    "SELECT SUM(amount), AVG(amount) FROM pay",
    "SELECT SUM(amount) FROM pay WHERE pid = 2",
    "SELECT MEDIAN(amount), COUNT(amount), SUM(n) FROM pay",
    "SELECT floor(amount / 10) * 10 AS band, COUNT(*), SUM(n) FROM pay GROUP BY 1",
]
DUCKDB_EXTREMES = [
    ("DECIMAL(38,0)", "HUGEINT", ["10::HUGEINT ** 37", "-(10::HUGEINT ** 37)", "7", "NULL"]),
    ("DECIMAL(38,37)", "BIGINT", ["9.5", "-9.9999", "0.0000000000000000000000000000000000001"]),
    ("DOUBLE", "HUGEINT", [f"{2**127 - 1}", f"-{2**127 - 1}", "7"]),  # n: HUGEINT's limits
]
POSTGRES_EXTREMES = [
    ("NUMERIC", "NUMERIC", ["1e400", "-1e400", "1e-400", "'NaN'", "'Infinity'", "7", "NULL"]),
]


def _extreme_catalog(
    schema: str, amount: ColumnType, n: ColumnType, n_bounds: tuple[float, float] = (0.5, 9.75)
) -> Catalog:
    return build_catalog(
        {"pay": {"pid": ColumnType.INTEGER, "amount": amount, "n": n}},
        {
            "pay": TablePolicy(
                privacy_unit="pid",
                max_rows_per_unit=2,
                columns={
                    "amount": ColumnPolicy(lower=-100.125, upper=100.5),
                    "n": ColumnPolicy(lower=n_bounds[0], upper=n_bounds[1]),
                },
            )
        },
        schema=schema,
    )


def _outside(values: list[str]) -> int:
    """Persons (one row each) whose amount lies outside [-100.125, 100.5]."""
    numbers = [float(eval(v.replace("::HUGEINT", ""))) for v in values if v != "NULL"]  # noqa: S307
    return sum(1 for x in numbers if not -100.125 <= x <= 100.5)


@pytest.mark.parametrize("n_bounds", [(0.5, 9.75), (0.2, 0.8)])  # (0.2, 0.8): no integer
@pytest.mark.parametrize("bias_check", [False, True])
@pytest.mark.parametrize("sql", EXTREME_QUERIES)
@pytest.mark.parametrize(("amount", "n", "values"), DUCKDB_EXTREMES)
def test_extreme_decimals_never_fail_on_duckdb(
    sql: str,
    amount: str,
    n: str,
    values: list[str],
    bias_check: bool,
    n_bounds: tuple[float, float],
) -> None:
    duck = duckdb.connect()
    duck.execute(f"CREATE TABLE main.pay (pid BIGINT, amount {amount}, n {n})")
    for pid, value in enumerate(values, start=1):
        duck.execute(f"INSERT INTO main.pay VALUES ({pid}, {value}, {value})")
    kind = ColumnType.FLOAT if amount == "DOUBLE" else ColumnType.DECIMAL
    number = ColumnType.INTEGER if n in ("HUGEINT", "BIGINT") else ColumnType.DECIMAL
    catalog = _extreme_catalog("main", kind, number, n_bounds)
    made = plan(sql, catalog, PlanRequest(1.0, delta=1e-6, bias_check=bias_check))
    rows = duck.execute(made.sql).fetchall()
    release = made.release(rows, ZeroNoise())
    if bias_check and sql == EXTREME_QUERIES[0]:
        (found,) = (c for c in release.checks if "pay.amount" in c)
        assert found.startswith(f"about {_outside(values)} (")


@pytest.mark.parametrize("bias_check", [False, True])
@pytest.mark.parametrize("sql", EXTREME_QUERIES)
@pytest.mark.parametrize(("amount", "n", "values"), POSTGRES_EXTREMES)
def test_extreme_numerics_never_fail_on_postgres(
    sql: str, amount: str, n: str, values: list[str], bias_check: bool, pg_dsn: str, pg_schema: str
) -> None:
    catalog = _extreme_catalog(pg_schema, ColumnType.DECIMAL, ColumnType.DECIMAL)
    made = plan(
        sql, catalog, PlanRequest(1.0, dialect="postgres", delta=1e-6, bias_check=bias_check)
    )
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE TABLE "{pg_schema}".pay (pid BIGINT, amount {amount}, n {n})')
        for pid, value in enumerate(values, start=1):
            conn.execute(f'INSERT INTO "{pg_schema}".pay VALUES ({pid}, {value}, {value})')
        assert conn.execute(made.sql).fetchall()
