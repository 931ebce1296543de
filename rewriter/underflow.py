"""No multiplication or division inside an aggregate may underflow.

PostgreSQL raises an error ("value out of range: underflow") when a product or quotient of
non-zero doubles rounds to zero, where DuckDB quietly returns 0. An error that happens only
for some rows would tell the analyst that such a row exists — a channel around the noise —
and it would come after the charge. ``SUM((x - x + 1e-320) / 3)`` fails exactly when some
row has a non-NULL x.

So every value expression gets a *quantum*: a power of two q such that each value the
expression can take is an integer multiple of q (hence 0 or at least q in magnitude).
Integers (integer columns, booleans, EXTRACT of a date or timestamp field) have q = 1.
A real column's cleaned values are flushed to 0 below :func:`flush_threshold` of its
largest bound (``rewriter.passes.bound_per_unit.clean``), so they are multiples of that
threshold's ulp. Then, exactly:

- a sum or difference of multiples of q1 and q2 is a multiple of min(q1, q2), even after
  rounding (a result that needs rounding is at least 2^53 times that quantum, and rounds
  to a multiple of its own ulp, a larger power of two);
- a product is a multiple of q1·q2 (the same argument);
- a quotient a / b with |b| <= B is 0 or at least q(a) / B in magnitude, so it is a
  multiple of the ulp of that;
- CASE, COALESCE, GREATEST, LEAST take the smallest quantum of their branches.

Every node must keep q >= 2^-450. Then no product of two nodes is below 2^-900, no
quotient (divisors are at most 2^52, see rewriter.intervals) is below 2^-502, the squares of
a variance and the scaling onto the fixed-point grid stay far above the smallest double
(2^-1074), and nothing can round to zero from a non-zero value.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal, InvalidOperation

from sqlglot import exp

from rewriter.errors import Rejected

SMALLEST_QUANTUM = 2.0**-450
FLUSH_BITS = 60  # real values below 2^-60 of their column's largest bound are flushed to 0
DOUBLE_BITS = 52
EXACT = math.inf  # the quantum of the constant 0: a multiple of anything


#: The largest finite double, as SQL text: x BETWEEN -it AND it is false for NaN and ±inf.
LARGEST_DOUBLE = "1.7976931348623157e308"


def flush_threshold(largest: float) -> float:
    """Cleaned real values with magnitude below this are taken as 0 (a power of two, 2^-60
    of the column's largest bound magnitude ``largest``, rounded up to a power of two)."""
    if largest <= 0:
        return 0.0
    return math.ldexp(1.0, math.ceil(math.log2(largest)) - FLUSH_BITS)


def flushed_bounds(lower: float, upper: float) -> tuple[float, float, float]:
    """A real column's bounds for cleaning, and its flush threshold: bounds closer to 0 than
    the threshold move inwards (to 0, or to the threshold), so that every cleaned value is
    0 or at least the threshold in magnitude and still lies within [lower, upper]."""
    threshold = flush_threshold(max(abs(lower), abs(upper)))
    if abs(lower) < threshold:
        lower = 0.0 if lower <= 0 else threshold
    if abs(upper) < threshold:
        upper = 0.0 if upper >= 0 else -threshold
    return lower, upper, threshold


def real_quantum(largest: float) -> float:
    """The quantum of a real column's cleaned values: the ulp of its flush threshold."""
    threshold = flush_threshold(largest)
    return EXACT if threshold == 0 else _ulp_floor(threshold)


Interval = tuple[float, float, bool]  # lower, upper, integer-valued
Bounds = Callable[[exp.Column], Interval]
Magnitude = Callable[[exp.Expr], float]  # the largest magnitude of a sub-expression


def check_underflow(node: exp.Expr, bounds: Bounds, magnitude: Magnitude) -> float:
    """The quantum of ``node``; raise Rejected if some step could underflow."""
    found = _quantum(node, bounds, magnitude)
    if found < SMALLEST_QUANTUM:
        raise Rejected(
            f"{node.sql(dialect='postgres')} inside an aggregate can produce numbers so small "
            "that PostgreSQL fails on them (underflow), and such an error would depend on "
            "the data",
            hint="use constants no smaller than about 1e-70 in magnitude, and fewer "
            "nested products or divisions of real columns",
        )
    return found


def _quantum(node: exp.Expr, bounds: Bounds, magnitude: Magnitude) -> float:
    def q(child: exp.Expr) -> float:
        return check_underflow(child, bounds, magnitude)

    if isinstance(node, exp.Paren):
        return q(node.this)
    if isinstance(node, exp.Column):
        lower, upper, integer = bounds(node)
        return 1.0 if integer else real_quantum(max(abs(lower), abs(upper)))
    if isinstance(node, exp.Literal) and not node.is_string:
        return _literal_quantum(node.this)
    if isinstance(node, (exp.Boolean, exp.Extract)):
        return 1.0  # EXTRACT of a date or timestamp field: integers (rewriter.intervals)
    if isinstance(node, exp.Null):
        return EXACT  # no value (a CASE's NULL branch: nullif, rewriter.passes.row_functions)
    if isinstance(node, (exp.Neg, exp.Abs)):
        return q(node.this)
    if isinstance(node, (exp.Add, exp.Sub)):
        return min(q(node.this), q(node.expression))
    if isinstance(node, exp.Mul):
        return q(node.this) * q(node.expression)
    if isinstance(node, exp.Div):
        divisor = node.expression
        if isinstance(divisor, exp.Nullif):
            divisor = divisor.this
        q(divisor)
        dividend = q(node.this)
        if dividend == EXACT:
            return EXACT
        # |a / b| >= q(a) / max|b|; a double that large is a multiple of its ulp floor.
        return _ulp_floor(dividend / max(magnitude(divisor), 1.0))
    if isinstance(node, (exp.Floor, exp.Ceil, exp.Round)):
        inner = q(node.this)
        digits = rounding_digits(node)
        if digits is None:
            raise Rejected(f"{node.sql(dialect='postgres')} inside an aggregate needs a constant d")
        if digits <= 0:
            return 1.0  # whole numbers (multiples of 10^-d)
        return min(inner, _ulp_floor(10.0**-digits / 2))
    if isinstance(node, exp.Case):
        branches = [branch.args["true"] for branch in node.args.get("ifs", [])]
        if node.args.get("default") is not None:
            branches.append(node.args["default"])
        return min((q(branch) for branch in branches), default=EXACT)
    if isinstance(node, exp.If):
        other = node.args.get("false")
        then = q(node.args["true"])
        return then if other is None else min(then, q(other))
    if isinstance(node, (exp.Coalesce, exp.Greatest, exp.Least)):
        return min([q(node.this), *(q(other) for other in node.expressions)])
    if isinstance(node, exp.Cast):
        inner = q(node.this)  # what is cast is computed first: it must not underflow either
        return 1.0 if node.to.is_type(*exp.DataType.INTEGER_TYPES) else inner
    raise Rejected(f"cannot bound {node.sql(dialect='postgres')} inside an aggregate")


def rounding_digits(node: exp.Floor | exp.Ceil | exp.Round) -> int | None:
    """The d of round(x, d) (also floor and ceil): 0 without it, the whole number that a
    literal or a negated literal spells (``round(x, -1)`` parses as a negation), None for
    anything else."""
    digits = node.args.get("decimals")
    if digits is None:
        return 0
    negative = isinstance(digits, exp.Neg)
    literal = digits.this if negative else digits
    if not (isinstance(literal, exp.Literal) and literal.is_int):
        return None
    return -int(literal.this) if negative else int(literal.this)


def _literal_quantum(text: str) -> float:
    try:
        exact = Decimal(text)
    except InvalidOperation:
        raise Rejected(f"{text} is not a number") from None
    if exact == 0:
        return EXACT
    value = float(text)
    if value == 0 or not math.isfinite(value):
        return 0.0  # too small (or large) for a double: refused
    # A double is an integer multiple of 2^(e - 52) where 2^e <= |value|; never below 2^-1074.
    return _ulp_floor(abs(value))


def _ulp_floor(value: float) -> float:
    """The ulp of the smallest normal double at or below ``value``: every double with
    magnitude at least ``value`` is a multiple of it."""
    if value <= 0:
        return 0.0
    exponent = math.floor(math.log2(value))
    return math.ldexp(1.0, max(exponent - DOUBLE_BITS, -1074))
