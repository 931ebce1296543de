"""Empirical privacy: one COUNT on two neighbouring databases, many times, with real noise.

The databases differ by one privacy unit (patient 1 and all their rows). The rewriter's SQL
runs on DuckDB (QUERIES times, checking its answer is always the same), and each of DRAWS
answers is released through the plan's own release path with OpenDP's noise (its samplers,
drawn many at a time: tests.rewriter.noise). For events
S = {answer >= t} we take a lower confidence bound on ln(P[M(D) ∈ S] − δ) − ln P[M(D') ∈ S]
(Clopper-Pearson, Bonferroni over the thresholds): a *lower* bound on the true privacy
loss, so a correct mechanism stays below its claimed ε with high probability. A negative
control (noise scaled for sensitivity 1 where one patient changes the count by 3) must be
caught.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy import stats

from accountant.zcdp import cks_epsilon
from rewriter import PlanRequest, plan
from tests.rewriter.noise import BatchedOpenDPNoise
from tests.rewriter.tables import SAMPLE_ROWS, catalog, duckdb_with, scratch_with

pytestmark = pytest.mark.statistical

DRAWS = 6_000
QUERIES = 50
CONFIDENCE = 1e-3  # chance that a correct mechanism fails this test
DELTA = 1e-6
SQL = "SELECT COUNT(*) FROM visits"


class Draw:
    """A noise source drawing with ``draw`` whatever the plan asks for (the control's bug)."""

    def __init__(self, draw: Callable[[], int]) -> None:
        self._draw = draw

    def discrete_laplace(self, scale: float) -> int:
        return self._draw()

    def discrete_gaussian(self, scale: float) -> int:
        return self._draw()

    def discrete_laplace_many(self, scale: float, count: int) -> list[int]:
        return [self._draw() for _ in range(count)]

    def discrete_gaussian_many(self, scale: float, count: int) -> list[int]:
        return [self._draw() for _ in range(count)]


def answers(rows: list, request: PlanRequest, noise: object) -> np.ndarray:
    query_plan = plan(SQL, catalog("main"), request)
    conn = scratch_with(rows)
    exact = {tuple(conn.execute(query_plan.sql).fetchall()) for _ in range(QUERIES)}
    assert len(exact) == 1
    (rows_out,) = exact
    released = [query_plan.release(rows_out, noise).rows[0][0] for _ in range(DRAWS)]
    return np.array(released, dtype=np.int64)


def lower_bound_epsilon(a: np.ndarray, b: np.ndarray, delta: float) -> float:
    """max over thresholds of a lower confidence bound on the privacy loss, both directions."""
    thresholds = np.unique(np.concatenate([a, b]))
    tests = 2 * len(thresholds)
    alpha = CONFIDENCE / tests / 2
    best = 0.0
    for first, second in ((a, b), (b, a)):
        for t in thresholds:
            hits_p, hits_q = int((first >= t).sum()), int((second >= t).sum())
            if hits_p == 0:
                continue
            p_low = stats.beta.ppf(alpha, hits_p, DRAWS - hits_p + 1)
            q_high = stats.beta.ppf(1 - alpha, hits_q + 1, DRAWS - hits_q) if hits_q < DRAWS else 1
            if p_low - delta > 0 and q_high > 0:
                best = max(best, math.log((p_low - delta) / q_high))
    return best


def neighbours() -> tuple[list, list]:
    return list(SAMPLE_ROWS), [r for r in SAMPLE_ROWS if r[1] != 1]


def test_laplace_count_stays_below_its_epsilon() -> None:
    request = PlanRequest(0.5)
    with_unit, without = neighbours()
    a = answers(with_unit, request, BatchedOpenDPNoise())
    b = answers(without, request, BatchedOpenDPNoise())
    query_plan = plan(SQL, catalog("main"), request)
    exact = [duckdb_with(rows).execute(query_plan.sql).fetchone() for rows in (with_unit, without)]
    assert exact == [(7,), (4,)]  # patient 1 counts for 3 rows (4 rows, bounded to 3)
    estimate = lower_bound_epsilon(a, b, 0.0)
    assert estimate <= 0.5
    assert estimate > 0.2  # the test has power: the loss is visibly there


def test_gaussian_count_stays_below_its_epsilon_at_delta() -> None:
    request = PlanRequest(0.5, mechanism="gaussian")
    query_plan = plan(SQL, catalog("main"), request)
    assert query_plan.privacy_loss_rho() <= 0.5**2 / 2
    claimed = cks_epsilon(query_plan.privacy_loss_rho(), DELTA)
    with_unit, without = neighbours()
    a = answers(with_unit, request, BatchedOpenDPNoise())
    b = answers(without, request, BatchedOpenDPNoise())
    assert lower_bound_epsilon(a, b, DELTA) <= claimed


def test_negative_control_too_little_noise_is_caught() -> None:
    noise = BatchedOpenDPNoise()
    request = PlanRequest(0.5)
    wrong = 1 / 0.5  # the scale for sensitivity 1; the true sensitivity is 3
    with_unit, without = neighbours()
    control = Draw(lambda: noise.discrete_laplace(wrong))
    a = answers(with_unit, request, control)
    b = answers(without, request, control)
    assert lower_bound_epsilon(a, b, 0.0) > 0.5
