"""round(x, d) of a floating-point x on PostgreSQL, which has round(numeric, d) but neither
round(double precision, d) nor round(real, d).

The rewriter wrote ``ROUND("t0"."cost", 1)`` in WHERE, FILTER, JOIN … ON, the conditions of
GROUP BY keys and subqueries in WHERE: DuckDB ran it, PostgreSQL failed on every run
(``function round(double precision, integer) does not exist``), after the query was
charged. Now x is rounded as a numeric on PostgreSQL and cast back to double precision,
only when it is finite and within ±1e308 (NaN, ±infinity and larger values are kept, as
DuckDB's round keeps them; a numeric of 15 significant digits near the largest double
would not fit a double again). Each query below runs on both engines over values that
could trip it, and gets the same answer.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal

import psycopg
import pytest
from sqlglot import exp

from rewriter import PlanRequest, Rejected, plan
from rewriter.parse import parse_statement
from rewriter.passes.check_predicate import check_predicate
from rewriter.passes.check_shape import check_shape
from tests.rewriter.tables import Row, catalog, duckdb_with, load_postgres

LARGEST = sys.float_info.max
# One row per patient, at most two per department: nothing is cut at random.
ROWS: list[Row] = [
    (1, 1, "A", float("nan"), 1),
    (2, 2, "A", float("inf"), 2),
    (3, 3, "B", float("-inf"), 3),
    (4, 4, "B", LARGEST, 4),
    (5, 5, "C", -LARGEST, 5),
    (6, 6, "C", 5e-324, 6),
    (7, 7, "A", 1.5e308, 7),
    (8, 8, "B", 33.35, 8),
    (9, 9, "C", 0.04, 9),
    (10, 10, "A", -0.04, 10),
    (11, 11, "B", 99.96, None),
    (12, 12, "C", None, 2),
]

QUERIES = [
    "SELECT COUNT(*) FROM visits WHERE round(cost, 1) > 100",
    "SELECT COUNT(*) FROM visits WHERE round(cost, 1) > 0.5",  # a double on DuckDB
    "SELECT COUNT(*) FROM visits WHERE round(cost, 1) = 33.4 OR round(cost, 15) = cost",
    "SELECT COUNT(*) FROM visits WHERE round(cost, 2) = 100",  # round(round(…)) is refused
    "SELECT COUNT(*) FROM visits WHERE round(coalesce(cost, stay), 1) < 2",
    "SELECT COUNT(*) FROM visits WHERE round(CAST(stay AS DOUBLE PRECISION), 1) > 4",
    "SELECT COUNT(*) FROM visits WHERE round(cost, 0) <= 0 AND round(stay, 1) > 1",
    "SELECT COUNT(*) FILTER (WHERE round(cost, 1) > 5), COUNT(*) FROM visits",
    "SELECT CASE WHEN round(cost, 1) > 5 THEN 'high' ELSE 'low' END AS level, COUNT(*) "
    "FROM visits GROUP BY level",
    "SELECT COUNT(*) FROM visits v JOIN departments d "
    "ON d.name = v.department AND round(v.cost, 1) > d.floor",
    "SELECT COUNT(*) FROM visits WHERE patient_id IN "
    "(SELECT patient_id FROM visits WHERE round(cost, 1) > 5)",
    # Inside aggregates values are clamped first; sqlglot wrote these as round(numeric).
    "SELECT SUM(round(cost, 1)), AVG(round(cost, 2)), COUNT(round(cost, 1)) FROM visits",
    "SELECT SUM(round(CAST(cost AS REAL), 1)) FROM visits",
    "SELECT SUM(CASE WHEN round(cost, 1) > 5 THEN 1 ELSE 0 END) FROM visits",
    # A key from the data (rewriter.passes.numeric_keys rounds in double precision).
    "SELECT round(cost, 1) AS r, COUNT(*) FROM visits GROUP BY r",
    "SELECT department, SUM(round(cost, 1)) FROM visits WHERE round(cost, 1) < 1e300 "
    "GROUP BY department",
    # d < 0 inside aggregates: multiples of 10^-d.
    "SELECT SUM(round(cost, -1)), AVG(round(stay, -1)), VAR_POP(round(cost - 50, -2)) FROM visits",
]


def _normal(rows: list[tuple[object, ...]]) -> list[tuple[object, ...]]:
    """Rows as comparable Python values, in a fixed order (PostgreSQL sums are numeric)."""

    def value(v: object) -> object:
        return float(v) if isinstance(v, (Decimal, int)) and not isinstance(v, bool) else v

    return sorted((tuple(value(v) for v in row) for row in rows), key=repr)


@pytest.mark.postgres
@pytest.mark.parametrize("sql", QUERIES)
def test_round_of_reals_runs_alike_on_both_engines(sql: str, pg_dsn: str, pg_schema: str) -> None:
    load_postgres(pg_dsn, pg_schema, ROWS)
    request = PlanRequest(1.0, delta=0.4)
    on_duck = duckdb_with(ROWS).execute(plan(sql, catalog("main"), request).sql).fetchall()
    on_pg_plan = plan(sql, catalog(pg_schema), PlanRequest(1.0, "postgres", delta=0.4))
    with psycopg.connect(pg_dsn) as conn:
        on_pg = conn.execute(on_pg_plan.sql.encode()).fetchall()
    assert _normal(on_pg) == _normal(on_duck)


def _rounded(dialect: str, schema: str, digits: int) -> str:
    """SELECT visit_id, round(cost, digits) as the rewriter writes it in WHERE."""
    shape = check_shape(parse_statement("SELECT COUNT(*) FROM visits"), catalog(schema))
    written = exp.Round(this=exp.column("cost"), decimals=exp.Literal.number(digits))
    value = check_predicate(written, shape.scope, "WHERE")
    table = exp.to_table(f'"{schema}"."visits"', dialect="postgres").as_("t0")
    query = exp.select(exp.column("visit_id", table="t0"), value).from_(table).order_by("1")
    return query.sql(dialect=dialect)


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


@pytest.mark.postgres
@pytest.mark.parametrize("digits", [0, 1, 2, 15])
def test_rounded_values_are_duckdbs_round(digits: int, pg_dsn: str, pg_schema: str) -> None:
    """Row by row, as DuckDB's own round(cost, d): NaN, ±infinity and values beyond ±1e308
    unchanged (no error on PostgreSQL), the others rounded."""
    load_postgres(pg_dsn, pg_schema, ROWS)
    duck = duckdb_with(ROWS)
    native = duck.execute(
        f"SELECT visit_id, round(cost, {digits}) FROM visits ORDER BY 1"
    ).fetchall()
    rewritten = duck.execute(_rounded("duckdb", "main", digits)).fetchall()
    with psycopg.connect(pg_dsn) as conn:
        on_pg = conn.execute(_rounded("postgres", pg_schema, digits).encode()).fetchall()
    assert len(native) == len(ROWS)
    for expected, *found in zip(native, rewritten, on_pg, strict=True):
        for row in found:
            assert row[0] == expected[0]
            assert _same(expected[1], row[1]), (expected, found)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) FROM visits WHERE round(department, 1) = 1",
        "SELECT COUNT(*) FROM visits WHERE floor(department) = 1",
        "SELECT COUNT(*) FILTER (WHERE ceil(department) > 1) FROM visits",
    ],
)
def test_rounding_a_value_that_is_not_a_number_is_refused(sql: str) -> None:
    """It would fail on every row, after the query was charged."""
    with pytest.raises(Rejected) as caught:
        plan(sql, catalog("main"), PlanRequest(1.0))
    assert "not a number" in caught.value.message


# -- round(x, d) with d < 0 inside aggregates -------------------------------------------

# One row per patient (nothing is cut), with values that are cleaned away or clamped and
# with exact halves, which both engines round away from zero.
COSTS = [
    *(float(v) for v in ("nan", "inf", "-inf")),
    LARGEST,
    -LARGEST,
    5e-324,
    1e-17,  # flushed to 0 (below 2^-60 of the largest bound)
    1.5e308,
    *(5.0, 15.0, 25.0, 45.0, 50.0, 55.0, 85.0, 95.0, 16.5),
    *(44.99, 99.96, 33.35, 0.04, -0.04, 100.0),
    None,
]
STAYS = [None, -3, 1, 2, 4, 5, 6, 10, 12, 2147483647, -2147483648]
NEGATIVE_ROWS: list[Row] = [
    (i, i, "ABC"[i % 3], COSTS[i % len(COSTS)], STAYS[i % len(STAYS)])
    for i in range(len(COSTS) * 2)
]


def _clean_cost(cost: float | None) -> float | None:
    """bound_per_unit.clean of cost (bounds [0, 100]): NaN and ±infinity NULL, values below
    2^-53 in magnitude 0, the others clamped."""
    if cost is None or not math.isfinite(cost):
        return None
    return 0.0 if abs(cost) < 2.0**-53 else min(max(cost, 0.0), 100.0)


def _clean_stay(stay: int | None) -> int | None:
    return None if stay is None else min(max(stay, 1), 10)


def _exactly_rounded(value: float | None, digits: int) -> int:
    """round(value, digits) for digits < 0, exactly: halves away from zero (NULL: 0)."""
    if value is None:
        return 0
    unit = Decimal(10) ** -digits
    return int((Decimal(value) / unit).quantize(Decimal(1), rounding=ROUND_HALF_UP) * unit)


NEGATIVE_SUMS: dict[str, Callable[[Row], int]] = {
    "round(cost, -1)": lambda r: _exactly_rounded(_clean_cost(r[3]), -1),
    "round(cost - 50, -1)": lambda r: _exactly_rounded(_minus(_clean_cost(r[3]), 50), -1),
    "round(cost * 3, -2)": lambda r: _exactly_rounded(_times(_clean_cost(r[3]), 3), -2),
    "round(cost, -15)": lambda r: _exactly_rounded(_clean_cost(r[3]), -15),
    "round(stay, -1)": lambda r: _exactly_rounded(_clean_stay(r[4]), -1),
    "round(stay * 25, -2)": lambda r: _exactly_rounded(_times(_clean_stay(r[4]), 25), -2),
    "round(round(cost, -1) + stay, -1)": lambda r: _exactly_rounded(
        _plus(_exactly_rounded_or_none(_clean_cost(r[3]), -1), _clean_stay(r[4])), -1
    ),
}


def _minus(value: float | None, by: float) -> float | None:
    return None if value is None else value - by


def _times(value: float | None, by: float) -> float | None:
    return None if value is None else value * by


def _plus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def _exactly_rounded_or_none(value: float | None, digits: int) -> float | None:
    return None if value is None else float(_exactly_rounded(value, digits))


@pytest.mark.postgres
@pytest.mark.parametrize("expression", list(NEGATIVE_SUMS))
def test_round_to_tens_inside_aggregates_sums_exactly(
    expression: str, pg_dsn: str, pg_schema: str
) -> None:
    """SUM(round(x, d)) with d < 0 (docs/sql.md allows d from -15 inside aggregates) was
    refused ("needs a constant d": -1 parses as a negation). Its values are whole multiples
    of 10^-d, summed exactly: the noise-free total equals the Python reference's on both
    engines, over NaN, ±infinity, the largest doubles, subnormals and exact halves."""
    sql = f"SELECT SUM({expression}) FROM visits"
    made = plan(sql, catalog("main"), PlanRequest(1.0))
    (measurement,) = made.measurements
    assert measurement.spec.bounds is not None and measurement.spec.bounds.integer
    assert measurement.spec.centre == 0
    step = measurement.spec.grid.step if measurement.spec.grid else 0.0
    expected = sum(NEGATIVE_SUMS[expression](row) for row in NEGATIVE_ROWS)
    assert expected % step == 0  # the grid holds every value: the total is exact
    load_postgres(pg_dsn, pg_schema, NEGATIVE_ROWS)
    (on_duck,) = duckdb_with(NEGATIVE_ROWS).execute(made.sql).fetchone() or ()
    on_pg_plan = plan(sql, catalog(pg_schema), PlanRequest(1.0, "postgres"))
    with psycopg.connect(pg_dsn) as conn:
        (on_pg,) = conn.execute(on_pg_plan.sql.encode()).fetchone() or ()
    assert int(on_duck) * step == int(on_pg) * step == expected


@pytest.mark.parametrize(
    "sql",
    [
        # Neither engine has floor(x, d) or ceil(x, d), nor round(x, d, t): the query would
        # fail after the charge (and the SQL written dropped round's third argument).
        "SELECT SUM(floor(cost, -1)) FROM visits",
        "SELECT SUM(ceil(cost, 1)) FROM visits",
        "SELECT SUM(round(cost, 1, 1)) FROM visits",
    ],
)
def test_rounding_with_arguments_no_engine_takes_is_refused(sql: str) -> None:
    with pytest.raises(Rejected) as caught:
        plan(sql, catalog("main"), PlanRequest(1.0))
    assert "arguments" in caught.value.message and "is supported" in caught.value.message
