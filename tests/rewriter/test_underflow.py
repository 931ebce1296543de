"""The underflow guard (rewriter.underflow): every value an accepted expression takes is a
multiple of its quantum, so no product or quotient of non-zero values can round to 0 (which
PostgreSQL reports as an error that would depend on the data)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

from rewriter import ColumnPolicy, ColumnType, PlanRequest, Rejected, TablePolicy, build_catalog
from rewriter import plan as make_plan
from rewriter.underflow import SMALLEST_QUANTUM, check_underflow, flush_threshold

LARGEST = 1000.0  # x is a real column with bounds [-1000, 1000]; n an integer in [0, 50]
CATALOG = build_catalog(
    {"t": {"pid": ColumnType.INTEGER, "x": ColumnType.FLOAT, "n": ColumnType.INTEGER}},
    {
        "t": TablePolicy(
            privacy_unit="pid",
            max_rows_per_unit=2,
            columns={
                "x": ColumnPolicy(lower=-LARGEST, upper=LARGEST),
                "n": ColumnPolicy(lower=0, upper=50),
            },
        )
    },
    schema="main",
)


@pytest.mark.parametrize(
    "argument",
    [
        "(x - x + 1e-320) / 3",  # fails on PostgreSQL exactly when some x is not NULL
        "x * 1e-300 * 1e-300",
        "(x - 1e-200) * (x - 1e-200) * (x - 1e-200)",
        "x * 1e-400",  # not even a double
        # A whole number computed from one that underflows (review: width_bucket's
        # argument is cast to an integer, and the cast hid what it computes).
        "width_bucket(x * 1e-200 * 1e-200, 0, 1, 4)",
    ],
)
def test_expressions_that_could_underflow_are_refused(argument: str) -> None:
    with pytest.raises(Rejected, match="underflow"):
        make_plan(f"SELECT SUM({argument}) FROM t", CATALOG, PlanRequest(1.0))


@pytest.mark.parametrize(
    "argument",
    [
        "x * 2.5",
        "x * x * x * x",
        "(x - 0.1) * 1e-80",
        "x / 7 / 3 * n",
        "x * 1e-70",
        "round(x, -1) * n * 1e-70",  # d < 0: whole numbers, quantum 1
        "round(x * 0.001, -2) * round(x, 3)",
    ],
)
def test_ordinary_expressions_are_accepted(argument: str) -> None:
    made = make_plan(f"SELECT SUM({argument}), VAR_POP({argument}) FROM t", CATALOG, PlanRequest(1))
    assert made.sql


def test_rounding_to_tens_has_a_quantum_of_one() -> None:
    """round(x, d) with d <= 0 takes whole numbers (multiples of 10^-d); d > 0 keeps the
    quantum of x, or half of 10^-d if that is smaller."""
    for digits, quantum in ((-1, 1.0), (-15, 1.0), (0, 1.0)):
        node = exp.maybe_parse(f"round(x, {digits})", dialect="postgres")
        assert check_underflow(node, bounds, magnitude) == quantum
    node = exp.maybe_parse("round(x * 1e-300, -1)", dialect="postgres")
    with pytest.raises(Rejected, match="underflow"):  # the product inside is still checked
        check_underflow(node, bounds, magnitude)


def test_a_variance_of_a_value_near_the_limit_is_refused() -> None:
    """The square of the value would be the step that underflows."""
    with pytest.raises(Rejected, match="underflow"):
        make_plan("SELECT VAR_POP(x * 1e-130) FROM t", CATALOG, PlanRequest(1.0))


# -- soundness: evaluate accepted expressions on adversarial doubles ----------------------

THRESHOLD = flush_threshold(LARGEST)
DOUBLES = st.one_of(
    st.sampled_from(
        [
            0.0,
            -0.0,
            5e-324,
            -5e-324,
            1e-310,
            THRESHOLD,
            -THRESHOLD,
            THRESHOLD * 0.999,
            1e-300,
            0.1,
            1 / 3,
            LARGEST,
            -LARGEST,
            2e9,
        ]
    ),
    st.floats(-2 * LARGEST, 2 * LARGEST, allow_nan=False),
)
CONSTANTS = st.sampled_from(["0.1", "3", "1e-100", "2.5e-60", "7", "0.001", "1e-30", "1000"])


def expressions(depth: int) -> st.SearchStrategy[str]:
    leaves = st.one_of(st.just("x"), st.just("n"), CONSTANTS)
    if depth == 0:
        return leaves
    inner = expressions(depth - 1)
    return st.one_of(
        leaves,
        st.tuples(inner, st.sampled_from(["+", "-", "*"]), inner).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
        st.tuples(inner, st.sampled_from(["3", "0.1", "1000", "1e-30"])).map(
            lambda t: f"({t[0]} / {t[1]})"
        ),
    )


def cleaned(x: float) -> float:
    """What bound_per_unit.clean makes of a real value in [-LARGEST, LARGEST]."""
    if -THRESHOLD < x < THRESHOLD:
        return 0.0
    return min(LARGEST, max(-LARGEST, x))


def evaluate(node: exp.Expr, x: float, n: int, quanta: dict[int, float]) -> float:
    """Evaluate in IEEE doubles (as DuckDB does), checking each node against its quantum."""
    if isinstance(node, exp.Paren):
        value = evaluate(node.this, x, n, quanta)
    elif isinstance(node, exp.Column):
        value = cleaned(x) if node.name == "x" else float(n)
    elif isinstance(node, exp.Literal):
        value = float(node.this)
    else:
        left = evaluate(node.this, x, n, quanta)
        right = evaluate(node.expression, x, n, quanta)
        if isinstance(node, exp.Add):
            value = left + right
        elif isinstance(node, exp.Sub):
            value = left - right
        elif isinstance(node, exp.Mul):
            value = left * right
            assert value != 0 or left == 0 or right == 0, ("underflow", node.sql())
        else:
            value = left / right
            assert value != 0 or left == 0, ("underflow", node.sql())
    quantum = quanta[id(node)]
    if value != 0 and math.isfinite(quantum):
        assert abs(value) >= quantum and math.fmod(value, quantum) == 0, (node.sql(), value)
    return value


def bounds(column: exp.Column) -> tuple[float, float, bool]:
    return (-LARGEST, LARGEST, False) if column.name == "x" else (0.0, 50.0, True)


def magnitude(node: exp.Expr) -> float:
    return 1000.0 if node.sql() in ("1000", "x") else max(abs(float(node.sql())), 1.0)


@settings(max_examples=400, deadline=None)
@given(expression=expressions(3), x=DOUBLES, n=st.integers(0, 50))
def test_every_value_is_a_multiple_of_its_quantum(expression: str, x: float, n: int) -> None:
    tree = exp.maybe_parse(expression, dialect="postgres")
    quanta: dict[int, float] = {}
    try:
        for node in tree.walk():
            quanta[id(node)] = check_underflow(node, bounds, magnitude)
    except Rejected:
        return
    assert all(q >= SMALLEST_QUANTUM for q in quanta.values())
    evaluate(tree, x, n, quanta)
