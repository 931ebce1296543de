"""Sums of DuckDB DECIMAL values are added exactly per unit and put on the grid once
(``rewriter.exact_sums``): one person still moves each total by at most its sensitivity,
values far beyond any bound never make the query fail, and the totals are those of exact
decimal arithmetic. Arguments the engine would not add exactly take the per-row path."""

from __future__ import annotations

import functools
import math
from decimal import Decimal
from fractions import Fraction

import duckdb
import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

from rewriter import (
    Catalog,
    ColumnPolicy,
    ColumnType,
    Plan,
    PlanRequest,
    TablePolicy,
    build_catalog,
    plan,
)
from rewriter.exact_sums import COUNT_SUFFIX
from tests.rewriter.coupling import in_key_order, sensitivity
from tests.rewriter.noise import ZeroNoise
from tests.rewriter.scratch import fresh_duckdb, insert

COLUMNS = {
    "sale_id": ColumnType.INTEGER,
    "pid": ColumnType.INTEGER,
    "region": ColumnType.TEXT,
    "price": ColumnType.DECIMAL,
    "rate": ColumnType.DECIMAL,
    "qty": ColumnType.INTEGER,
    "big": ColumnType.DECIMAL,
    "fine": ColumnType.DECIMAL,
    "ratio": ColumnType.FLOAT,
}
DIGITS = {
    "sale_id": (19, 0),
    "pid": (19, 0),
    "price": (7, 2),
    "rate": (1, 3),
    "qty": (10, 0),
    "big": (36, 2),
    "fine": (2, 30),
}
POLICY = TablePolicy(
    privacy_unit="pid",
    max_rows_per_unit=3,
    max_groups_per_unit=3,
    columns={
        # Bounds off the grid of steps and off the columns' own decimal places.
        "price": ColumnPolicy(lower=-12.345, upper=99.995),
        "rate": ColumnPolicy(lower=0, upper=0.3),
        "qty": ColumnPolicy(lower=1, upper=10),
        "big": ColumnPolicy(lower=-1000, upper=1000),
        "fine": ColumnPolicy(lower=-1, upper=1),
        "ratio": ColumnPolicy(lower=0, upper=1),
        "region": ColumnPolicy(domain=["A", "B", "C"]),
    },
)
CREATE = (
    "CREATE TABLE main.sales (sale_id BIGINT, pid BIGINT, region VARCHAR, price DECIMAL(9,2), "
    "rate DECIMAL(4,3), qty INTEGER, big DECIMAL(38,2), fine DECIMAL(32,30), ratio DOUBLE)"
)


def _catalog() -> Catalog:
    return build_catalog(
        {"sales": COLUMNS},
        {"sales": POLICY},
        schema="main",
        digits={"sales": DIGITS},
        finite_decimals=True,
    )


CATALOG = _catalog()

# (query, how many of its sums the database adds exactly)
QUERIES = [
    ("SELECT COUNT(*), SUM(price), AVG(price) FROM sales", 1),  # one sum, centred
    (
        "SELECT region, SUM(price * rate), AVG(rate), SUM(qty * price) FROM sales GROUP BY region",
        3,
    ),
    (
        "SELECT region, SUM(CASE WHEN qty > 3 THEN price ELSE 0 END), "
        "SUM(COALESCE(price, rate) - 1.5) FROM sales GROUP BY region",
        2,
    ),
    ("SELECT SUM(price) FILTER (WHERE qty > 2), SUM(-big), AVG(big * rate) FROM sales", 3),
    # Variances: the sum and its centre exactly, the squares row by row.
    ("SELECT region, VAR_POP(price), SUM(price * price) FROM sales GROUP BY region", 2),
    # Not exact: a division, a DOUBLE column, too many decimal places.
    ("SELECT SUM(price / 2), SUM(ratio * price), SUM(fine) FROM sales", 0),
    # With a quantile (its rows picked first) and a per-row sum beside.
    ("SELECT MEDIAN(price), SUM(price * rate), SUM(ratio) FROM sales", 1),
]

money = st.one_of(
    st.none(),
    st.decimals(min_value=-200, max_value=200, places=2),
    st.decimals(min_value=-9999999, max_value=9999999, places=2),  # far beyond the bounds
)
sale = st.tuples(  # few persons and regions: persons with more rows than they may keep
    st.integers(1, 3),
    st.sampled_from(["A", "B", "D"]),
    money,
    st.one_of(st.none(), st.decimals(min_value=0, max_value=Decimal("9.999"), places=3)),
    st.one_of(st.none(), st.integers(-5, 50)),
    st.one_of(st.none(), st.decimals(min_value=-(10**35), max_value=10**35, places=2)),
)
Sale = tuple[int, str, Decimal | None, Decimal | None, int | None, Decimal | None]


def database(sales: list[Sale], removed: int | None = None) -> duckdb.DuckDBPyConnection:
    """A database of its own (tests.rewriter.scratch) with the sales, but ``removed``'s."""
    conn = fresh_duckdb()
    conn.execute(CREATE)
    rows = [
        (i + 1, p, r, price, rate, qty, big, Decimal("0.5"), 0.5)
        for i, (p, r, price, rate, qty, big) in enumerate(sales)
        if p != removed
    ]
    insert(conn, "main.sales", rows)
    return conn


def _exact_sums(sql: str) -> int:
    """How many measurements the bounded SQL sums exactly (each has a count beside it)."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    return sum(1 for a in tree.find_all(exp.Alias) if a.alias.endswith(COUNT_SUFFIX))


@functools.cache
def planned(query: str) -> tuple[Plan, str]:
    """The plan of ``query`` and its SQL with the groups in key order. Planning is
    deterministic: once per query, not once per example."""
    made = plan(query, CATALOG, PlanRequest(1.0))
    return made, in_key_order(made)  # every other person keeps the same groups in both


def totals(
    conn: duckdb.DuckDBPyConnection, sql: str, keys: int
) -> dict[tuple[object, ...], list[int]]:
    """Per group, each measurement's total (a quantile's bins add up as one number)."""
    rows = conn.execute(sql).fetchall()
    return {
        tuple(row[:keys]): [sum(v) if isinstance(v, list) else int(v) for v in row[keys:]]
        for row in rows
    }


@pytest.mark.parametrize(("query", "exact"), QUERIES)
def test_the_decimal_sums_are_the_exact_ones(query: str, exact: int) -> None:
    made = plan(query, CATALOG, PlanRequest(1.0))
    assert _exact_sums(made.sql) == exact


@pytest.mark.parametrize(("query", "exact"), QUERIES)
@settings(max_examples=30, deadline=None)
@given(sales=st.lists(sale, max_size=20), removed=st.integers(1, 3))
def test_one_person_moves_exact_sums_within_the_sensitivity(
    query: str, exact: int, sales: list[Sale], removed: int
) -> None:
    made, sql = planned(query)
    keys = len(made.keys)
    with_person = totals(database(sales), sql, keys)
    without = totals(database(sales, removed), sql, keys)
    width = len(made.measurements)
    cells = set(with_person) | set(without)
    for index, measurement in enumerate(made.measurements):
        if measurement.spec.bins is not None:
            continue  # quantile counts: tests/rewriter/test_quantile_neighbours.py
        change = sum(
            abs(with_person.get(c, [0] * width)[index] - without.get(c, [0] * width)[index])
            for c in cells
        )
        bound = sensitivity(made, measurement)
        assert change <= bound, (query, measurement.spec.key, change, bound)
        assert measurement.mechanism.sensitivity == bound


def test_a_unit_in_several_groups_stays_within_one_groups_bound() -> None:
    """Rows at the bounds, in three groups: rounding each group's sum once (not each row)
    must not let the groups together exceed what the row budget allows."""
    sales: list[Sale] = [
        (1, "A", Decimal("99.99"), None, None, None),
        (1, "B", Decimal("99.99"), None, None, None),
        (1, "C", Decimal("99.99"), None, None, None),
        (2, "A", Decimal("-12.34"), None, None, None),
        (2, "B", Decimal("-12.34"), None, None, None),
        (2, "C", Decimal("-12.34"), None, None, None),
    ]
    made = plan(
        "SELECT region, SUM(price), AVG(price) FROM sales GROUP BY region",
        CATALOG,
        PlanRequest(1.0),
    )
    sql = in_key_order(made)
    sales += [(3, "B", Decimal("99.99"), None, None, None)] * 5  # 5 rows where 3 count
    for person in (1, 2, 3):
        with_person = totals(database([s for s in sales if s[0] == person]), sql, 1)
        for index, measurement in enumerate(made.measurements):
            moved = sum(abs(v[index]) for v in with_person.values())
            assert moved <= sensitivity(made, measurement)


@settings(max_examples=40, deadline=None)
@given(
    prices=st.lists(
        st.tuples(st.integers(1, 4), st.decimals(min_value=-50, max_value=150, places=2)),
        max_size=12,
    )
)
def test_totals_are_those_of_exact_decimal_arithmetic(
    prices: list[tuple[int, Decimal]],
) -> None:
    """Per person: the clamped prices added exactly, put on the grid once (half a step
    rounds up), less the centre per value for an average; a person with more than 3 values
    counts as 3 values at its mean (the steps scaled by 3 / n, in doubles as the database
    computes them, rounded half up); then clamped to what the person's values allow and to
    its limits."""
    per_person: dict[int, list[Decimal]] = {}
    for pid, price in prices:
        per_person.setdefault(pid, []).append(price)
    made = plan("SELECT SUM(price), AVG(price) FROM sales", CATALOG, PlanRequest(1.0))
    spec = made.measurements[0].spec  # the centred sum, shared by SUM and AVG
    assert spec.grid is not None and spec.centre != 0
    low, high = Decimal("-12.34"), Decimal("99.99")  # the bounds within the column's places
    expected = [0, 0]
    for values in per_person.values():
        exact = sum((min(max(v, low), high) for v in values), Decimal(0))
        steps = math.floor(Fraction(exact) / Fraction(spec.grid.step) + Fraction(1, 2))
        steps -= len(values) * spec.centre
        if len(values) > 3:
            steps = math.floor(float(steps) / float(len(values)) * 3.0 + 0.5)
        lowest, highest = (
            len(values) * (g - spec.centre) for g in (spec.grid.lower, spec.grid.upper)
        )
        steps = min(max(steps, lowest), highest)
        expected[0] += min(max(steps, spec.unit_lower), spec.unit_upper)
        expected[1] += min(len(values), 3)
    rows = [(pid, "A", price, None, None, None) for pid, price in prices]
    assert database(rows).execute(made.sql).fetchall() == [tuple(expected)]


def test_extreme_values_never_fail() -> None:
    """The largest values the columns hold, in every sum: each column is clamped before any
    arithmetic, so no DECIMAL product or sum overflows (an error after the charge)."""
    top = Decimal("9999999.99")
    sales: list[Sale] = [
        (p, r, v, Decimal("9.999"), 2**31 - 1, Decimal(10**36 - 1) / 100)
        for p in (1, 2)
        for r in ("A", "B")
        for v in (top, -top)
    ]
    conn = database(sales)
    conn.execute("UPDATE main.sales SET fine = 99.999999999999999999999999999999")
    for query, _ in QUERIES:
        made = plan(query, CATALOG, PlanRequest(1.0))
        conn.execute(made.sql).fetchall()


@pytest.mark.parametrize(
    ("argument", "exact"),
    [
        ("price", True),
        ("price * rate * 2", True),
        ("qty * price", True),
        ("CASE WHEN qty > 3 THEN price END", True),
        ("qty", False),  # integers only: the integer grid already sums exactly
        ("price / 2", False),  # DOUBLE
        ("price * 1e0", True),  # the decimal 1
        ("price * 1e-13", False),  # too many decimal places
        ("ratio * price", False),  # a DOUBLE column
        ("fine", False),  # 30 decimal places
        ("round(price, 1)", False),  # a function
        ("big * big * big", True),  # 10^9 at 6 places: within DECIMAL(18)
        ("big * big * big * 100", False),  # could leave DECIMAL(18)
    ],
)
def test_which_arguments_are_summed_exactly(argument: str, exact: bool) -> None:
    made = plan(f"SELECT SUM({argument}) FROM sales", CATALOG, PlanRequest(1.0))
    assert _exact_sums(made.sql) == int(exact)
    database([(1, "A", Decimal("5.5"), Decimal("0.1"), 4, Decimal(7))]).execute(made.sql)


def _released(query: str, policy: TablePolicy, sales: list[Sale]) -> list[object]:
    catalog = build_catalog(
        {"sales": COLUMNS},
        {"sales": policy},
        schema="main",
        digits={"sales": DIGITS},
        finite_decimals=True,
    )
    made = plan(query, catalog, PlanRequest(1.0))
    assert _exact_sums(made.sql) >= 1
    found = database(sales).execute(made.sql).fetchall()
    return list(made.release(found, ZeroNoise()).rows[0])


def test_values_on_a_declared_bound_are_kept() -> None:
    """Bounds of 99.99 and 0.3 are what they say (review: the double 99.99 is 99.98999…,
    which rounded inwards to 99.98 clamped every 99.99 to it)."""
    columns = {
        "price": ColumnPolicy(lower=0, upper=99.99),
        "rate": ColumnPolicy(lower=0.3, upper=0.6),
    }
    policy = POLICY.model_copy(update={"columns": columns})
    sales: list[Sale] = [(p, "A", Decimal("99.99"), Decimal("0.3"), 1, None) for p in (1, 2, 3)]
    total, average, rates = _released(
        "SELECT SUM(price), AVG(price), SUM(rate) FROM sales", policy, sales
    )
    assert total == pytest.approx(3 * 99.99, abs=0.01)
    assert average == pytest.approx(99.99, abs=0.001)
    assert rates == pytest.approx(0.9, abs=0.001)


def test_case_branches_keep_their_decimal_places() -> None:
    """A wide branch ((qty + 1) * (qty + 1) is a DECIMAL(38, 0) on DuckDB) beside a
    DECIMAL(9, 2) made DuckDB drop the CASE's places and round 12.49 to 12 (review)."""
    sales: list[Sale] = [(p, "A", Decimal("12.49"), Decimal("0.3"), 2, None) for p in (1, 2, 3)]
    total, average = _released(
        "SELECT SUM(CASE WHEN qty > 5 THEN (qty + 1) * (qty + 1) ELSE price END), "
        "AVG(COALESCE(rate, (qty + 1) * (qty + 1))) FROM sales",
        POLICY,
        sales,
    )
    assert total == pytest.approx(3 * 12.49, abs=0.01)
    assert average == pytest.approx(0.3, abs=0.001)
