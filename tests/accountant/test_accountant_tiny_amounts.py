"""Amounts far below the ledger's units: never flushed to 0 by Decimal's exponent limits
(``Decimal("1e-999999999999999999").scaleb(9)`` is 0), nor rounded to 28 digits."""

from __future__ import annotations

from decimal import Decimal

import pytest

from accountant import Cost, Epsilon, InvalidAmount, Rho
from accountant.budget import (
    budget_delta,
    budget_epsilon,
    ceil_scaled,
    delta_units,
    format_delta,
)

TINY = "1e-999999999999999999"


def test_a_tiny_positive_cost_is_at_least_one_unit() -> None:
    assert Epsilon(TINY) == Epsilon("0.000000001") and not Epsilon(TINY).is_zero()
    assert Rho(TINY).nano == 1
    assert delta_units(Decimal(TINY)) == 1
    assert Cost(Epsilon(1), Rho.zero(), Decimal(TINY)).delta == Decimal("1e-15")
    assert Epsilon("0e-999999999999999999").is_zero() and delta_units(Decimal("0e-99999")) == 0


def test_rounding_up_is_exact_beyond_28_digits() -> None:
    # 1e-9 + 1e-37: Decimal's 28 digits would drop the 1e-37 and charge one nano-unit.
    assert Epsilon("0.0000000010000000000000000000000000001").nano == 2
    assert delta_units(Decimal("1.00000000000000000000000000000000001e-15")) == 2
    assert ceil_scaled(Decimal("123.4567890123"), 9) == 123456789013
    with pytest.raises(InvalidAmount):
        ceil_scaled(Decimal("1e999999999"), 15)


def test_tiny_values_are_refused_as_budgets_and_shown_as_they_are() -> None:
    with pytest.raises(InvalidAmount, match="below the smallest ε"):
        budget_epsilon(TINY)
    with pytest.raises(InvalidAmount, match="below the smallest δ"):
        budget_delta(TINY)
    assert format_delta(Decimal(TINY)) == TINY  # not 0e+0
    assert format_delta(Decimal("2.50e-7")) == "2.5e-7" and format_delta(Decimal(0)) == "0"
