"""What a plan is charged (proxy.pipeline.charge_for): its ε or ρ, and the analyst's δ
when it selects keys from the data; fails closed if the plan's own maps exceed it."""

from __future__ import annotations

from decimal import Decimal

import pytest

from accountant import Epsilon
from proxy.pipeline import charge_for
from rewriter import PlanRequest, plan
from tests.rewriter.driver_sql import catalog


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
@pytest.mark.parametrize("epsilon", [1.0, 300.0, 1000.0])
def test_keys_from_the_data_are_charged_the_analyst_s_delta(mechanism: str, epsilon: float) -> None:
    """At a large ε the selection's δ is below the smallest double (0.0): still a plan
    within its δ (it was refused as an internal error, XX000)."""
    made = plan(
        "SELECT name, COUNT(*) FROM notes GROUP BY name",
        catalog("main"),
        PlanRequest(epsilon, delta=1e-9, mechanism=mechanism),
    )
    assert made.selection is not None
    cost = charge_for(made, Epsilon(str(epsilon)), Decimal("1e-9"))
    assert cost.delta == Decimal("1e-9")
    assert 0 <= made.privacy_loss_delta() <= 1e-9


def test_a_plan_beyond_its_delta_is_refused() -> None:
    made = plan(
        "SELECT name, COUNT(*) FROM notes GROUP BY name",
        catalog("main"),
        PlanRequest(1.0, delta=1e-6),
    )
    with pytest.raises(Exception, match="exceeds its δ"):
        charge_for(made, Epsilon("1"), Decimal("1e-12"))
