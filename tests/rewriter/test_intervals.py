"""Interval arithmetic bounds expressions inside aggregates soundly."""

from __future__ import annotations

import itertools
import math
from decimal import ROUND_HALF_UP, Decimal

import pytest
import sqlglot
from hypothesis import given
from hypothesis import strategies as st
from sqlglot import exp

from rewriter import Rejected
from rewriter.intervals import Interval, interval_of

BOUNDS = {"a": Interval(-2, 3, True), "b": Interval(0.5, 4, False), "c": Interval(1, 5, True)}


def bounds_of(column: exp.Column) -> Interval:
    return BOUNDS[column.name]


def interval(sql: str) -> Interval:
    return interval_of(sqlglot.parse_one(sql, read="postgres"), bounds_of)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("a + c", Interval(-1, 8, True)),
        ("a - c", Interval(-7, 2, True)),
        ("a * c", Interval(-10, 15, True)),
        ("a * b", Interval(-8, 12, False)),
        ("b / 2", Interval(0.25, 2, False)),
        ("-a", Interval(-3, 2, True)),
        ("abs(a)", Interval(0, 3, True)),
        ("CASE WHEN a > 0 THEN 1 ELSE 0 END", Interval(0, 1, True)),
        ("CASE WHEN a > 0 THEN c END", Interval(1, 5, True)),
        ("coalesce(a, 10)", Interval(-2, 10, True)),
        # GREATEST skips NULLs on both engines: the sound range is the hull of its arguments.
        ("greatest(a, 0)", Interval(-2, 3, True)),
        ("round(b)", Interval(0, 4, True)),
        ("round(b, 1)", Interval(0.5, 4, False)),
        # d < 0: whole multiples of 10^-d, from the one at or below to the one at or above.
        ("round(b, -1)", Interval(0, 10, True)),
        ("round(-b, -1)", Interval(-10, 0, True)),
        ("round(a * 100 + 1, -2)", Interval(-200, 400, True)),
        ("round(c, -15)", Interval(0, 1e15, True)),
        ("(a + 1) * 2", Interval(-2, 8, True)),
        ("a * 1.5", Interval(-3, 4.5, False)),
    ],
)
def test_intervals(sql: str, expected: Interval) -> None:
    assert interval(sql) == expected


def test_division_by_a_range_without_zero() -> None:
    assert interval("a / c") == Interval(-2, 3, False)


@pytest.mark.parametrize("sql", ["c / a", "lower(a)", "a || 'x'", "length(a)"])
def test_unboundable_expressions_are_rejected(sql: str) -> None:
    with pytest.raises(Rejected):
        interval(sql)


values = st.fixed_dictionaries(
    {"a": st.integers(-2, 3), "b": st.floats(0.5, 4), "c": st.integers(1, 5)}
)


@given(values)
def test_sound_for_any_values_within_bounds(v: dict[str, float]) -> None:
    expressions = {
        "a * b - c": lambda: v["a"] * v["b"] - v["c"],
        "abs(a - c) * b": lambda: abs(v["a"] - v["c"]) * v["b"],
        "(a + b) / c": lambda: (v["a"] + v["b"]) / v["c"],
        "greatest(a, b) * least(c, 2)": lambda: max(v["a"], v["b"]) * min(v["c"], 2),
    }
    for sql, value in expressions.items():
        found = interval(sql)
        assert found.lower - 1e-9 <= value() <= found.upper + 1e-9, sql


def test_corners_cover_products() -> None:
    found = interval("a * a")
    products = [x * y for x, y in itertools.product(range(-2, 4), repeat=2)]
    assert found.lower <= min(products) and max(products) <= found.upper


@pytest.mark.parametrize("digits", [-1, -2, -3])
@given(x=st.floats(-4503.5, 123456.75, allow_nan=False))
def test_round_with_negative_digits_is_sound_for_both_engines(digits: int, x: float) -> None:
    """Each engine's round(x, d), d < 0, lies within the interval: DuckDB's (x / 10^-d in
    double precision, rounded half away from zero, times 10^-d) and PostgreSQL's (x as a
    numeric of 15 significant digits, rounded half away from zero)."""
    found = interval_of(
        sqlglot.parse_one(f"round(x, {digits})", read="postgres"),
        lambda _: Interval(-4503.5, 123456.75, False),
    )
    assert found.integer
    unit = 10**-digits
    scaled = x / unit
    duckdb = math.copysign(math.floor(abs(scaled) + 0.5), scaled) * unit
    as_numeric = Decimal(f"{x:.15g}")
    postgres = float((as_numeric / unit).quantize(Decimal(1), rounding=ROUND_HALF_UP) * unit)
    for value in (duckdb, postgres):
        assert found.lower <= value <= found.upper and value % unit == 0


def test_round_with_negative_digits_stays_within_2_52() -> None:
    """Rounding up can pass the ±2^52 every value inside an aggregate keeps to."""
    largest = Interval(0, 2.0**52 - 1, True)
    with pytest.raises(Rejected, match="2\\^52"):
        interval_of(sqlglot.parse_one("round(x, -1)", read="postgres"), lambda _: largest)
