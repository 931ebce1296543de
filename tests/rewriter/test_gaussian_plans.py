"""Gaussian plans: every measurement carries a discrete Gaussian whose privacy map, summed
over the query, stays within the ρ = ε²/2 the query is charged."""

from __future__ import annotations

import pytest

from accountant import Epsilon
from accountant.zcdp import laplace_rho_nano
from rewriter import DiscreteGaussian, PlanRequest, plan
from tests.rewriter.tables import catalog

QUERIES = [
    "SELECT COUNT(*) FROM visits",
    "SELECT SUM(stay), AVG(cost), COUNT(DISTINCT patient_id) FROM visits",
    "SELECT department, COUNT(*), STDDEV_SAMP(stay) FROM visits GROUP BY department",
]


@pytest.mark.parametrize("sql", QUERIES)
@pytest.mark.parametrize("epsilon", ["0.2", "0.0185185186", "1", "3.7"])
def test_maps_fit_the_charge(sql: str, epsilon: str) -> None:
    query_plan = plan(sql, catalog("main"), PlanRequest(float(epsilon), mechanism="gaussian"))
    charged = laplace_rho_nano(Epsilon(epsilon)) / 1e9
    assert query_plan.gaussian and query_plan.epsilon == 0.0
    assert query_plan.privacy_loss() == 0.0
    assert 0 < query_plan.privacy_loss_rho() <= charged
    assert query_plan.privacy_loss_rho() == pytest.approx(float(epsilon) ** 2 / 2, rel=1e-9)
    for m in query_plan.measurements:
        assert isinstance(m.mechanism, DiscreteGaussian)
        assert m.mechanism.rho() <= m.rho
        assert m.mechanism.groups == query_plan.max_groups_per_unit
        assert m.mechanism.sensitivity == m.spec.unit_bound


def test_groups_cost_sqrt_not_linear() -> None:
    sql = "SELECT department, COUNT(*) FROM visits GROUP BY department"
    laplace = plan(sql, catalog("main"), PlanRequest(1.0)).measurements[0].mechanism
    gaussian = plan(sql, catalog("main"), PlanRequest(1.0, mechanism="gaussian"))
    sigma = gaussian.measurements[0].mechanism.scale
    groups = gaussian.max_groups_per_unit
    assert groups == 2
    # Laplace scale grows with groups·Δ, the Gaussian σ with sqrt(groups)·Δ.
    assert laplace.scale == pytest.approx(groups * 3 / 1.0)
    assert sigma == pytest.approx(3 * (groups / (2 * 0.5)) ** 0.5, rel=1e-6)
