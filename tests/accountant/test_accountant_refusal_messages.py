"""What refusals say: the global cap states none of its amounts (they would tell one analyst
what the others spent), a δ that leaves no room for Gaussian spending says so, and sums
beyond the largest amount say the limit and what to do."""

from __future__ import annotations

from decimal import Decimal

import pytest

from accountant import (
    AdminChange,
    AnalystBudget,
    Attempt,
    Cost,
    Epsilon,
    GlobalBudget,
    GlobalBudgetExhausted,
    InvalidAmount,
    Rho,
    StateLocation,
    StateStore,
)
from accountant.errors import BudgetExhausted, DeltaLeavesNoRoomForRho

CHANGE = AdminChange("root", "test")
#: The global cap and what bob spends of it: none of these may reach alice.
GLOBAL_TOTAL, GLOBAL_DELTA = "1.234567", "3.3e-7"
BOB_EPSILON, BOB_DELTA = "0.9", "2.2e-7"
SECRETS = ("1.234567", "0.334567", "3.3e-7", "1.1e-7", "0.9", "2.2e-7", "0.00000033")


def budget(total: str = "10", delta: str = "1e-6") -> AnalystBudget:
    return AnalystBudget(total=Epsilon(total), default_per_query=Epsilon("0.1"), delta=delta)


def attempt(analyst: str) -> Attempt:
    return Attempt(analyst, "10.0.0.7:5000", "SELECT stay, count(*) FROM visits GROUP BY stay")


def test_a_global_cap_refusal_states_no_amount_of_the_global_budget(
    location: StateLocation,
) -> None:
    with StateStore.open(location) as store:
        for name in ("alice", "bob"):
            store.add_analyst(name, "v", budget(), CHANGE)
        store.set_global_budget(GlobalBudget(Epsilon(GLOBAL_TOTAL), Decimal(GLOBAL_DELTA)), CHANGE)
        bob = Cost.pure(Epsilon(BOB_EPSILON)).with_delta(Decimal(BOB_DELTA))
        store.reserve(attempt("bob"), bob)
        refusals = []
        for cost in (
            Cost.pure(Epsilon("0.1")).with_delta(Decimal("2e-7")),  # δ: 1.1e-7 left
            Cost.pure(Epsilon("0.5")),  # ε: 0.334567 left
            Cost.zcdp(Rho("0.5")),
        ):
            with pytest.raises(GlobalBudgetExhausted) as refused:
                store.reserve(attempt("alice"), cost)
            refusals.append(refused.value)
        for refusal in refusals:
            message = str(refusal)
            assert "global privacy budget shared by all analysts cannot pay" in message
            assert "ask an admin" in message
            assert not [s for s in SECRETS if s in message], message
            assert isinstance(refusal, BudgetExhausted)  # refused like any exhausted budget
        # The figures are for the admin (the log; `dpproxy budget global`).
        assert "δ=4.2e-7 of the global cap's δ=3.3e-7" in refusals[0].admin_detail
        assert "of the global cap's ε=1.234567" in refusals[1].admin_detail
        assert store.global_spent(Decimal(GLOBAL_DELTA)) == Epsilon(BOB_EPSILON)
        # Nothing was charged for the refusals; a query that fits is still answered.
        store.reserve(attempt("alice"), Cost.pure(Epsilon("0.3")).with_delta(Decimal("1e-7")))


def test_a_pure_epsilon_global_cap_refuses_gaussian_answers_without_blaming_the_analyst(
    location: StateLocation,
) -> None:
    with StateStore.open(location) as store:
        store.add_analyst("alice", "v", budget(), CHANGE)
        store.set_global_budget(GlobalBudget(Epsilon(5), Decimal(0)), CHANGE)
        with pytest.raises(GlobalBudgetExhausted) as refused:
            store.reserve(attempt("alice"), Cost.zcdp(Rho("0.01")))
        assert "pure-ε budget" not in str(refused.value)  # alice's own δ is 1e-6
        assert "pure ε (δ = 0)" in refused.value.admin_detail


def test_a_delta_that_leaves_no_delta_for_gaussian_spending_says_so(
    location: StateLocation,
) -> None:
    with StateStore.open(location) as store:
        store.add_analyst("alice", "v", budget(total="3"), CHANGE)
        store.reserve(attempt("alice"), Cost.zcdp(Rho("0.125")))  # ε ≈ 2.42 at δ = 1e-6
        # All of alice's δ on one selection: none left to state ρ as ε.
        whole = Cost.pure(Epsilon("0.01")).with_delta(Decimal("1e-6"))
        with pytest.raises(DeltaLeavesNoRoomForRho) as refused:
            store.reserve(attempt("alice"), whole)
        message = str(refused.value)
        assert "spends δ=1e-6, but that is all the δ" in message
        assert "with no δ left it cannot be stated at all" in message
        assert "lower dpproxy.delta (at most " in message and "SET dpproxy.epsilon" not in message
        largest = refused.value.largest_delta
        assert largest == Decimal("9.9e-7")  # rounded down to two digits
        assert "(at most 9.9e-7 fits)" in message
        # Leaving a little δ is not enough either: ρ at δ = 1e-15 is more than alice has.
        with pytest.raises(DeltaLeavesNoRoomForRho) as again:
            store.reserve(attempt("alice"), whole.with_delta(Decimal("1e-6") - Decimal("1e-15")))
        assert 'would leave analyst "alice" δ=1e-15' in str(again.value)
        assert "would then come to more than their ε budget" in str(again.value)
        # A query too large even without its δ: its ε is the problem, as before.
        with pytest.raises(BudgetExhausted) as too_much:
            store.reserve(attempt("alice"), Cost.pure(Epsilon(1)).with_delta(Decimal("1e-9")))
        assert not isinstance(too_much.value, DeltaLeavesNoRoomForRho)
        assert "lower the query's ε" in str(too_much.value)
        store.reserve(attempt("alice"), whole.with_delta(largest))  # the δ it names fits
        assert store.remaining("alice") < Epsilon("0.5")


def test_a_sum_beyond_the_largest_amount_says_the_limit_and_what_to_do() -> None:
    with pytest.raises(InvalidAmount) as too_large:
        _ = Epsilon(3) + Epsilon("999999.9")
    message = str(too_large.value)
    assert "ε=3 + ε=999999.9 would be ε=1000002.9" in message
    assert "the largest ε dpproxy keeps (1000000" in message
    assert message.endswith("add at most ε=999997")
    assert "stored" not in message
    with pytest.raises(InvalidAmount, match=r"3 × ρ=400000 would be ρ=1200000"):
        _ = Rho(400000) * 3
    assert Epsilon(3) + Epsilon(999997) == Epsilon(1000000)
