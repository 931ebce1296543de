"""VAR_POP, VAR_SAMP/VARIANCE, STDDEV_POP, STDDEV_SAMP/STDDEV from noisy Σx, Σx² and n."""

from __future__ import annotations

import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewriter import PlanRequest, plan
from tests.rewriter.noise import ZeroNoise
from tests.rewriter.tables import Row, catalog, duckdb_with

CATALOG = catalog("main")


QUERY = (
    "SELECT VAR_POP(cost), VARIANCE(cost), STDDEV_POP(stay), STDDEV(stay), "
    "VAR_SAMP(stay * 2) FROM visits"
)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 800).map(lambda k: k / 8), st.integers(1, 10)),
        min_size=2,
        max_size=30,
    )
)
def test_spread_equals_statistics_within_bounds(values: list[tuple[float, int]]) -> None:
    # One row per patient: nothing is clamped, so the bounded answer is the exact statistic.
    rows: list[Row] = [(i, i, "A", c, s) for i, (c, s) in enumerate(values)]
    query_plan = plan(QUERY, CATALOG, PlanRequest(1.0))
    exact = duckdb_with(rows).execute(query_plan.sql).fetchall()
    (released,) = query_plan.release(exact, ZeroNoise()).rows
    costs = [c for c, _ in values]
    stays = [s for _, s in values]
    expected = [
        statistics.pvariance(costs),
        statistics.variance(costs),
        statistics.pstdev(stays),
        statistics.stdev(stays),
        statistics.variance([2 * s for s in stays]),
    ]
    assert list(released) == pytest.approx(expected, rel=1e-9, abs=1e-9)


def test_variance_is_kept_within_what_the_bounds_allow() -> None:
    query_plan = plan("SELECT VAR_POP(stay) FROM visits", CATALOG, PlanRequest(1.0))
    # Noise made Σx² tiny and Σx large: the raw formula would be negative.
    (released,) = query_plan.release([(100, 10, 5)], ZeroNoise()).rows
    assert released == (0.0,)
    (released,) = query_plan.release([(10, 10, 10**6)], ZeroNoise()).rows
    assert released == (((10 - 1) / 2) ** 2,)


def test_variance_shares_measurements_with_avg() -> None:
    query_plan = plan(
        "SELECT AVG(stay), STDDEV(stay), SUM(stay) FROM visits", CATALOG, PlanRequest(0.9)
    )
    kinds = [
        (m.spec.kind.value, m.spec.argument.sql() if m.spec.argument else "")
        for m in query_plan.measurements
    ]
    assert kinds == [
        ("sum", '"t0"."stay"'),
        ("count", '"t0"."stay"'),
        # centred on 5, in [1, 10]; in BIGINT, as an INTEGER column could overflow
        ("sum", '(CAST(("t0"."stay") AS BIGINT) - 5) * (CAST(("t0"."stay") AS BIGINT) - 5)'),
    ]
    assert all(m.epsilon == pytest.approx(0.3) for m in query_plan.measurements)
