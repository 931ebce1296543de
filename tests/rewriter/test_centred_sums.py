"""Centred sums: AVG, VAR…, STDDEV… measure Σ(x − c) and Σ(x − c)² with c the middle of the
bounds (half the sensitivity of Σx for values in [0, u], a quarter for the squares), and
SUM(x) asked with a count of the same values is c·n + Σ(x − c)."""

from __future__ import annotations

import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewriter import PlanRequest, plan
from rewriter.mechanisms import OpenDPNoise
from tests.rewriter.noise import ZeroNoise
from tests.rewriter.tables import Row, catalog, duckdb_with

CATALOG = catalog("main")  # cost in [0, 100] (grid step 2^-13), stay in [1, 10]
STEP = 2.0**-13


def test_an_average_halves_the_sensitivity_of_its_sum() -> None:
    alone = plan("SELECT SUM(cost) FROM visits", CATALOG, PlanRequest(1.0))
    averaged = plan("SELECT AVG(cost) FROM visits", CATALOG, PlanRequest(1.0))
    (plain,) = alone.measurements
    centred, _count = averaged.measurements
    assert plain.spec.centre == 0 and plain.spec.unit_bound == 3 * 100 * 2**13
    assert centred.spec.centre == 50 * 2**13 and centred.spec.unit_bound == 3 * 50 * 2**13
    assert centred.mechanism.sensitivity == centred.spec.unit_bound


def test_a_variance_quarters_the_sensitivity_of_its_squares() -> None:
    made = plan("SELECT VAR_POP(cost) FROM visits", CATALOG, PlanRequest(1.0))
    _centred, _count, squares = made.measurements
    grid = squares.spec.grid
    assert grid is not None and squares.spec.bounds is not None
    assert squares.spec.bounds.upper == 50.0**2  # (x - 50)² for x in [0, 100]
    assert squares.spec.unit_bound * grid.step == pytest.approx(3 * 50.0**2, rel=1e-5)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 800).map(lambda k: k / 8), st.integers(1, 10)),
        min_size=2,
        max_size=30,
    )
)
def test_released_values_equal_the_plain_statistics(values: list[tuple[float, int]]) -> None:
    """Without noise, one row per patient within the bounds: SUM, AVG, VAR_POP exactly."""
    rows: list[Row] = [(i, i, "A", c, s) for i, (c, s) in enumerate(values)]
    made = plan(
        "SELECT SUM(cost), AVG(cost), VAR_POP(cost), SUM(stay), COUNT(stay), AVG(stay) FROM visits",
        CATALOG,
        PlanRequest(1.0),
    )
    exact = duckdb_with(rows).execute(made.sql).fetchall()
    (row,) = made.release(exact, ZeroNoise()).rows
    costs = [round(c / STEP) * STEP for c, _ in values]
    stays = [s for _, s in values]
    assert row[0] == pytest.approx(sum(costs), abs=1e-9)
    assert row[1] == pytest.approx(statistics.fmean(costs), abs=1e-9)
    assert row[2] == pytest.approx(statistics.pvariance(costs), rel=1e-4, abs=1e-3)
    assert row[3] == sum(stays) and isinstance(row[3], int)
    assert row[4] == len(stays)
    assert row[5] == pytest.approx(statistics.fmean(stays))


def test_a_sum_from_the_centred_sum_covers_its_stated_interval() -> None:
    """SUM(cost) with AVG(cost): c·n + Σ(x − c) has two noises; the stated 95% half-width
    (each noise's 97.5% half-width, added) holds in at least 95% of real draws, and the
    noise is smaller than that of a plain SUM at the same ε."""
    made = plan("SELECT SUM(cost), AVG(cost) FROM visits", CATALOG, PlanRequest(1.0))
    alone = plan("SELECT SUM(cost) FROM visits", CATALOG, PlanRequest(0.5))
    width = made.accuracy()[0].half_width_95
    assert width is not None
    exact = [(-1000 * 2**13, 40)]  # Σ(cost - 50) = -1000 over 40 values: SUM(cost) 1000
    noise = OpenDPNoise()
    draws = 2000
    errors = [abs(made.release(exact, noise).rows[0][0] - 1000.0) for _ in range(draws)]
    inside = sum(e <= width for e in errors) / draws
    assert inside >= 0.95
    plain_errors = [
        abs(alone.release([(1000 * 2**13,)], noise).rows[0][0] - 1000.0) for _ in range(draws)
    ]
    # Same share of ε per measurement (0.5): the centred sum's noise is half the plain
    # one's, and 50 x the count's noise adds a little: about 0.75 of the plain MAE.
    ratio = statistics.fmean(errors) / statistics.fmean(plain_errors)
    assert 0.6 < ratio < 0.9
