"""zCDP accounting: the CKS20 conversion, mixing pure ε and ρ, and (ε, δ) budgets."""

from __future__ import annotations

import math
from decimal import Decimal

import opendp.prelude as dp
import pytest

from accountant import (
    AdminChange,
    AnalystBudget,
    Attempt,
    BudgetExhausted,
    Cost,
    Decision,
    Epsilon,
    InvalidAmount,
    Mechanism,
    PerQueryCapExceeded,
    Rho,
    StateLocation,
    StateStore,
    ZcdpNeedsDelta,
)
from accountant.zcdp import cks_epsilon, epsilon_nano_of, laplace_rho_nano
from tests.accountant.backends import query

dp.enable_features("contrib")
CHANGE = AdminChange(actor="root@host", command="dpproxy analyst add alice")
SIGMA_54_RHO = 1 / (2 * 54**2)


def opendp_epsilon(sigma: float, delta: float) -> tuple[float, float]:
    """(ρ, ε at δ) of OpenDP's discrete Gaussian at sensitivity 1, converted by OpenDP."""
    gaussian = dp.m.make_gaussian(
        dp.atom_domain(T="i64"), dp.absolute_distance(T="i64"), scale=sigma
    )
    approx = dp.c.make_zCDP_to_approxDP(gaussian)
    return float(gaussian.map(1)), float(approx.map(1).epsilon(delta))


@pytest.mark.parametrize("sigma", [0.5, 1.0, 5.0, 54.0, 300.0])
@pytest.mark.parametrize("delta", [1e-5, 1e-6, 1e-9])
def test_cks_conversion_matches_opendp(sigma: float, delta: float) -> None:
    rho, expected = opendp_epsilon(sigma, delta)
    assert cks_epsilon(rho, delta) == pytest.approx(expected, rel=1e-9)


def test_cks_known_values_and_the_simple_bound() -> None:
    # ρ = 0.5, δ = 1e-6 (σ = 1): CKS20 gives 5.2215, the simple bound 5.7565.
    assert cks_epsilon(0.5, 1e-6) == pytest.approx(5.22153444453017, rel=1e-9)
    simple = 0.5 + 2 * math.sqrt(0.5 * math.log(1e6))
    assert simple == pytest.approx(5.756521769756932)
    for rho in (1e-6, 1e-3, 0.1, 1.0, 10.0):
        assert cks_epsilon(rho, 1e-6) <= rho + 2 * math.sqrt(rho * math.log(1e6))


def test_cks_edge_cases() -> None:
    assert cks_epsilon(0.0, 1e-6) == 0.0
    assert cks_epsilon(0.1, 0.0) == math.inf
    with pytest.raises(ValueError, match="rho"):
        cks_epsilon(-1.0, 1e-6)
    with pytest.raises(ValueError, match="delta"):
        cks_epsilon(0.1, 1.0)


def test_pure_epsilon_alone_composes_exactly() -> None:
    pure = Epsilon("0.3").nano * 10
    assert epsilon_nano_of(pure, 10 * laplace_rho_nano(Epsilon("0.3")), 0, Decimal("1e-6")) == pure


def test_mixed_charges_take_the_better_of_two_valid_bounds() -> None:
    delta = Decimal("1e-6")
    gaussian = Rho(str(SIGMA_54_RHO)).nano * 50
    small = Epsilon("0.01")
    # 20 Laplace charges of ε=0.01: as pure ε they add 0.2; as ρ only 20·0.00005 = 0.001.
    split = 0.2 + cks_epsilon(gaussian / 1e9, 1e-6)
    merged = cks_epsilon((gaussian + 20 * laplace_rho_nano(small)) / 1e9, 1e-6)
    got = epsilon_nano_of(20 * small.nano, 20 * laplace_rho_nano(small), gaussian, delta) / 1e9
    assert merged < split
    assert got == pytest.approx(merged, rel=1e-6)
    assert got >= merged  # rounded up, never down


def test_laplace_rho_is_rounded_up() -> None:
    assert laplace_rho_nano(Epsilon(1)) == 500_000_000
    assert laplace_rho_nano(Epsilon.from_nano(1)) == 1  # 1e-18 / 2 rounds up to 1 nano-ρ


def test_benchmark_target_sigma_54_fits_over_100_times() -> None:
    rho = Rho(str(SIGMA_54_RHO))
    count = 0
    while epsilon_nano_of(0, 0, rho.nano * (count + 1), Decimal("1e-6")) <= 10**9:
        count += 1
    assert count >= 100


def budget(total: str = "1", delta: str = "0.000001", cap: str | None = None) -> AnalystBudget:
    return AnalystBudget(
        total=Epsilon(total),
        default_per_query=Epsilon("0.1"),
        per_query_cap=None if cap is None else Epsilon(cap),
        delta=Decimal(delta),
    )


def attempt() -> Attempt:
    return Attempt("alice", "127.0.0.1", "SELECT COUNT(*) FROM visits")


def test_gaussian_charges_in_the_store(location: StateLocation) -> None:
    rho = Rho(str(SIGMA_54_RHO))
    with StateStore.open(location) as store:
        store.add_analyst("alice", "v", budget(), CHANGE)
        accepted = 0
        while True:
            try:
                reservation = store.reserve(attempt(), Cost.zcdp(rho))
            except BudgetExhausted as refusal:
                assert "ρ=" in str(refusal)
                break
            store.complete(reservation, decision="accepted", reason=None, rows=1, duration_ms=1.0)
            accepted += 1
        assert accepted >= 100
        stored = store.analyst("alice")
        assert stored is not None and stored.spent <= Epsilon(1)
        records = store.audit_records(decisions=[Decision.ACCEPTED])
        assert all(r.rho == rho and r.epsilon.is_zero() for r in records)
        assert records[-1].to_dict()["rho"] == rho.plain
        assert store.verify_audit().intact
    assert query(location, "SELECT sum(rho_nano) FROM reservations") == [(rho.nano * accepted,)]


def test_per_query_cap_bounds_rho_and_delta_zero_refuses_gaussian(
    location: StateLocation,
) -> None:
    with StateStore.open(location) as store:
        store.add_analyst("alice", "v", budget(total="10", cap="0.5"), CHANGE)
        with pytest.raises(PerQueryCapExceeded, match="ρ="):
            store.reserve(attempt(), Cost.zcdp(Rho("0.2")))  # above 0.5²/2 = 0.125
        store.reserve(attempt(), Cost.zcdp(Rho("0.125")))
        store.add_analyst("pure", "v", budget(delta="0"), CHANGE)
        with pytest.raises(ZcdpNeedsDelta, match="δ = 0"):
            store.reserve(Attempt("pure", "a", "SELECT 1"), Cost.zcdp(Rho("0.001")))


def test_delta_and_mechanism_are_stored() -> None:
    made = AnalystBudget(
        total=Epsilon(1), default_per_query=Epsilon("0.1"), delta="1e-7", mechanism="gaussian"
    )
    assert made.delta == Decimal("1e-7") and made.mechanism is Mechanism.GAUSSIAN
    with pytest.raises(ValueError, match="δ must be between"):
        AnalystBudget(total=Epsilon(1), default_per_query=Epsilon("0.1"), delta="0.5")
    with pytest.raises(ValueError, match="Gaussian default mechanism needs a delta"):
        AnalystBudget(
            total=Epsilon(1), default_per_query=Epsilon("0.1"), delta=0, mechanism="gaussian"
        )
    with pytest.raises(InvalidAmount):
        Rho("-1")


def test_stored_budget_round_trips(location: StateLocation) -> None:
    made = AnalystBudget(
        total=Epsilon(2), default_per_query=Epsilon("0.1"), delta="1e-8", mechanism="gaussian"
    )
    with StateStore.open(location) as store:
        store.add_analyst("alice", "v", made, CHANGE)
        stored = store.analyst("alice")
        assert stored is not None and stored.budget == made
        assert stored.to_dict()["delta"] == "1e-8"
