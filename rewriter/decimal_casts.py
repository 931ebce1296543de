"""``numeric(p, s)`` of a bounded value inside an aggregate (``rewriter.intervals``).

PostgreSQL rounds the value to s decimals (halves away from zero) and fails when what is
left has more than p − s integer digits: an error on the rows that hold such a value, so
the cast is accepted only when the value's bounds, rounded, fit. DuckDB's DECIMAL holds
38 digits at most, and neither engine computes a negative scale, or one above p, alike:
those are refused too.
"""

from __future__ import annotations

import math
from decimal import Decimal

from sqlglot import exp

from rewriter.errors import Rejected

#: DuckDB's largest DECIMAL precision.
MAX_PRECISION = 38
#: How far, relatively, a value may lie beyond its bound as the engines compute it.
SLACK = Decimal("1e-9")


def decimal_cast(node: exp.Cast, lower: float, upper: float) -> tuple[float, float]:
    """The bounds of ``node``, ``CAST(x AS numeric(p, s))`` of a value within [``lower``,
    ``upper``]: those rounded outwards to s decimals. Rejected if some value would not
    fit."""
    precision, scale = _parameters(node)
    shown = node.sql(dialect="postgres")
    if not 1 <= precision <= MAX_PRECISION or not 0 <= scale <= precision:
        raise Rejected(
            f"{shown} inside an aggregate: dpproxy computes numeric(p, s) with a precision p "
            f"from 1 to {MAX_PRECISION} and a scale s from 0 to p",
            hint=f"cast to numeric without a precision, or to numeric({MAX_PRECISION}, s)",
        )
    unit = Decimal(1).scaleb(-scale)
    limit = Decimal(10) ** (precision - scale)
    # A value rounds to the limit from limit − unit/2 on. The bounds are doubles, computed
    # from the declared ones, where the engines compute the value exactly (PostgreSQL in
    # numeric, reading a double as 15 significant digits; DuckDB in DECIMAL): a value at a
    # bound may lie a little beyond it (30 · 0.33166666666666667 is 9.95000000000000001,
    # whose bound 9.95 is the double 9.9499999999999993). So the bounds must stay clear of
    # that edge by more than any such error (SLACK, relative).
    edge = limit - unit / 2
    for bound in (lower, upper):
        if abs(Decimal(bound)) * (1 + SLACK) >= edge:
            raise Rejected(
                f"{shown} inside an aggregate could fail on some values, and the error would "
                f"reveal them: its values lie within [{lower:g}, {upper:g}], and "
                f"numeric({precision}, {scale}) holds less than ±{limit:f}",
                hint="cast to a numeric of more digits, or to numeric without a precision",
            )
    step = 10.0**scale
    return math.floor(lower * step) / step, math.ceil(upper * step) / step


def _parameters(node: exp.Cast) -> tuple[int, int]:
    values: list[int] = []
    for parameter in node.to.expressions:
        literal = parameter.this if isinstance(parameter, exp.DataTypeParam) else parameter
        if not isinstance(literal, exp.Literal) or literal.is_string or not literal.is_int:
            values.append(-1)  # refused above, as out of range
            continue
        values.append(int(literal.this))
    if len(values) == 1:
        return values[0], 0
    if len(values) == 2:
        return values[0], values[1]
    return -1, -1
