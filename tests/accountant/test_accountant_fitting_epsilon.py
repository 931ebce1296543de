"""The ε a budget refusal names is one the ledger accepts: charging exactly it succeeds and
a nano-ε more is refused, with a global cap on all analysts in place too. Where the global
cap could not pay for the largest ε the analyst's own budget leaves, the refusal names no
ε at all (the largest the global cap pays for would tell one analyst what the others
spent), and charging that ε is indeed refused by the global cap."""

from __future__ import annotations

import re
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
    Mechanism,
    StateLocation,
    StateStore,
)
from accountant.errors import BudgetExhausted
from accountant.ledger import session_cost

CHANGE = AdminChange("root", "test")
SUGGESTED = re.compile(r"SET dpproxy\.epsilon = ([0-9.]+)")
NANO = Epsilon("0.000000001")


def budget(total: str, *, cap: str | None = None, gaussian: bool = False) -> AnalystBudget:
    return AnalystBudget(
        total=Epsilon(total),
        default_per_query=Epsilon("0.1"),
        per_query_cap=None if cap is None else Epsilon(cap),
        mechanism=Mechanism.GAUSSIAN if gaussian else Mechanism.LAPLACE,
        delta=Decimal("1e-6"),
    )


def attempt(analyst: str) -> Attempt:
    return Attempt(analyst, "10.0.0.7:5000", "SELECT COUNT(*) FROM visits")


def refusal(store: StateStore, analyst: str, cost: Cost) -> BudgetExhausted:
    with pytest.raises(BudgetExhausted) as refused:
        store.reserve(attempt(analyst), cost)
    return refused.value


def named(message: str) -> Epsilon:
    found = SUGGESTED.search(message)
    assert found, message
    return Epsilon(found.group(1))


def test_the_named_epsilon_fits_every_limit_and_a_nano_more_does_not(
    location: StateLocation,
) -> None:
    with StateStore.open(location) as store:
        store.add_analyst("alice", "v", budget("1", cap="0.5"), CHANGE)
        store.set_global_budget(GlobalBudget(Epsilon(5), Decimal("1e-6")), CHANGE)
        for spent in ("0.4", "0.3"):
            store.reserve(attempt("alice"), Cost.pure(Epsilon(spent)))
        message = str(refusal(store, "alice", Cost.pure(Epsilon("0.5"))))
        fits = named(message)
        assert fits == Epsilon("0.3")
        more = refusal(store, "alice", Cost.pure(fits + NANO))
        assert not isinstance(more, GlobalBudgetExhausted)
        store.reserve(attempt("alice"), Cost.pure(fits))  # exactly it is charged
        assert store.remaining("alice") == Epsilon.zero()


def test_a_gaussian_refusal_names_an_epsilon_the_global_cap_pays_for_too(
    location: StateLocation,
) -> None:
    with StateStore.open(location) as store:
        store.add_analyst("gus", "v", budget("2", gaussian=True), CHANGE)
        store.set_global_budget(GlobalBudget(Epsilon(50), Decimal("1e-6")), CHANGE)
        store.reserve(attempt("gus"), session_cost(Epsilon("0.2"), gaussian=True))
        message = str(refusal(store, "gus", session_cost(Epsilon("0.5"), gaussian=True)))
        fits = named(message)
        assert Epsilon.zero() < fits < Epsilon("0.5")
        store.reserve(attempt("gus"), session_cost(fits, gaussian=True))
        # Two significant digits, rounded down: the next such ε does not fit any more.
        step = Epsilon(str(Decimal(1).scaleb(Decimal(fits.plain).adjusted() - 1)))
        refusal(store, "gus", session_cost(fits + step, gaussian=True))


def test_where_the_global_cap_cannot_pay_the_refusal_names_no_epsilon(
    location: StateLocation,
) -> None:
    with StateStore.open(location) as store:
        for name in ("alice", "bob"):
            store.add_analyst(name, "v", budget("1"), CHANGE)
        # The global cap has ε=0.2 left once bob has spent 0.9 and alice 0.5 of it.
        store.set_global_budget(GlobalBudget(Epsilon("1.6"), Decimal("1e-6")), CHANGE)
        store.reserve(attempt("bob"), Cost.pure(Epsilon("0.9")))
        store.reserve(attempt("alice"), Cost.pure(Epsilon("0.5")))
        refused = refusal(store, "alice", Cost.pure(Epsilon("0.6")))
        message = str(refused)
        assert not isinstance(refused, GlobalBudgetExhausted)  # alice's own budget is short
        # Before: "lower the query's ε with SET dpproxy.epsilon = 0.5", which the global cap
        # refuses.
        assert "SET dpproxy.epsilon" not in message, message
        assert "global privacy budget shared by all analysts could not pay" in message
        assert "ε=0.5 remains of 1" in message  # alice's own budget, as before
        for secret in ("0.2", "0.9", "1.6", "1.4"):  # the global cap's figures, and bob's
            assert secret not in message, message
        with pytest.raises(GlobalBudgetExhausted):
            store.reserve(attempt("alice"), Cost.pure(Epsilon("0.5")))
        store.reserve(attempt("alice"), Cost.pure(Epsilon("0.2")))  # what the cap still pays
