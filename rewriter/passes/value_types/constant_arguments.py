"""Function arguments that an engine checks only when it calls the function.

Such an argument is validated on the rows that reach the function, so an invalid one
fails depending on the data: it must be a constant checked here. ``substring``'s start
and length, the unit of ``date_trunc``, the digits of ``round`` and ``LIKE`` patterns (a
pattern ending in its escape character fails on PostgreSQL only on the values that match
up to it). ``floor``, ``ceil`` and ``round`` take no further arguments.
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.errors import Rejected
from rewriter.output_names import function_name
from rewriter.passes.value_types.moments import TRUNC_UNITS

MAX_ROUND_DIGITS = 15  # round(x, d): |d| at most this (10^d is an exact double)
_MAX_INT4 = 2**31 - 1


def check_constant_arguments(node: exp.Expr, where: str, *, raw: bool = True) -> None:
    """Raise Rejected if an argument that an engine validates only when it calls the
    function (so only on the rows that reach it) is not a constant that is valid."""
    if isinstance(node, (exp.Floor, exp.Ceil, exp.Round)):
        extra = {key for key, value in node.args.items() if value is not None} - {"this"}
        if extra - ({"decimals"} if isinstance(node, exp.Round) else set()):
            # floor(x, d) is rewritten to arithmetic on the raw value (which overflows on
            # PostgreSQL for some values only); round(x, d, mode) fails on both engines.
            name = function_name(node)
            form = "round(x) or round(x, d)" if isinstance(node, exp.Round) else f"{name}(x)"
            raise Rejected(
                f"{name}() with {len(extra) + 1} arguments in {where}: only {form} is supported",
                hint="write round(x, d) to round to d decimal places, or floor(x) / ceil(x)",
            )
    if isinstance(node, exp.Substring):
        start, length = node.args.get("start"), node.args.get("length")
        for value, least in ((start, -_MAX_INT4), (length, 0)):
            if value is not None and constant_integer(value, least, _MAX_INT4) is None:
                raise Rejected(
                    f"{_written(node)} in {where}: substring needs constant whole numbers for its "
                    "start and length (a length of 0 or more); other values could fail on "
                    "some rows only, and the error would reveal them",
                    hint="for example substring(zip3, 1, 2)",
                )
    elif isinstance(node, (exp.DateTrunc, exp.TimestampTrunc)):
        unit = node.args.get("unit")
        if (
            not isinstance(unit, (exp.Var, exp.Literal))
            or unit.name.upper() not in TRUNC_UNITS
            or node.args.get("zone") is not None
        ):
            raise Rejected(
                f"{_written(node)} in {where}: date_trunc needs a constant unit of second, minute, "
                "hour, day, week, month, quarter or year",
                hint="for example date_trunc('month', visit_date)",
            )
    elif isinstance(node, exp.Round):
        digits = node.args.get("decimals")
        bound = MAX_ROUND_DIGITS
        least = 0 if raw else -bound  # raw DECIMAL(38,0) values overflow when rounded up
        if digits is not None and constant_integer(digits, least, bound) is None:
            raise Rejected(
                f"{_written(node)} in {where}: round(x, d) needs a constant whole number d from "
                f"{least} to {bound}",
                hint="for example round(cost, 1)",
            )
    elif isinstance(node, (exp.Like, exp.ILike)):
        pattern = node.expression
        if not (isinstance(pattern, exp.Literal) and pattern.is_string):
            raise Rejected(
                f"{_written(node)} in {where}: the pattern of LIKE must be a quoted text; a "
                "pattern computed from the data could be invalid on some rows only, and the "
                "error would reveal them",
                hint="for example diagnosis LIKE 'I1%'",
            )
        trailing = len(pattern.name) - len(pattern.name.rstrip("\\"))
        if trailing % 2:
            raise Rejected(
                f"{_written(node)} in {where}: the pattern ends with the escape character \\",
                hint="double it to match a backslash: LIKE 'a\\\\'",
            )


def _written(node: exp.Expr) -> str:
    """``node`` as the analyst would read it: written only for a message (writing each
    node checked would take time quadratic in the nesting of expressions)."""
    return node.sql(dialect="postgres")


def constant_integer(node: exp.Expr, least: int, most: int) -> int | None:
    """The whole number a literal (or a negated one) spells, if within [least, most]."""
    negative = isinstance(node, exp.Neg)
    literal = node.this if negative else node
    if not (isinstance(literal, exp.Literal) and literal.is_int):
        return None
    value = -int(literal.this) if negative else int(literal.this)
    return value if least <= value <= most else None
