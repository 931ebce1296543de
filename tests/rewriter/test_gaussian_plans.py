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
        # Counts and sums: a unit's kept groups share its rows, so L2 <= L1 <= unit_bound.
        assert m.mechanism.groups == 1
        assert m.mechanism.sensitivity == m.spec.unit_bound


def test_groups_share_the_rows_of_a_unit() -> None:
    """Counts: a unit's 3 rows are budgeted across its groups, so neither mechanism's scale
    grows with the groups. Counts of units: 1 in each of 2 groups, so the Laplace scale
    grows with groups·Δ and the Gaussian σ with sqrt(groups)·Δ."""
    sql = "SELECT department, COUNT(*), COUNT(DISTINCT patient_id) FROM visits GROUP BY 1"
    laplace = plan(sql, catalog("main"), PlanRequest(1.0))
    gaussian = plan(sql, catalog("main"), PlanRequest(1.0, mechanism="gaussian"))
    groups = gaussian.max_groups_per_unit
    assert groups == 2
    rows, units = (m.mechanism for m in laplace.measurements)
    assert rows.scale == pytest.approx(3 / 0.5)  # ε = 1 shared by two measurements
    assert units.scale == pytest.approx(groups * 1 / 0.5)
    rows_sigma, units_sigma = (m.mechanism.scale for m in gaussian.measurements)
    assert rows_sigma == pytest.approx(3 * (1 / (2 * 0.25)) ** 0.5, rel=1e-6)
    assert units_sigma == pytest.approx(1 * (groups / (2 * 0.25)) ** 0.5, rel=1e-6)
