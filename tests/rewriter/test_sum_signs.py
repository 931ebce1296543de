"""A released SUM keeps the sign its clamped values force (post-processing, as counts are
never below 0): SUM(cost) of costs within [0, 100] is never negative, SUM(-stay) of stays
within [1, 10] never positive, whatever the noise; SUM(stay - 5) may be either."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from rewriter import PlanRequest, plan
from rewriter.plan import Plan
from tests.rewriter.noise import BatchedOpenDPNoise
from tests.rewriter.tables import SAMPLE_ROWS, catalog, duckdb_with


class ConstantNoise:
    """Every draw is ``shift``."""

    def __init__(self, shift: int) -> None:
        self.shift = shift

    def discrete_laplace(self, scale: float) -> int:
        return self.shift

    def discrete_gaussian(self, scale: float) -> int:
        return self.shift

    def discrete_laplace_many(self, scale: float, count: int) -> list[int]:
        return [self.shift] * count

    def discrete_gaussian_many(self, scale: float, count: int) -> list[int]:
        return [self.shift] * count

    def noisy_min(self, scores: Sequence[int], scale: float, gumbel: bool) -> int:
        return 0


SUMS = "SUM(cost), SUM(stay), SUM(-stay), SUM(stay - 5), SUM(cost) FILTER (WHERE stay > 3)"


def _released(sql: str, shift: int, mechanism: str = "laplace") -> tuple[object, ...]:
    request = PlanRequest(1.0, mechanism="gaussian" if mechanism == "gaussian" else "laplace")
    made = plan(sql, catalog("main"), request)
    rows = made.release([], ConstantNoise(shift)).rows
    assert len(rows) == 1
    return rows[0]


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_noise_below_zero_leaves_a_sum_of_non_negative_values_at_zero(mechanism: str) -> None:
    sums = _released(f"SELECT {SUMS} FROM visits", -1000, mechanism)
    assert sums[:3] == (0.0, 0, -1000)
    assert isinstance(sums[0], float) and isinstance(sums[1], int)
    assert sums[3] == -1000  # stay - 5 lies within [-4, 5]: a sum of either sign
    assert sums[4] == 0.0


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_noise_above_zero_leaves_a_sum_of_non_positive_values_at_zero(mechanism: str) -> None:
    sums = _released(f"SELECT {SUMS} FROM visits", 1000, mechanism)
    assert sums[1:4] == (1000, 0, 1000)
    grid = _plan("SELECT SUM(cost) FROM visits").measurements[0].spec.grid
    assert grid is not None and sums[0] == 1000 * grid.step > 0


def test_a_sum_beside_an_average_is_kept_at_zero_too() -> None:
    """SUM(x) beside AVG(x) is c·n + Σ(x − c), from two noisy totals."""
    made = plan(
        "SELECT department, SUM(cost), AVG(cost), COUNT(cost) FROM visits GROUP BY department",
        catalog("main"),
        PlanRequest(1.0),
    )
    assert made.outputs[0].denominator is not None  # measured as a centred sum
    rows = made.release([], ConstantNoise(-1000)).rows
    assert [row[:2] for row in rows] == [("A", 0.0), ("B", 0.0), ("C", 0.0)]
    assert all(row[3] == 0 for row in rows)


def _plan(sql: str) -> Plan:
    return plan(sql, catalog("main"), PlanRequest(0.05))


def test_an_empty_sum_is_zero_about_half_the_time_and_never_negative() -> None:
    """``COALESCE(SUM(cost), 0) … WHERE department = 'Nope'`` (no such rows): the noise is
    unchanged, and what fell below 0 is 0."""
    made = _plan("SELECT COALESCE(SUM(cost), 0) FROM visits WHERE department = 'Nope'")
    conn = duckdb_with(SAMPLE_ROWS)
    exact = conn.execute(made.sql).fetchall()
    noise = BatchedOpenDPNoise()
    values = [made.release(exact, noise).rows[0][0] for _ in range(400)]
    assert all(isinstance(v, float) and v >= 0 for v in values)
    assert 120 <= sum(v == 0 for v in values) <= 280
