"""Exact privacy amounts (Epsilon) and per-analyst budgets: pure values, no I/O."""

from __future__ import annotations

import pickle
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from accountant import AccountantError, AnalystBudget, Epsilon, InvalidAmount
from accountant.budget import parse_delta


def test_ten_tenths_make_exactly_one() -> None:
    total = Epsilon.zero()
    for _ in range(10):
        total += Epsilon(0.1)
    assert total == Epsilon(1)
    assert sum([Epsilon("0.1")] * 10) == Epsilon("1")
    assert Epsilon("0.1") * 10 == Epsilon(1)


@pytest.mark.parametrize(
    ("value", "plain"),
    [
        ("0.5", "0.5"),
        (0.5, "0.5"),
        (0.1, "0.1"),
        (10, "10"),
        (Decimal("2.50"), "2.5"),
        (" 1e-3 ", "0.001"),
        ("0", "0"),
        (1_000_000, "1000000"),
    ],
)
def test_parse_and_format(value: str | float | Decimal, plain: str) -> None:
    eps = Epsilon(value)
    assert eps.plain == plain
    assert str(eps) == f"ε={plain}"
    assert f"{eps}" == f"ε={plain}"
    assert repr(eps) == f"Epsilon('{plain}')"
    assert eps.as_decimal() == Decimal(plain)


def test_more_than_nine_decimals_round_up() -> None:
    assert Epsilon("0.0000000001").nano == 1
    assert Epsilon(1 / 3) == Epsilon("0.333333334")
    assert Epsilon("0.123456789").nano == 123_456_789


@pytest.mark.parametrize(
    "bad", ["-0.1", -1, "nan", float("nan"), float("inf"), "Infinity", "abc", "", "1000000.1", True]
)
def test_rejects_invalid(bad: object) -> None:
    with pytest.raises(InvalidAmount) as info:
        Epsilon(bad)  # type: ignore[arg-type]
    assert isinstance(info.value, AccountantError)
    assert isinstance(info.value, ValueError)
    assert "ε" in str(info.value)


def test_subtraction_never_goes_negative() -> None:
    assert Epsilon(1) - Epsilon("0.25") == Epsilon("0.75")
    with pytest.raises(InvalidAmount, match="negative"):
        _ = Epsilon("0.25") - Epsilon(1)
    assert Epsilon("0.25").saturating_sub(Epsilon(1)) == Epsilon.zero()


def test_ordering_hashing_and_immutability() -> None:
    a, b = Epsilon("0.1"), Epsilon("0.2")
    assert a < b <= b and b > a >= a and a != b
    assert len({Epsilon("0.5"), Epsilon(0.5), Epsilon("0.50")}) == 1
    assert not Epsilon.zero() and Epsilon("0.1")
    with pytest.raises(AttributeError):
        a._nano = 5
    assert pickle.loads(pickle.dumps(Epsilon("0.3"))) == Epsilon("0.3")
    assert Epsilon(Epsilon("0.7")) == Epsilon("0.7")
    assert float(Epsilon("0.25")) == 0.25


def test_does_not_mix_with_plain_numbers() -> None:
    assert Epsilon(1) != 1
    with pytest.raises(TypeError):
        _ = Epsilon(1) + 1  # type: ignore[operator]
    with pytest.raises(TypeError):
        _ = Epsilon(1) < 2  # type: ignore[operator]


charge = st.decimals(min_value=Decimal("0.000000001"), max_value=Decimal(5), places=9)


@given(total=charge, charges=st.lists(charge, max_size=60))
def test_greedy_charges_never_exceed_total(total: Decimal, charges: list[Decimal]) -> None:
    budget = Epsilon(total)
    spent = Epsilon.zero()
    accepted: list[Decimal] = []
    for c in charges:
        cost = Epsilon(c)
        if spent + cost <= budget:
            spent += cost
            accepted.append(c)
        remaining = budget - spent
        assert remaining >= Epsilon.zero()
        assert spent + remaining == budget
    assert spent.as_decimal() == sum(accepted, Decimal(0))
    assert spent <= budget


@given(st.decimals(min_value=0, max_value=1_000_000, allow_nan=False, places=9))
def test_decimal_roundtrip_is_exact(value: Decimal) -> None:
    eps = Epsilon(value)
    assert eps.as_decimal() == value
    assert Epsilon(eps.plain) == eps
    assert Epsilon.from_nano(eps.nano) == eps


@given(st.floats(min_value=0, max_value=1000, allow_nan=False))
def test_float_parses_as_its_shortest_repr(value: float) -> None:
    eps = Epsilon(value)
    exact = Decimal(str(value))
    # Rounded up to the next nano-ε: eps - 10⁻⁹ < value ≤ eps.
    assert eps.as_decimal() >= exact
    assert (eps.as_decimal() - Decimal("1e-9")) < exact


# -- AnalystBudget -------------------------------------------------------------------


def test_budget_accepts_numbers_and_strings() -> None:
    budget = AnalystBudget.model_validate(
        {"total": "10", "per_query_cap": 1, "default_per_query": 0.1}
    )
    assert budget.total == Epsilon(10)
    assert budget.per_query_cap == Epsilon(1)
    assert budget.default_per_query == Epsilon("0.1")
    assert budget.effective_cap == Epsilon(1)
    assert budget.model_dump(mode="json") == {
        "total": "10",
        "per_query_cap": "1",
        "default_per_query": "0.1",
        "delta": "0.000001",
        "mechanism": "laplace",
        "period": "never",
    }
    again = AnalystBudget.model_validate_json(budget.model_dump_json())
    assert again == budget


def test_budget_without_cap() -> None:
    budget = AnalystBudget(total=Epsilon(2), default_per_query=Epsilon(1))
    assert budget.per_query_cap is None
    assert budget.effective_cap == Epsilon(2)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"total": 0, "default_per_query": 0}, "total must be greater than 0"),
        ({"total": 1, "per_query_cap": 2, "default_per_query": 1}, "cannot exceed total"),
        ({"total": 5, "per_query_cap": 1, "default_per_query": 2}, "cannot exceed per_query_cap"),
        ({"total": 1, "default_per_query": 2}, "cannot exceed total"),
        ({"total": -1, "default_per_query": 1}, "cannot be negative"),
        ({"total": "lots", "default_per_query": 1}, "must be a number"),
        ({"total": 1, "default_per_query": 1, "refill": "monthly"}, "Extra inputs"),
    ],
)
def test_budget_validation(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        AnalystBudget.model_validate(fields)


def test_budget_is_frozen_and_usable_in_settings() -> None:
    class Settings(BaseModel):
        budgets: dict[str, AnalystBudget]

    settings = Settings.model_validate(
        {"budgets": {"alice": {"total": 3, "default_per_query": "0.5"}}}
    )
    with pytest.raises(ValidationError):
        settings.budgets["alice"].total = Epsilon(100)  # type: ignore[misc]
    schema = Settings.model_json_schema()
    assert "AnalystBudget" in schema["$defs"]


@pytest.mark.parametrize("text", ["0_5", "1_0e-1", " 1_0 "])
def test_digit_separators_are_not_numbers(text: str) -> None:
    """Python's Decimal reads 0_5 as 5; PostgreSQL refuses it: so does dpproxy."""
    with pytest.raises(InvalidAmount, match="must be a number"):
        Epsilon(text)
    with pytest.raises(InvalidAmount, match="must be a number"):
        parse_delta("1_0e-7")
