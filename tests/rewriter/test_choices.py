"""CASE, IF, COALESCE, GREATEST and LEAST inside aggregates choose among values that are
cleaned (clamped to their bounds) before any arithmetic: ``SUM(CASE WHEN stay > 1 THEN
cost * 2 ELSE 0 END)`` is a bounded sum, not raw arithmetic (it was refused by mistake).
The kinds of the values are found once per node: nested CASEs took time exponential in
their depth (14 levels: 2 minutes on the server's event loop)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

import rewriter.passes.check_types as check_types
from rewriter import PlanRequest, Rejected, plan
from tests.rewriter.coupling import in_key_order, sensitivity
from tests.rewriter.test_neighbours import CATALOG, database, totals, visit

ACCEPTED = [
    "SELECT SUM(CASE WHEN stay > 1 THEN cost * 2 ELSE 0 END) FROM visits",
    "SELECT SUM(COALESCE(cost * 2, 0)), AVG(GREATEST(stay + 1, 3)) FROM visits",
    "SELECT SUM(LEAST(cost - stay, 10)) FILTER (WHERE stay > 2) FROM visits",
    "SELECT department, AVG(CASE WHEN cost > 100 THEN cost * 0.5 ELSE cost END) FROM visits "
    "GROUP BY department",
]


@pytest.mark.parametrize("sql", ACCEPTED)
def test_arithmetic_in_chosen_values_inside_aggregates_is_accepted(sql: str) -> None:
    plan(sql, CATALOG, PlanRequest(1.0))


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) FROM visits WHERE CASE WHEN stay > 1 THEN stay * 2 ELSE 0 END > 3",
        "SELECT COUNT(*) FROM visits WHERE COALESCE(cost * 2, 0) > 3",
    ],
)
def test_arithmetic_on_raw_values_stays_refused(sql: str) -> None:
    with pytest.raises(Rejected, match="arithmetic on a column's raw values"):
        plan(sql, CATALOG, PlanRequest(1.0))


@pytest.mark.parametrize("sql", ACCEPTED[:3])
@settings(max_examples=25, deadline=None)
@given(
    visits=st.lists(visit, max_size=25),
    removed=st.integers(1, 5),
)
def test_one_person_moves_chosen_sums_within_the_sensitivity(
    sql: str, visits: list[tuple[int, str, float | None, int | None]], removed: int
) -> None:
    made = plan(sql, CATALOG, PlanRequest(1.0))
    keys = len(made.keys)
    query = in_key_order(made)
    with_person = totals(database(visits, [], None), query, keys)
    without = totals(database(visits, [], removed), query, keys)
    zeros = [0] * len(made.measurements)
    for index, measurement in enumerate(made.measurements):
        change = sum(
            abs(with_person.get(c, zeros)[index] - without.get(c, zeros)[index])
            for c in set(with_person) | set(without)
        )
        assert change <= sensitivity(made, measurement)


@pytest.mark.parametrize(
    ("template", "where"),
    [
        ("SELECT SUM({}) FROM visits", "CASE WHEN cost > 1 THEN {} ELSE 0 END"),
        ("SELECT COUNT(*) FROM visits WHERE {} > 1", "CASE WHEN cost > 1 THEN {} ELSE 0 END"),
        ("SELECT SUM({}) FROM visits", "COALESCE({}, 1)"),
    ],
)
def test_nested_choices_are_typed_in_time_linear_in_their_depth(
    template: str, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    original = check_types._kind

    def counted(*args: object, **kwargs: object) -> str:
        calls.append(1)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(check_types, "_kind", counted)
    made = []
    for depth in (6, 12):
        calls.clear()
        value = "cost" if "SUM" in template else "stay"
        for _ in range(depth):
            value = where.format(value)
        plan(template.format(value), CATALOG, PlanRequest(1.0))
        made.append(len(calls))
    # Twice the depth, about twice the calls (it was three times the calls per level).
    assert made[1] <= 2.5 * made[0], made


def test_a_round_of_a_rounded_raw_value_is_refused() -> None:
    """On raw values round(x, d) writes x three times (a guard for NaN, infinity and
    values near the largest double): nested, the SQL tripled per level (12 levels, 55 MB,
    six minutes of planning; review)."""
    for sql in (
        "SELECT COUNT(*) FROM visits WHERE round(round(cost, 1), 1) > 0",
        "SELECT COUNT(*) FROM visits WHERE round(CASE WHEN stay > 1 THEN round(cost, 1) "
        "ELSE 0 END, 1) > 0",
    ):
        with pytest.raises(Rejected, match="itself rounded"):
            plan(sql, CATALOG, PlanRequest(1.0))
    # Inside aggregates values are clean: nesting costs nothing more.
    plan("SELECT SUM(round(round(cost, 1), 0)) FROM visits", CATALOG, PlanRequest(1.0))


def test_nested_rounds_in_group_by_keys_stay_small(monkeypatch: pytest.MonkeyPatch) -> None:
    """A GROUP BY key's round writes its argument twice: nested, its SQL doubled per level
    until the key was refused for its size, after all the work. It is refused as soon as
    it grows past a few thousand nodes: 12 levels make no more nodes than 8."""
    copies: list[int] = []
    original = exp.Expr.__init__

    def counted(self: exp.Expr, *args: object, **kwargs: object) -> None:
        copies.append(1)
        original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(exp.Expr, "__init__", counted)
    made = []
    for depth in (8, 12):
        copies.clear()
        key = "round(" * depth + "cost" + ", 1)" * depth
        with pytest.raises(Rejected, match="too complex"):
            plan(
                f"SELECT {key} AS k, COUNT(*) FROM visits GROUP BY 1",
                CATALOG,
                PlanRequest(1.0, delta=1e-6),
            )
        made.append(len(copies))
    assert made[1] <= 2 * made[0], made
