"""width_bucket(x, lo, hi, n) never fails on particular values (review finding).

The rewriter computes width_bucket as CASE arithmetic on x cast to DOUBLE. On PostgreSQL
an unconstrained NUMERIC holds values that cast refuses (1e400, 1e-400): a query over such
a column failed only when such a row existed, after the charge, revealing the row. Now x
is compared with lo and hi in its own type and cast only between them, a value closer to
0 than TINY taking the bucket of 0: the query runs with and without the extreme person,
and its exact answers are the buckets Python computes. So does numeric arithmetic inside
an aggregate. Also: the argument of width_bucket is made portable as any other expression
(a nested width_bucket, round(x, d) of a double), a text argument is refused before the
charge (it was cast to DOUBLE row by row), and so are limits for which offset * n would
overflow.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal

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
from rewriter.plan import Plan
from tests.rewriter.coupling import in_key_order
from tests.rewriter.noise import ZeroNoise
from tests.rewriter.tables import SAMPLE_ROWS, catalog, duckdb_with, load_postgres

LOW, HIGH, COUNT = 0, 100, 4
WHERE_QUERY = "SELECT COUNT(*) FROM t WHERE width_bucket(num, 0, 100, 4) = 1"
GROUP_QUERY = (
    "SELECT width_bucket(num, 0, 100, 4) AS b, COUNT(*) FROM t "
    "GROUP BY width_bucket(num, 0, 100, 4)"
)
FILTER_QUERY = "SELECT COUNT(*) FILTER (WHERE width_bucket(num, 0, 100, 4) >= 4) FROM t"
#: One row per person (pid, num as SQL): ordinary values, edges, NULL.
ORDINARY = ["5", "24.999", "25", "30", "99.5", "100", "-3", "0", "NULL", "12.5"]
#: Each the one row of an extra person: the neighbouring database.
EXTREMES = ["1e400", "-1e400", "1e-400", "-1e-400", "'NaN'", "'Infinity'", "'-Infinity'"]


def _catalog(schema: str, digits: tuple[int, int] | None = None) -> Catalog:
    policy = TablePolicy(
        privacy_unit="pid",
        max_rows_per_unit=1,
        columns={"num": ColumnPolicy(lower=-1000, upper=1000)},
    )
    return build_catalog(
        {"t": {"pid": ColumnType.INTEGER, "num": ColumnType.DECIMAL}},
        {"t": policy},
        schema=schema,
        digits=None if digits is None else {"t": {"num": digits}},
    )


def _bucket(text: str) -> int | None:
    """width_bucket as PostgreSQL defines it, from the value's text, in exact decimals."""
    if text == "NULL":
        return None
    value = Decimal(text.strip("'"))
    if value.is_nan() or value >= HIGH:
        return COUNT + 1
    if value < LOW:
        return 0
    return math.floor((value - LOW) * COUNT / (HIGH - LOW)) + 1


def _expected(sql: str, values: Sequence[str]) -> dict[object, int]:
    buckets = [_bucket(v) for v in values]
    if sql == WHERE_QUERY:
        return {(): sum(1 for b in buckets if b == 1)}
    if sql == FILTER_QUERY:
        return {(): sum(1 for b in buckets if b is not None and b >= 4)}
    return {b: sum(1 for found in buckets if found == b) for b in [*range(COUNT + 2), None]}


def _released(made: Plan, rows: Sequence[Sequence[object]]) -> dict[object, int]:
    released = made.release(rows, ZeroNoise()).rows
    if made.keys:
        return {row[0]: _whole(row[1]) for row in released}
    return {(): _whole(released[0][0])}


def _whole(value: object) -> int:
    assert isinstance(value, (int, float)) and float(value).is_integer(), value
    return int(value)


def _run_postgres(dsn: str, schema: str, sql: str, values: Sequence[str]) -> dict[object, int]:
    made = plan(sql, _catalog(schema), PlanRequest(1.0, "postgres"))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP TABLE IF EXISTS "{schema}".t')
        conn.execute(f'CREATE TABLE "{schema}".t (pid BIGINT, num NUMERIC)')
        for pid, value in enumerate(values, start=1):
            conn.execute(f'INSERT INTO "{schema}".t VALUES ({pid}, {value})')
        rows = conn.execute(in_key_order(made).encode()).fetchall()
    return _released(made, rows)


@pytest.mark.postgres
@pytest.mark.parametrize("extreme", EXTREMES)
@pytest.mark.parametrize("sql", [WHERE_QUERY, GROUP_QUERY, FILTER_QUERY])
def test_extreme_numerics_change_the_answer_only_by_their_bucket(
    sql: str, extreme: str, pg_dsn: str, pg_schema: str
) -> None:
    """With and without the person whose NUMERIC is beyond DOUBLE's range (or closer to 0
    than its smallest subnormal), the query runs, and answers the exact buckets."""
    without = _run_postgres(pg_dsn, pg_schema, sql, ORDINARY)
    with_extreme = _run_postgres(pg_dsn, pg_schema, sql, [*ORDINARY, extreme])
    assert without == _expected(sql, ORDINARY)
    assert with_extreme == _expected(sql, [*ORDINARY, extreme])


def test_arithmetic_that_could_underflow_inside_an_aggregate_is_refused() -> None:
    """(stay - 1) + 1e-350 is a numeric of 1e-350 where stay = 1, which PostgreSQL cannot
    cast to DOUBLE (the sum failed exactly when some person had a stay of 1), and
    cost * 1e-200 * 1e-200 underflows: refused before the charge, as outside width_bucket."""
    for argument in ("(stay - 1) + 1e-350", "cost * 1e-200 * 1e-200"):
        sql = f"SELECT SUM(width_bucket({argument}, 0, 1, 4)) FROM visits"
        with pytest.raises(Rejected, match="underflow"):
            plan(sql, catalog("public"), PlanRequest(1.0, "postgres"))


@pytest.mark.parametrize("digits", [None, (15, 3)])
@pytest.mark.parametrize("sql", [WHERE_QUERY, GROUP_QUERY, FILTER_QUERY])
def test_duckdb_decimals_answer_the_same_buckets(sql: str, digits: tuple[int, int] | None) -> None:
    """On DuckDB a DECIMAL always casts to DOUBLE; the comparisons in the column's type
    (digits unknown) answer what the cast alone (digits known: the SQL as before) does."""
    duck = duckdb.connect()
    duck.execute("CREATE TABLE main.t (pid BIGINT, num DECIMAL(18,3))")
    for pid, value in enumerate(ORDINARY, start=1):
        duck.execute(f"INSERT INTO main.t VALUES ({pid}, {value})")
    made = plan(sql, _catalog("main", digits), PlanRequest(1.0))
    # Only a column whose digits do not bound it is compared in its own type first.
    assert ("1e-300" in made.sql) is (digits is None)
    rows = duck.execute(in_key_order(made)).fetchall()
    assert _released(made, rows) == _expected(sql, ORDINARY)


# The argument of width_bucket was copied as written: round(double, d) stayed round
# (PostgreSQL has none for doubles), failing on every run after the charge; x / y kept no
# NULLIF. (A nested width_bucket stayed WIDTH_BUCKET, which DuckDB lacks: now refused.)
PORTABLE = [
    (
        "SELECT COUNT(*) FROM visits WHERE width_bucket(round(cost, 1), 0, 100, 4) = 1",
        [(2,)],  # patient 1's costs 10 and 1
    ),
    (
        "SELECT SUM(width_bucket(round(cost, 1) / stay, 0, 100, 4)) FROM visits",
        # Cleaned costs / stays 10 / 1, 100 / 1 (stay 0 clamped), 0 / 10, 1 / 1: buckets
        # 1, 5, 1, 1 (patient 1: 8, within 3 rows' worth); NULL costs (patients 2 and 4);
        # 33.25 / 4: bucket 1 (patient 3).
        [(9,)],
    ),
]


@pytest.mark.postgres
@pytest.mark.parametrize(("sql", "expected"), PORTABLE)
def test_the_argument_is_made_portable(
    sql: str, expected: list[tuple[int]], pg_dsn: str, pg_schema: str
) -> None:
    """The same exact answer on DuckDB and PostgreSQL."""
    made = plan(sql, catalog("main"), PlanRequest(1.0))
    on_duckdb = duckdb_with(SAMPLE_ROWS).execute(made.sql).fetchall()
    load_postgres(pg_dsn, pg_schema, SAMPLE_ROWS)
    made = plan(sql, catalog(pg_schema), PlanRequest(1.0, "postgres"))
    with psycopg.connect(pg_dsn) as conn:
        on_postgres = conn.execute(made.sql.encode()).fetchall()
    for rows in (on_duckdb, on_postgres):
        assert [tuple(int(v) for v in r) for r in rows] == expected


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        # A text was cast to DOUBLE row by row: 'A' fails, '5' does not.
        ("SELECT COUNT(*) FROM visits WHERE width_bucket(department, 0, 100, 4) = 1", "number x"),
        (
            "SELECT COUNT(*) FROM visits GROUP BY width_bucket(department, 0, 100, 4)",
            "number x",
        ),
        # offset * n overflowed DOUBLE (PostgreSQL: an error; DuckDB: the cast of inf to
        # BIGINT) for large values only.
        ("SELECT COUNT(*) FROM visits WHERE width_bucket(cost, 0, 1e308, 10000) = 1", "(hi - lo)"),
        # Each level wrote x four times (and an inner one stayed WIDTH_BUCKET, which DuckDB
        # lacks).
        (
            "SELECT COUNT(*) FROM visits "
            "WHERE width_bucket(width_bucket(cost, 0, 100, 4), 0, 10, 2) = 1",
            "itself a width_bucket",
        ),
    ],
)
def test_arguments_that_would_fail_on_some_rows_are_refused(sql: str, words: str) -> None:
    with pytest.raises(Rejected) as caught:
        plan(sql, catalog("main"), PlanRequest(1.0))
    assert words in caught.value.message
